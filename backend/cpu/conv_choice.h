#pragma once

// Which algorithm a CPU convolution pass runs: the rule measured per shape and pass
// (conv_choice.cc keeps the measurements), spelled as the words a plan records
// (choose-algorithms, `algo=gemm`) and the kernels read (conv_kernels.cc). Plain C++, no
// oneDNN: the compiler asks it through the CPU target (target_info.cc).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "ir/target.h"
#include "ir/types.h"

namespace tandem::ir {
class Node;
}

namespace tandem::backend::cpu {

/// How a convolution kernel runs.
enum class ConvStrategy {
  kAuto,     // the rule (chooseConvStrategy)
  kPlain,    // oneDNN on the plain NCHW/OIHW tensors themselves, no reorders
  kBlocked,  // oneDNN with format_tag::any, reorders from and to the plain tensors
  // Winograd F(4x4, 3x3) (oneDNN's convolution_winograd), reorders like kBlocked. oneDNN
  // has it for 3x3 filters at stride 1 with pad <= 1, on AVX-512 only; elsewhere the kernel
  // falls back to the direct rule.
  kWinograd,
  // im2col + oneDNN's matmul over chunks of images (gemm_conv.h): f32, groups 1, plain
  // activations; elsewhere the direct rule.
  kGemm,
  // Few input channels tap by tap in AVX-512 registers (tap_conv.h): the forward and the
  // backward filter, f32, groups 1, plain activations, rows as tapsApply says; elsewhere
  // (and for the backward data) the direct rule.
  kTaps,
};

/// How the plan spells a strategy: plain, blocked, winograd, gemm, taps ("auto" for kAuto).
absl::string_view strategyWord(ConvStrategy s);
/// The strategy spelled `word` (not kAuto), or nullopt.
std::optional<ConvStrategy> strategyNamed(absl::string_view word);

enum class ConvPass { kForward, kBackwardData, kBackwardFilter };

/// One convolution pass, read off its node: x is the input activations, w the filter
/// ([O, C/groups, KH, KW]), y the output.
struct ConvGeometry {
  ConvPass pass = ConvPass::kForward;
  ir::DType dtype = ir::DType::kF32;                        // the activations'
  int64_t batch = 0, channels = 0, height = 0, width = 0;   // x
  int64_t out_channels = 0, out_height = 0, out_width = 0;  // y
  int64_t kernel_h = 0, kernel_w = 0, groups = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;  // before the first row and column
  /// After the last: the padding the last window reaches (the IR rounds the output extent
  /// down, so with a symmetric pad the last rows of padding may never be read).
  int64_t pad_end_h = 0, pad_end_w = 0;
};

/// The geometry of a convolution-family node (conv2d, conv2d_stats, conv2d_bias_act and
/// the two backward ops), or nullopt for any other.
std::optional<ConvGeometry> convGeometry(const ir::Node& n);

/// What the host's oneDNN offers that the rule weighs.
struct ConvHost {
  bool avx512 = false;   // oneDNN's avx512_core kernels (Winograd among them)
  bool winograd = true;  // Winograd allowed (not conv_algorithm=direct)
};

/// Whether oneDNN's Winograd kernel can take the shape: 3x3 filters, stride 1, at most one
/// row or column of padding per side, no groups (creating the primitive says the rest).
bool winogradApplies(const ConvGeometry& g);

/// Whether kTaps's kernels take the pass of `g` (given AVX-512 and plain f32 activations):
/// no groups, stride 1 along the rows, input and output rows of at most 32 columns (two
/// vectors); a forward without padding, or a backward filter.
bool tapsApply(const ConvGeometry& g);

/// oneDNN's direct convolution, plain or blocked, by the measured rule.
ConvStrategy directStrategy(const ConvGeometry& g);

/// The fastest measured strategy for `g`; `gemm_runs`: kGemm (and kTaps) can take the node
/// as its layouts are (gemmRuns).
ConvStrategy chooseConvStrategy(const ConvGeometry& g, bool gemm_runs, const ConvHost& host);

/// Whether kGemm can run the node of `g`: no groups, and every operand and result 0 f32 in
/// plain NCHW between kernels (its copies are f32 loops over plain tensors).
bool gemmRuns(const ir::Node& n, const ConvGeometry& g, const ir::AlgorithmRules::LayoutOf& layout);

/// The CPU target's algorithm rules for the plan (ir/target.h): the strategies above as
/// words, for the convolution-family nodes.
ir::AlgorithmRules convAlgorithmRules(bool avx512);

}  // namespace tandem::backend::cpu
