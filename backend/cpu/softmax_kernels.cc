// softmax and log_softmax over an axis, and their backward ops, over the softmax cores
// (backend/cpu/softmax_core.h: oneDNN's softmax and logsoftmax primitives on the tensor
// seen as [outer, axis, inner]).

#include <memory>
#include <utility>

#include "backend/axis_split.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/softmax_core.h"
#include "ir/status_macros.h"

namespace tandem::backend::cpu {
namespace {

/// The core's spec of a (log_)softmax node or its backward op: the split of its result.
absl::StatusOr<SoftmaxSpec> specOf(const ir::Node& n, bool log) {
  const ir::TensorType& t = n.result()->type();
  ASSIGN_OR_RETURN(AxisSplit dims, splitAtAxis(t.shape, n.intAttr("axis"), n.describe(),
                                               log ? "log_softmax" : "softmax"));
  return SoftmaxSpec{.dims = dims, .data = t.dtype, .log = log};
}

class SoftmaxKernel final : public CpuKernel {
 public:
  explicit SoftmaxKernel(SoftmaxForward core) : core_(std::move(core)) {}
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    core_.run(in[0].data, out[0].data);
  }

 private:
  SoftmaxForward core_;
};

class SoftmaxBackwardKernel final : public CpuKernel {
 public:
  explicit SoftmaxBackwardKernel(SoftmaxBackward core) : core_(std::move(core)) {}
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    core_.run(in[1].data, in[0].data, out[0].data);  // (dy, y) -> dx
  }

 private:
  SoftmaxBackward core_;
};

KernelOr forward(const KernelInit& init, bool log) {
  ASSIGN_OR_RETURN(SoftmaxSpec spec, specOf(init.node, log));
  ASSIGN_OR_RETURN(SoftmaxForward core, SoftmaxForward::make(init.ctx, spec, init.node.describe()));
  return std::make_unique<SoftmaxKernel>(std::move(core));
}

KernelOr backward(const KernelInit& init, bool log) {
  ASSIGN_OR_RETURN(SoftmaxSpec spec, specOf(init.node, log));
  ASSIGN_OR_RETURN(SoftmaxBackward core,
                   SoftmaxBackward::make(init.ctx, spec, init.node.describe()));
  return std::make_unique<SoftmaxBackwardKernel>(std::move(core));
}

}  // namespace

KernelOr makeSoftmaxKernel(const KernelInit& i) { return forward(i, false); }
KernelOr makeLogSoftmaxKernel(const KernelInit& i) { return forward(i, true); }
KernelOr makeSoftmaxBackwardKernel(const KernelInit& i) { return backward(i, false); }
KernelOr makeLogSoftmaxBackwardKernel(const KernelInit& i) { return backward(i, true); }

}  // namespace tandem::backend::cpu
