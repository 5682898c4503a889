// scale, add_bcast, mul_bcast, reduce_sum/reduce_mean and their backward ops, concat_axis,
// slice_axis and slice_axis_backward on CUDA: own kernels, broadcast.cu (math in
// broadcast_math.h) and rows.cu's axis sum and spread (row_math.h), each host-tested
// against the CPU kernels (tests/cuda/broadcast_math_test.cc). f32 and bf16; the
// broadcasting ops and concat_axis also read an f32 master weight beside a bf16 result.

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "backend/axis_split.h"
#include "backend/broadcast_index.h"
#include "backend/cuda/broadcast_launch.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/rows_launch.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"

namespace tandem::backend::cuda {
namespace {

using Enqueue =
    std::function<void(cudaStream_t, absl::Span<const TensorView>, absl::Span<const TensorView>)>;

/// A kernel that is one enqueue of own kernels, fixed when the node was read.
class LaunchKernel final : public CudaKernel {
 public:
  LaunchKernel(CudaContext& ctx, Enqueue f) : CudaKernel(ctx), f_(std::move(f)) {}

 protected:
  absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out) override {
    f_(stream, in, out);
    return absl::OkStatus();
  }

 private:
  Enqueue f_;
};

KernelOr launchKernel(const KernelInit& init, Enqueue f) {
  return std::unique_ptr<CudaKernel>(new LaunchKernel(init.ctx, std::move(f)));
}

bool isBf16(const ir::Value* v) { return v->type().dtype == ir::DType::kBF16; }

/// The axis attribute of n as an index into `t`'s shape (the shape rule checked it).
size_t axisIn(const ir::Node& n, const ir::TensorType& t) {
  const int64_t a = n.intAttr("axis");
  return static_cast<size_t>(a < 0 ? a + t.rank() : a);
}

KernelOr scaleKernel(const KernelInit& init) {
  const bool bf16 = isBf16(init.node.result());
  const auto factor = static_cast<float>(init.node.floatAttr("factor"));
  return launchKernel(init, [bf16, factor](cudaStream_t s, auto in, auto out) {
    launchScale(in[0].data, out[0].data, bf16, factor, out[0].numElements(), s);
  });
}

KernelOr broadcastKernel(const KernelInit& init, bool mul) {
  const ir::Node& n = init.node;
  const ir::Shape& y = n.result()->type().shape;
  ASSIGN_OR_RETURN(BroadcastMap ma, broadcastMap(n.operand(0)->type().shape, y, n.describe()));
  ASSIGN_OR_RETURN(BroadcastMap mb, broadcastMap(n.operand(1)->type().shape, y, n.describe()));
  const bool a16 = isBf16(n.operand(0)), b16 = isBf16(n.operand(1)), y16 = isBf16(n.result());
  return launchKernel(init, [=](cudaStream_t s, auto in, auto out) {
    launchBroadcastBinary(in[0].data, a16, in[1].data, b16, out[0].data, y16, ma, mb, mul,
                          out[0].numElements(), s);
  });
}

KernelOr reduceKernel(const KernelInit& init, bool mean, bool backward) {
  const ir::Node& n = init.node;
  const ir::TensorType& x = n.operand(backward ? 1 : 0)->type();
  ASSIGN_OR_RETURN(AxisSplit d,
                   splitAtAxis(x.shape, n.intAttr("axis"), n.describe(), mean ? "mean" : "sum"));
  RETURN_IF_ERROR(checkNotEmpty(d, n.describe(), "reduction"));
  const bool bf16 = x.dtype == ir::DType::kBF16;
  return launchKernel(init, [=](cudaStream_t s, auto in, auto out) {
    if (backward) {  // (dy, x) -> dx; x gives the shape
      if (bf16)
        launchAxisSpread(static_cast<const uint16_t*>(in[0].data),
                         static_cast<uint16_t*>(out[0].data), d, mean, s);
      else
        launchAxisSpread(in[0].f32(), out[0].f32(), d, mean, s);
    } else if (bf16) {
      launchAxisSum(static_cast<const uint16_t*>(in[0].data), static_cast<uint16_t*>(out[0].data),
                    d, mean, s);
    } else {
      launchAxisSum(in[0].f32(), out[0].f32(), d, mean, s);
    }
  });
}

KernelOr concatAxisKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  const ir::TensorType& y = n.result()->type();
  ASSIGN_OR_RETURN(AxisSplit out, splitAtAxis(y.shape, n.intAttr("axis"), n.describe(), "concat"));
  std::vector<ir::Shape> shapes;
  std::vector<bool> bf16;
  for (const ir::Value* x : n.operands()) {
    shapes.push_back(x->type().shape);
    bf16.push_back(isBf16(x));
  }
  ASSIGN_OR_RETURN(std::vector<ConcatPart> parts,
                   concatParts(shapes, y.shape, axisIn(n, y), n.describe()));
  const bool y16 = y.dtype == ir::DType::kBF16;
  return launchKernel(init, [parts, bf16, out, y16](cudaStream_t s, auto in, auto res) {
    for (size_t k = 0; k < parts.size(); ++k)
      launchConcatPart(in[k].data, bf16[k], res[0].data, y16, parts[k].map, out.outer, parts[k].len,
                       out.inner, out.axis, parts[k].start, s);
  });
}

KernelOr sliceAxisKernel(const KernelInit& init, bool backward) {
  const ir::Node& n = init.node;
  const ir::TensorType& whole = backward ? n.result()->type() : n.operand(0)->type();
  const ir::TensorType& block = backward ? n.operand(0)->type() : n.result()->type();
  ASSIGN_OR_RETURN(AxisSplit d, splitAtAxis(whole.shape, n.intAttr("axis"), n.describe(), "slice"));
  const int64_t len = block.shape[axisIn(n, whole)], start = n.intAttr("start");
  const int bytes = static_cast<int>(ir::dtypeBytes(whole.dtype));
  return launchKernel(init, [=](cudaStream_t s, auto in, auto out) {
    launchSliceAxis(in[0].data, out[0].data, bytes, d.outer, len, d.inner, d.axis, start, backward,
                    s);
  });
}

}  // namespace

KernelOr makeScaleKernel(const KernelInit& i) { return scaleKernel(i); }
KernelOr makeAddBcastKernel(const KernelInit& i) { return broadcastKernel(i, false); }
KernelOr makeMulBcastKernel(const KernelInit& i) { return broadcastKernel(i, true); }
KernelOr makeReduceSumKernel(const KernelInit& i) { return reduceKernel(i, false, false); }
KernelOr makeReduceMeanKernel(const KernelInit& i) { return reduceKernel(i, true, false); }
KernelOr makeReduceSumBackwardKernel(const KernelInit& i) { return reduceKernel(i, false, true); }
KernelOr makeReduceMeanBackwardKernel(const KernelInit& i) { return reduceKernel(i, true, true); }
KernelOr makeConcatAxisKernel(const KernelInit& i) { return concatAxisKernel(i); }
KernelOr makeSliceAxisKernel(const KernelInit& i) { return sliceAxisKernel(i, false); }
KernelOr makeSliceAxisBackwardKernel(const KernelInit& i) { return sliceAxisKernel(i, true); }

}  // namespace tandem::backend::cuda
