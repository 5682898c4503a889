// matmul over the matmul core (backend/cpu/matmul_core.h: oneDNN's matmul primitive,
// transposes as strides, an f32 master weight beside bf16 activations reordered), and
// the shape ops: reshape (a row-major reshape keeps every byte where it is: one copy) and
// transpose (a oneDNN reorder from the input read through permuted strides).

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/matmul_core.h"
#include "backend/matmul_node.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"

namespace tandem::backend::cpu {
namespace {

class MatmulKernel final : public CpuKernel {
 public:
  explicit MatmulKernel(MatmulCore core) : core_(std::move(core)) {}
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    core_.run(in[0].data, in[1].data, nullptr, out[0].data);
  }

 private:
  MatmulCore core_;
};

}  // namespace

KernelOr makeMatmulKernel(const KernelInit& init) {
  const ir::MatmulView v(init.node);
  const MatmulSpec spec{.shape = matmulShapeOf(init.node),
                        .a = v.a()->type().dtype,
                        .b = v.b()->type().dtype,
                        .c = v.c()->type().dtype};
  ASSIGN_OR_RETURN(MatmulCore core, MatmulCore::make(init.ctx, spec, init.node.describe()));
  return std::make_unique<MatmulKernel>(std::move(core));
}

// y[i0, i1, ...] = x at index i along axis perm[0], ...: the input's memory described in
// y's axis order (its strides permuted), reordered into y's plain layout.
KernelOr makeTransposeKernel(const KernelInit& init) {
  const ir::TransposeView v(init.node);
  const ir::TensorType &x = v.x()->type(), &y = v.y()->type();
  const int64_t rank = x.rank();
  dnnl::memory::dims x_strides(static_cast<size_t>(rank)), dims, strides;
  int64_t stride = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    x_strides[static_cast<size_t>(i)] = stride;
    stride *= x.shape[static_cast<size_t>(i)];
  }
  for (int64_t p : v.perm()) {
    dims.push_back(x.shape[static_cast<size_t>(p)]);
    strides.push_back(x_strides[static_cast<size_t>(p)]);
  }
  if (rank == 0 || y.numElements() == 0) return makeByteCopyKernel();
  if (x.dtype == ir::DType::kF64)  // oneDNN has no f64 memory
    return absl::UnimplementedError(
        absl::StrCat(init.node.describe(), ": the CPU transpose takes f32, bf16 and i32, not f64"));
  try {
    DnnlProgram p(init.ctx);
    const DnnlProgram::Slot src = p.input(0, dnnl::memory::desc(dims, dnnlType(x.dtype), strides));
    p.storeTo(src, p.output(0, y));
    return std::make_unique<ProgramKernel>(std::move(p));
  } catch (const dnnl::error& e) {
    return dnnlFailure(init.node, "reorder primitive", e);
  }
}

}  // namespace tandem::backend::cpu
