// reduce_sum and reduce_mean over an axis and their backward ops, on the reduction cores
// (backend/cpu/reduce_core.h: oneDNN's reduction primitive; the backward a broadcast copy),
// and concat_axis, slice_axis and slice_axis_backward.
//
// The copies are own loops, not oneDNN's concat: on plain row-major tensors its concat is
// one copy per (outer index, operand) too, and it neither broadcasts (a class token [1,1,D]
// beside [N,T,D] patch tokens) nor converts an f32 master weight into a bf16 result; a
// slice and its zero-padded backward have no primitive at all. Each copies runs of `inner`
// contiguous elements (memcpy where the dtypes agree); the index math is
// backend/broadcast_index.h's, which the CUDA kernels run too.

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/axis_split.h"
#include "backend/bf16.h"
#include "backend/broadcast_index.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/reduce_core.h"
#include "ir/status_macros.h"

namespace tandem::backend::cpu {
namespace {

// ---- reduce_sum, reduce_mean --------------------------------------------------------

/// The core's spec of a reduction node or its backward op: the split of x's shape.
absl::StatusOr<ReduceSpec> reduceSpecOf(const ir::Node& n, bool backward, Reduction kind) {
  const ir::TensorType& x = backward ? n.operand(1)->type() : n.operand(0)->type();
  ASSIGN_OR_RETURN(AxisSplit dims, splitAtAxis(x.shape, n.intAttr("axis"), n.describe(),
                                               kind == Reduction::kSum ? "sum" : "mean"));
  return ReduceSpec{.dims = dims, .data = x.dtype, .kind = kind};
}

class ReduceKernel final : public CpuKernel {
 public:
  explicit ReduceKernel(ReduceForward core) : core_(std::move(core)) {}
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    core_.run(in[0].data, out[0].data);
  }

 private:
  ReduceForward core_;
};

class ReduceBackwardKernel final : public CpuKernel {
 public:
  explicit ReduceBackwardKernel(ReduceSpec spec) : spec_(spec) {}
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    reduceBackward(spec_, in[0].data, out[0].data);  // (dy, x) -> dx; x gives the shape
  }

 private:
  ReduceSpec spec_;
};

KernelOr reduceKernel(const KernelInit& init, Reduction kind) {
  ASSIGN_OR_RETURN(ReduceSpec spec, reduceSpecOf(init.node, false, kind));
  ASSIGN_OR_RETURN(ReduceForward core, ReduceForward::make(init.ctx, spec, init.node.describe()));
  return std::make_unique<ReduceKernel>(std::move(core));
}

KernelOr reduceBackwardKernel(const KernelInit& init, Reduction kind) {
  ASSIGN_OR_RETURN(ReduceSpec spec, reduceSpecOf(init.node, true, kind));
  RETURN_IF_ERROR(checkNotEmpty(spec.dims, init.node.describe(), "reduction backward"));
  return std::make_unique<ReduceBackwardKernel>(spec);
}

// ---- concat_axis, slice_axis, slice_axis_backward -------------------------------------

/// Copies `n` elements from `src` (dtype From) to `dst` (To), converting through float.
template <typename From, typename To>
void copyRun(const From* src, To* dst, int64_t n) {
  if constexpr (std::is_same_v<From, To>) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(To));
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
  }
}

/// A concat operand's block (broadcast_index.h) and how the loop copies it.
struct CopyPart {
  ConcatPart part;
  bool rows_contiguous = false;  // the operand has every axis after the concat axis whole
  ir::DType dtype = ir::DType::kF32;
};

template <typename From, typename To>
void copyPart(const CopyPart& c, const From* x, To* y, const AxisSplit& out) {
  const ConcatPart& p = c.part;
  const int64_t rows = out.outer * p.len;
  for (int64_t r = 0; r < rows; ++r) {
    To* dst = y + blockToWhole(r * out.inner, p.len, out.inner, out.axis, p.start);
    if (c.rows_contiguous) {
      copyRun(x + p.map.source(r * out.inner), dst, out.inner);
    } else {
      for (int64_t i = 0; i < out.inner; ++i)
        dst[i] = static_cast<float>(x[p.map.source(r * out.inner + i)]);
    }
  }
}

class ConcatAxisKernel final : public CpuKernel {
 public:
  ConcatAxisKernel(std::vector<CopyPart> parts, AxisSplit out, ir::DType dtype)
      : parts_(std::move(parts)), out_(out), dtype_(dtype) {}
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    for (size_t k = 0; k < parts_.size(); ++k)
      withFloatType(parts_[k].dtype, [&](auto from) {
        withFloatType(dtype_, [&](auto to) {
          copyPart(parts_[k], in[k].as<decltype(from)>(), out[0].as<decltype(to)>(), out_);
        });
      });
  }

 private:
  std::vector<CopyPart> parts_;
  AxisSplit out_;
  ir::DType dtype_;
};

KernelOr concatAxisKernel(const KernelInit& init) {
  const ir::Node& n = init.node;
  const ir::TensorType& y = n.result()->type();
  ASSIGN_OR_RETURN(AxisSplit out, splitAtAxis(y.shape, n.intAttr("axis"), n.describe(), "concat"));
  const int64_t a = n.intAttr("axis") < 0 ? n.intAttr("axis") + y.rank() : n.intAttr("axis");
  std::vector<ir::Shape> shapes;
  for (const ir::Value* x : n.operands()) shapes.push_back(x->type().shape);
  ASSIGN_OR_RETURN(std::vector<ConcatPart> blocks,
                   concatParts(shapes, y.shape, static_cast<size_t>(a), n.describe()));
  std::vector<CopyPart> parts;
  for (size_t k = 0; k < blocks.size(); ++k) {
    const ir::Shape& x = shapes[k];
    parts.push_back(
        {.part = blocks[k],
         .rows_contiguous = std::equal(x.begin() + a + 1, x.end(), y.shape.begin() + a + 1),
         .dtype = n.operand(k)->type().dtype});
  }
  return std::make_unique<ConcatAxisKernel>(std::move(parts), out, y.dtype);
}

/// slice_axis (forward) copies the block [outer, len, inner] at start out of x;
/// slice_axis_backward writes dy there and zeros around it.
class SliceAxisKernel final : public CpuKernel {
 public:
  SliceAxisKernel(AxisSplit whole, int64_t len, int64_t start, bool backward)
      : whole_(whole), len_(len), start_(start), backward_(backward) {}
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    auto* whole = static_cast<char*>(backward_ ? out[0].data : in[0].data);
    auto* block = static_cast<char*>(backward_ ? in[0].data : out[0].data);
    const int64_t elem = ir::dtypeBytes(out[0].type.dtype);
    const int64_t run = len_ * whole_.inner * elem, skip = whole_.axis * whole_.inner * elem;
    if (backward_) std::memset(whole, 0, static_cast<size_t>(out[0].bytes()));
    for (int64_t o = 0; o < whole_.outer; ++o) {
      char* w = whole + o * skip + start_ * whole_.inner * elem;
      char* b = block + o * run;
      if (backward_)
        std::memcpy(w, b, static_cast<size_t>(run));
      else
        std::memcpy(b, w, static_cast<size_t>(run));
    }
  }

 private:
  AxisSplit whole_;
  int64_t len_, start_;
  bool backward_;
};

KernelOr sliceAxisKernel(const KernelInit& init, bool backward) {
  const ir::Node& n = init.node;
  const ir::TensorType& whole = backward ? n.result()->type() : n.operand(0)->type();
  const ir::TensorType& block = backward ? n.operand(0)->type() : n.result()->type();
  ASSIGN_OR_RETURN(AxisSplit dims,
                   splitAtAxis(whole.shape, n.intAttr("axis"), n.describe(), "slice"));
  const int64_t axis = n.intAttr("axis") < 0 ? n.intAttr("axis") + whole.rank() : n.intAttr("axis");
  const int64_t len = block.shape[static_cast<size_t>(axis)];
  return std::make_unique<SliceAxisKernel>(dims, len, n.intAttr("start"), backward);
}

}  // namespace

KernelOr makeReduceSumKernel(const KernelInit& i) { return reduceKernel(i, Reduction::kSum); }
KernelOr makeReduceMeanKernel(const KernelInit& i) { return reduceKernel(i, Reduction::kMean); }
KernelOr makeReduceSumBackwardKernel(const KernelInit& i) {
  return reduceBackwardKernel(i, Reduction::kSum);
}
KernelOr makeReduceMeanBackwardKernel(const KernelInit& i) {
  return reduceBackwardKernel(i, Reduction::kMean);
}
KernelOr makeConcatAxisKernel(const KernelInit& i) { return concatAxisKernel(i); }
KernelOr makeSliceAxisKernel(const KernelInit& i) { return sliceAxisKernel(i, false); }
KernelOr makeSliceAxisBackwardKernel(const KernelInit& i) { return sliceAxisKernel(i, true); }

}  // namespace tandem::backend::cpu
