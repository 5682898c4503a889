#include "backend/cpu/matmul_core.h"

#include "backend/cpu/dnnl_core.h"

namespace tandem::backend::cpu {
namespace {

using dnnl::memory;

/// A stored [batch, rows, cols] matrix (2-D when the product has no batch) read as
/// [batch, cols, rows] when `transposed`: the same memory, strides swapped.
memory::desc operandDesc(bool batched, int64_t batch, int64_t rows, int64_t cols, bool transposed,
                         ir::DType type) {
  const int64_t out_rows = transposed ? cols : rows, out_cols = transposed ? rows : cols;
  const int64_t row_stride = transposed ? 1 : cols, col_stride = transposed ? cols : 1;
  if (!batched) return memory::desc({out_rows, out_cols}, dnnlType(type), {row_stride, col_stride});
  return memory::desc({batch, out_rows, out_cols}, dnnlType(type),
                      {rows * cols, row_stride, col_stride});
}

absl::Status checkSpec(const MatmulSpec& s, absl::string_view where) {
  const MatmulShape& m = s.shape;
  if (m.batch < 1 || m.m < 1 || m.n < 1 || m.k < 1)
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": matmul ", describe(m), " has an empty dimension"));
  RETURN_IF_ERROR(checkFloatType(where, "matmul's A", s.a));
  RETURN_IF_ERROR(checkFloatType(where, "matmul's B", s.b));
  RETURN_IF_ERROR(checkFloatType(where, "matmul's C", s.c));
  if (s.bias) RETURN_IF_ERROR(checkFloatType(where, "matmul's bias", *s.bias));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MatmulCore> MatmulCore::make(CpuContext& ctx, const MatmulSpec& spec,
                                            absl::string_view where) {
  RETURN_IF_ERROR(checkSpec(spec, where));
  const MatmulShape& s = spec.shape;
  const bool batched = s.batch > 1;
  // bf16 if either operand is: the f32 one is converted (mixed precision).
  const ir::DType compute =
      spec.a == ir::DType::kBF16 || spec.b == ir::DType::kBF16 ? ir::DType::kBF16 : ir::DType::kF32;
  ASSIGN_OR_RETURN(
      DnnlProgram p, buildCoreProgram(ctx, where, "matmul primitive", [&](DnnlProgram& p) {
        const memory::desc a =
            operandDesc(batched, s.aBatch(), s.aRows(), s.aCols(), s.trans_a, spec.a);
        const memory::desc b =
            operandDesc(batched, s.bBatch(), s.bRows(), s.bCols(), s.trans_b, spec.b);
        const memory::desc a_c =
            operandDesc(batched, s.aBatch(), s.aRows(), s.aCols(), s.trans_a, compute);
        const memory::desc b_c =
            operandDesc(batched, s.bBatch(), s.bRows(), s.bCols(), s.trans_b, compute);
        const memory::desc c =
            batched ? denseDesc({s.batch, s.m, s.n}, spec.c) : denseDesc({s.m, s.n}, spec.c);
        memory::desc bias;
        if (spec.bias)
          bias = batched ? denseDesc({1, 1, s.n}, *spec.bias) : denseDesc({1, s.n}, *spec.bias);
        dnnl::primitive_attr attr = userScratchpadAttr();
        if (spec.scale != 1.0f) attr.set_output_scales(0, {spec.scale});
        if (spec.accumulate) {
          dnnl::post_ops sum;
          sum.append_sum(1.0f);
          attr.set_post_ops(sum);
        }
        using Desc = dnnl::matmul::desc;
        dnnl::matmul::primitive_desc pd(spec.bias ? Desc(a_c, b_c, bias, c) : Desc(a_c, b_c, c),
                                        attr, p.engine());
        std::vector<std::pair<int, DnnlProgram::Slot>> args{
            {DNNL_ARG_SRC, p.inputAs(p.input(0, a), a_c)},
            {DNNL_ARG_WEIGHTS, p.inputAs(p.input(1, b), b_c)},
            {DNNL_ARG_DST, p.output(0, c)}};
        if (spec.bias) args.emplace_back(DNNL_ARG_BIAS, p.input(2, bias));
        p.add(pd, dnnl::matmul(pd), args);
      }));
  return MatmulCore(spec, std::move(p));
}

void MatmulCore::run(const void* a, const void* b, const void* bias, void* c) {
  runCoreProgram(program_, {a, b, bias}, {c});
}

}  // namespace tandem::backend::cpu
