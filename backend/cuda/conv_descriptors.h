#pragma once

// What a convolution node asks of cuDNN, as pure functions of the node's types and the
// run's settings (no GPU, no handle): the 4-d shapes of its descriptors, the data and
// compute types and math mode, where mixed precision needs a conversion, the rule that
// picks an algorithm from cuDNN's heuristic list, and the key under which the choice is
// cached process-wide. conv_kernels.cc turns these into descriptors; the host tests check
// them for several convolutions.

#include <cudnn.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/attrs.h"
#include "ir/types.h"

namespace tandem::backend::cuda {

enum class ConvPass { kForward, kBackwardData, kBackwardFilter };

/// The geometry of one convolution: x[n, c, h, w] * w[o, c/groups, kh, kw] ->
/// y[n, o, oh, ow], symmetric padding pad_h / pad_w and strides stride_h / stride_w per
/// axis, the channels in `groups` groups (cudnnSetConvolutionGroupCount).
struct ConvGeometry {
  int64_t n, c, h, w, o, kh, kw, oh, ow, stride_h, stride_w, pad_h, pad_w, groups = 1;
  /// The filter's input channels (its second axis): c / groups.
  int64_t filterChannels() const { return c / groups; }
  /// The filter's elements per (output, input) channel pair: kh * kw.
  int64_t window() const { return kh * kw; }
  bool operator==(const ConvGeometry&) const = default;
};

/// The geometry of x (activations), w (filter) with `stride`, `pad` (per axis) and
/// `groups`, the output extent rounded down as the IR rounds it (cuDNN's
/// cudnnGetConvolution2dForwardOutputDim rounds the same way). An error when a window does
/// not fit, the channels do not split into the groups, or a size does not fit the int that
/// cuDNN's 4-d descriptors take.
absl::StatusOr<ConvGeometry> convGeometry(const ir::TensorType& x, const ir::TensorType& w,
                                          ir::Hw stride, ir::Hw pad, int64_t groups = 1);

/// The types one convolution runs in.
struct ConvTypes {
  ir::DType act;            // x, y, dy, dx: f32 or bf16
  cudnnDataType_t data;     // x, w, y descriptors (cuDNN wants one type for all three)
  cudnnDataType_t compute;  // the convolution descriptor's: f32 accumulation always
  cudnnMathType_t math;     // FMA when f32 must not round through TF32
  bool convert_w = false;   // f32 master weights converted to bf16 before the call
  bool widen_dw = false;    // backward filter: cuDNN's bf16 dw widened to the f32 master dtype
  // cuDNN's tensors NHWC and its filter KRSC (layout_plan.h), else NCHW and KCRS; set by
  // the kernel from the plan, not by convTypes.
  bool nhwc = false;
  bool operator==(const ConvTypes&) const = default;
};

/// Types for activations `act` beside a filter (and its gradient) of dtype `weight`
/// (equal, or f32 master weights under bf16 activations). TF32 applies to f32 only:
/// CUDNN_DEFAULT_MATH lets cuDNN use tensor cores (rounding f32 inputs to TF32),
/// CUDNN_FMA_MATH keeps f32 products exact (--no-tf32). bf16 runs as cuDNN's
/// PSEUDO_BFLOAT16 configuration: bf16 data, f32 compute.
absl::StatusOr<ConvTypes> convTypes(ir::DType act, ir::DType weight, bool allow_tf32);

/// One entry of cuDNN's heuristic list (cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t
/// reduced to what the choice reads).
struct AlgoCandidate {
  int algo;
  cudnnStatus_t status;
  cudnnDeterminism_t determinism;
  cudnnMathType_t math;
  int64_t memory = 0;  // workspace bytes it needs
};

/// The most workspace an algorithm may need to be chosen (some FFT variants ask for
/// gigabytes; the next one in the list is rarely much slower).
constexpr int64_t kMaxConvWorkspace = int64_t{1} << 30;

/// What a kernel runs: the algorithm and the math type its descriptor gets.
struct AlgoChoice {
  int algo;
  cudnnMathType_t math;
  bool operator==(const AlgoChoice&) const = default;
};

/// The usable candidates in the order to try them (cuDNN lists them best first):
/// supported, within `max_workspace` bytes, without tensor-core math when the types ask for
/// FMA; the deterministic ones first (runs stay bit-identical), then the others. With FMA
/// the descriptor keeps FMA whatever the entry says; otherwise it takes the entry's math
/// type (cuDNN's heuristics may list tensor-op variants). An algorithm listed twice (two
/// math types) is tried with each.
std::vector<AlgoChoice> usableAlgos(const std::vector<AlgoCandidate>& candidates,
                                    const ConvTypes& types,
                                    int64_t max_workspace = kMaxConvWorkspace);

/// The first of usableAlgos; an error when nothing qualifies.
absl::StatusOr<AlgoChoice> chooseAlgo(const std::vector<AlgoCandidate>& candidates,
                                      const ConvTypes& types,
                                      int64_t max_workspace = kMaxConvWorkspace);

/// What choosing an algorithm asks of cuDNN for one convolution. The kernel's own is a
/// thin pass-through to cuDNN on scratch tensors of the convolution's sizes; the host
/// tests give one that refuses chosen algorithms.
class ConvAlgoTrials {
 public:
  virtual ~ConvAlgoTrials() = default;
  /// cuDNN's heuristic list (cudnnGet*Algorithm_v7), best first.
  virtual absl::StatusOr<std::vector<AlgoCandidate>> heuristics() = 0;
  /// Every algorithm run and timed once on the scratch tensors (cudnnFind*AlgorithmEx),
  /// fastest first.
  virtual absl::StatusOr<std::vector<AlgoCandidate>> measured() = 0;
  /// One run of `choice` on the scratch tensors with its own workspace, waited for: OK
  /// when it ran, else cuDNN's (or CUDA's) refusal.
  virtual absl::Status tryRun(const AlgoChoice& choice) = 0;
};

/// The algorithm a convolution runs, as PyTorch chooses: candidates tried in
/// usableAlgos' order until one runs, from cuDNN's heuristics, or first from cudnnFind's
/// measurements when `measure` (--conv-algorithm measure). Where no heuristic candidate
/// runs, the measured ones are tried too. An error names every refusal. Only algorithms
/// within `max_workspace` bytes qualify (what the plan leaves cuDNN, or kMaxConvWorkspace).
absl::StatusOr<AlgoChoice> chooseRunnableAlgo(ConvAlgoTrials& trials, const ConvTypes& types,
                                              bool measure,
                                              int64_t max_workspace = kMaxConvWorkspace);

/// "algorithm 6 (tensor-op math)": a choice as errors name it.
std::string describeAlgo(const AlgoChoice& choice);

/// The process-wide cache key of an algorithm choice: pass, geometry, types, math mode,
/// layout and GPU ordinal, as a readable string ("fwd bf16/f32 x2x16x8x8 w32x3 s1 p1 ...").
std::string algoCacheKey(ConvPass pass, const ConvGeometry& g, const ConvTypes& t, int gpu);

}  // namespace tandem::backend::cuda
