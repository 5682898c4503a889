#include "backend/cuda/conv_descriptors.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "backend/cuda/algo_walk.h"

namespace tandem::backend::cuda {

absl::StatusOr<ConvGeometry> convGeometry(const ir::TensorType& x, const ir::TensorType& w,
                                          ir::Hw stride, ir::Hw pad, int64_t groups) {
  if (x.shape.size() != 4 || w.shape.size() != 4)
    return absl::InvalidArgumentError("a convolution takes x[N,C,H,W] and w[O,C/groups,KH,KW]");
  if (std::min(stride.h, stride.w) < 1 || std::min(pad.h, pad.w) < 0 || groups < 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "stride ", ir::toString(stride.toAttr()), ", padding ", ir::toString(pad.toAttr()),
        " and groups ", groups, " must be >= 1, >= 0 and >= 1"));
  if (x.shape[1] != w.shape[1] * groups || w.shape[0] % groups != 0)
    return absl::InvalidArgumentError(absl::StrCat("filter ", ir::toString(w), " of ", groups,
                                                   " groups does not fit input ", ir::toString(x)));
  ConvGeometry g{.n = x.shape[0],
                 .c = x.shape[1],
                 .h = x.shape[2],
                 .w = x.shape[3],
                 .o = w.shape[0],
                 .kh = w.shape[2],
                 .kw = w.shape[3],
                 .oh = 0,
                 .ow = 0,
                 .stride_h = stride.h,
                 .stride_w = stride.w,
                 .pad_h = pad.h,
                 .pad_w = pad.w,
                 .groups = groups};
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  for (int64_t v :
       {g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.groups})
    if (v > kIntMax) return absl::InvalidArgumentError("a convolution size exceeds cuDNN's int");
  if (g.h + 2 * g.pad_h < g.kh || g.w + 2 * g.pad_w < g.kw)
    return absl::InvalidArgumentError(absl::StrCat("a ", g.kh, "x", g.kw, " window does not fit ",
                                                   ir::toString(x), " with padding ",
                                                   ir::toString(pad.toAttr())));
  g.oh = (g.h + 2 * g.pad_h - g.kh) / g.stride_h + 1;
  g.ow = (g.w + 2 * g.pad_w - g.kw) / g.stride_w + 1;
  // cuDNN's 4-d descriptors take int strides: every tensor's element count must fit too.
  if (x.numElements() > kIntMax || w.numElements() > kIntMax || g.n * g.o * g.oh * g.ow > kIntMax)
    return absl::InvalidArgumentError(
        absl::StrCat("a tensor of the convolution of ", ir::toString(x),
                     " holds more elements than cuDNN's 4-d descriptors can stride over"));
  return g;
}

absl::StatusOr<ConvTypes> convTypes(ir::DType act, ir::DType weight, bool allow_tf32) {
  if (act == ir::DType::kF32 && weight == ir::DType::kF32)
    return ConvTypes{act, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT,
                     allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH};
  if (act == ir::DType::kBF16 && (weight == ir::DType::kBF16 || weight == ir::DType::kF32)) {
    const bool master = weight == ir::DType::kF32;
    return ConvTypes{act,   CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, CUDNN_DEFAULT_MATH, master,
                     master};
  }
  return absl::UnimplementedError(absl::StrCat("no CUDA convolution of ", ir::dtypeName(act),
                                               " activations with a ", ir::dtypeName(weight),
                                               " filter"));
}

std::vector<AlgoChoice> usableAlgos(const std::vector<AlgoCandidate>& candidates,
                                    const ConvTypes& types, int64_t max_workspace) {
  const bool fma = types.math == CUDNN_FMA_MATH;
  auto usable = [&](const AlgoCandidate& c) {
    if (c.status != CUDNN_STATUS_SUCCESS || c.memory > max_workspace) return false;
    return !fma ||
           (c.math != CUDNN_TENSOR_OP_MATH && c.math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
  };
  std::vector<AlgoChoice> out;
  // Deterministic first; a shape that has none still runs (only its bits may vary).
  for (bool deterministic : {true, false})
    for (const AlgoCandidate& c : candidates) {
      if (!usable(c) || (c.determinism == CUDNN_DETERMINISTIC) != deterministic) continue;
      const AlgoChoice choice{c.algo, fma ? CUDNN_FMA_MATH : c.math};
      if (std::find(out.begin(), out.end(), choice) == out.end()) out.push_back(choice);
    }
  return out;
}

absl::StatusOr<AlgoChoice> chooseAlgo(const std::vector<AlgoCandidate>& candidates,
                                      const ConvTypes& types, int64_t max_workspace) {
  const std::vector<AlgoChoice> usable = usableAlgos(candidates, types, max_workspace);
  if (!usable.empty()) return usable.front();
  return absl::NotFoundError(
      absl::StrCat("cuDNN's heuristics list no supported algorithm within ", max_workspace,
                   " bytes of workspace among ", candidates.size(),
                   types.math == CUDNN_FMA_MATH ? " (f32 without TF32)" : ""));
}

std::string describeAlgo(const AlgoChoice& choice) {
  const char* math = choice.math == CUDNN_FMA_MATH         ? "FMA math"
                     : choice.math == CUDNN_TENSOR_OP_MATH ? "tensor-op math"
                     : choice.math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                         ? "tensor-op math, converting"
                         : "default math";
  return absl::StrCat("algorithm ", choice.algo, " (", math, ")");
}

absl::StatusOr<AlgoChoice> chooseRunnableAlgo(ConvAlgoTrials& trials, const ConvTypes& types,
                                              bool measure, int64_t max_workspace) {
  std::string refusals;
  // Heuristics first unless measuring was asked; the measured list is the fallback (it
  // times every algorithm, so it is paid only where the heuristics' all refuse).
  for (bool from_measurements : {measure, !measure}) {
    absl::StatusOr<std::vector<AlgoCandidate>> listed =
        from_measurements ? trials.measured() : trials.heuristics();
    const char* source = from_measurements ? "cudnnFind's measurements" : "cuDNN's heuristics";
    if (!listed.ok()) {
      absl::StrAppend(&refusals, refusals.empty() ? "" : "; ", source, ": ",
                      listed.status().message());
      continue;
    }
    const std::vector<AlgoChoice> usable = usableAlgos(*listed, types, max_workspace);
    absl::StatusOr<size_t> ran = firstThatRuns(
        usable, describeAlgo, [&](const AlgoChoice& c) { return trials.tryRun(c); },
        absl::StrCat(source, " (", listed->size(), " listed, ", usable.size(), " usable)"));
    if (ran.ok()) return usable[*ran];
    absl::StrAppend(&refusals, refusals.empty() ? "" : "; ", ran.status().message());
  }
  return absl::UnimplementedError(absl::StrCat("no cuDNN algorithm runs this convolution",
                                               types.math == CUDNN_FMA_MATH ? " without TF32" : "",
                                               ": ", refusals));
}

std::string algoCacheKey(ConvPass pass, const ConvGeometry& g, const ConvTypes& t, int gpu) {
  const char* p = pass == ConvPass::kForward        ? "fwd"
                  : pass == ConvPass::kBackwardData ? "bwd-data"
                                                    : "bwd-filter";
  return absl::StrCat(p, " data", static_cast<int>(t.data), " compute", static_cast<int>(t.compute),
                      " math", static_cast<int>(t.math), " x", g.n, "x", g.c, "x", g.h, "x", g.w,
                      " w", g.o, "x", g.filterChannels(), "x", g.kh, "x", g.kw, " y", g.n, "x", g.o,
                      "x", g.oh, "x", g.ow, " s", g.stride_h, "x", g.stride_w, " p", g.pad_h, "x",
                      g.pad_w, " g", g.groups, t.nhwc ? " nhwc" : " nchw", " gpu", gpu);
}

}  // namespace tandem::backend::cuda
