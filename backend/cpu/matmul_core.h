#pragma once

// Batched matrix products with transpose flags (backend/matmul_shape.h) on oneDNN's
// matmul primitive: the forward product and, with matmulGradA/B, the two products of its
// backward pass. Transposes are strides of the operands' memory descriptors, so no
// transposed copy is ever made; oneDNN's matmul takes them as they are.
//
// Types: A and B f32 or bf16; the product runs in bf16 (f32 accumulation) when either is
// bf16, and an f32 operand beside a bf16 one (a master weight under mixed precision) is
// converted by a reorder into a temporary, as the linear kernels do; C f32 or bf16 (a
// bf16 product may write f32, as a weight gradient does). Optional: a bias of n values
// added to every row and a scale of the product (attention's 1/sqrt(d)).

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/cpu/cpu_context.h"
#include "backend/cpu/dnnl_util.h"
#include "backend/matmul_shape.h"
#include "ir/types.h"

namespace tandem::backend::cpu {

struct MatmulSpec {
  MatmulShape shape;
  ir::DType a = ir::DType::kF32, b = ir::DType::kF32, c = ir::DType::kF32;
  /// A bias of n values of this type (f32 or bf16) added to every row of C.
  std::optional<ir::DType> bias;
  /// C = scale * op(A) op(B) (+ bias).
  float scale = 1.0f;
  /// C += the product instead (oneDNN's sum post-op): a sum of products over chunks, as a
  /// convolution's filter gradient over the batch (gemm_conv.h).
  bool accumulate = false;
};

class MatmulCore {
 public:
  static absl::StatusOr<MatmulCore> make(CpuContext& ctx, const MatmulSpec& spec,
                                         absl::string_view where);

  /// c = op(a) op(b) per spec; bias null when the spec has none. c must not alias a or b.
  void run(const void* a, const void* b, const void* bias, void* c);

  const MatmulSpec& spec() const { return spec_; }
  /// oneDNN's implementation names (benchmarks; "brg:avx512_core..." or "gemm:jit").
  const std::string& implementations() const { return program_.implementations(); }

 private:
  MatmulCore(MatmulSpec spec, DnnlProgram p) : spec_(spec), program_(std::move(p)) {}
  MatmulSpec spec_;
  DnnlProgram program_;
};

}  // namespace tandem::backend::cpu
