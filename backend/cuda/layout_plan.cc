#include "backend/cuda/layout_plan.h"

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace tandem::backend::cuda {
namespace {

using ir::Op;

/// Links of the convolution family's slots (activation_layout.h): x-shaped tensors
/// (x, dx) are link 0, y-shaped ones (y, dy, conv2d_bias_act's residual) link 1,
/// conv2d_backward_data's x (read for its shape only) link 2. The kernel runs cuDNN in
/// NHWC when either side is NHWC and transposes the other side through its workspace,
/// so the two sides are independent (the stem convolution reads the NCHW image).
std::optional<int> convSlot(Op op, bool result, size_t i) {
  switch (op) {
    case Op::kConv2d:
    case Op::kConv2dStats:
      if (result) return i == 0 ? std::optional<int>(1) : std::nullopt;  // y; stats
      return i == 0 ? std::optional<int>(0) : std::nullopt;              // x; w, b
    case Op::kConv2dBiasAct:
      if (result) return 1;                                  // y
      if (i == 0) return 0;                                  // x
      return i == 3 ? std::optional<int>(1) : std::nullopt;  // residual; w, b
    case Op::kConv2dBackwardData:
      if (result) return 0;                                  // dx
      if (i == 0) return 1;                                  // dy
      return i == 2 ? std::optional<int>(2) : std::nullopt;  // x; w
    case Op::kConv2dBackwardFilter:
      if (result) return std::nullopt;                                    // dw, db
      return i <= 1 ? std::optional<int>(i == 0 ? 1 : 0) : std::nullopt;  // dy, x; w
    default:
      return std::nullopt;
  }
}

std::optional<int> cudaSlot(Op op, bool result, size_t i) {
  switch (op) {
    case Op::kConv2d:
    case Op::kConv2dStats:
    case Op::kConv2dBiasAct:
    case Op::kConv2dBackwardData:
    case Op::kConv2dBackwardFilter:
      return convSlot(op, result, i);
    // One layout for every 4-D tensor of the node: per-channel kernels see NHWC as
    // [N*H*W, C, 1] (norm_launch.h), elementwise ones do not care, pooling walks its planes
    // with a pixel step (pool_math.h).
    case Op::kBatchNorm:
    case Op::kBatchNormBackward:
    case Op::kBatchNormApply:
    case Op::kBatchNormRecompute:
    case Op::kBatchNormBackwardReduce:
    case Op::kBatchNormBackwardApply:
    case Op::kAdd:
    case Op::kRelu:
    case Op::kReluBackward:
    case Op::kCast:
    case Op::kMaxPool2d:
    case Op::kAvgPool2d:
    case Op::kMaxPool2dBackward:
    case Op::kAvgPool2dBackward:
      return 0;
    // global_avg_pool's [N,C,1,1] output is the same bytes in both layouts: plain.
    case Op::kGlobalAvgPool:
      return result ? std::nullopt : std::optional<int>(0);
    case Op::kGlobalAvgPoolBackward:  // dy (plain), x -> dx
      return result || i == 1 ? std::optional<int>(0) : std::nullopt;
    default:
      return std::nullopt;
  }
}

bool eligible(const ir::Value& v) {
  // NHWC pays where a pixel's channels are whole 16-byte vectors: cuDNN's channels-last
  // tensor-core kernels load 128 bits at a time (bf16: C % 8 == 0, the multiple of 8 its
  // documentation asks for; f32 under TF32: C % 4 == 0); narrower tensors (the RGB image,
  // LeNet's 6 channels) would be padded by cuDNN inside every call.
  const ir::TensorType& t = v.type();
  if (t.dtype != ir::DType::kF32 && t.dtype != ir::DType::kBF16) return false;
  return t.shape[1] * ir::dtypeBytes(t.dtype) % 16 == 0;
}

}  // namespace

const LayoutRules& nhwcRules() {
  static const LayoutRules* rules = new LayoutRules{.eligible = eligible, .slot = cudaSlot};
  return *rules;
}

absl::flat_hash_set<const ir::Value*> nhwcValues(const ir::Graph& g) {
  return alternativeLayoutValues(g, nhwcRules());
}

absl::Status checkNhwcSlots(const ir::Node& node,
                            const absl::flat_hash_set<const ir::Value*>& nhwc) {
  absl::flat_hash_map<int, bool> link_nhwc;  // the layout of each link's first 4-D value
  auto check = [&](const ir::Value* v, bool result, size_t i) -> absl::Status {
    const bool is_nhwc = nhwc.contains(v);
    const std::optional<int> link = cudaSlot(node.op(), result, i);
    const std::string slot = absl::StrCat(result ? "result " : "operand ", i);
    if (is_nhwc && (!link || v->type().shape.size() != 4))
      return absl::InternalError(absl::StrCat(node.describe(), ": the layout plan gives ", slot,
                                              " in NHWC, which this CUDA kernel cannot take"));
    if (!link || v->type().shape.size() != 4) return absl::OkStatus();
    auto [it, inserted] = link_nhwc.emplace(*link, is_nhwc);
    if (!inserted && it->second != is_nhwc)
      return absl::InternalError(absl::StrCat(node.describe(), ": the layout plan gives ", slot,
                                              " another layout than the tensors it must share "
                                              "one with"));
    return absl::OkStatus();
  };
  for (size_t i = 0; i < node.numOperands(); ++i)
    if (absl::Status s = check(node.operand(i), false, i); !s.ok()) return s;
  for (size_t r = 0; r < node.numResults(); ++r)
    if (absl::Status s = check(node.result(r), true, r); !s.ok()) return s;
  return absl::OkStatus();
}

}  // namespace tandem::backend::cuda
