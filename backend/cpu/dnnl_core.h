#pragma once

// What the compute cores over oneDNN share (matmul_core.h, layer_norm_core.h,
// softmax_core.h, reduce_core.h): a core is made once, when its
// kernel is made (on the host thread with the device's OpenMP thread count set, because
// oneDNN fixes a primitive's threads when it is created), and run every step on the
// stream's worker thread over raw pointers. A core knows no ir::Node: `where` (the
// node's description, from the kernel that owns the core) prefixes its errors.

#include <array>
#include <cassert>
#include <initializer_list>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "backend/cpu/dnnl_util.h"
#include "ir/status_macros.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace tandem::backend::cpu {

/// Builds a DnnlProgram with `build(program)`; a dnnl::error (no implementation for
/// these shapes and types, out of memory) becomes "<where>: oneDNN could not create the
/// <what>: <message> (status N)".
template <typename Build>
absl::StatusOr<DnnlProgram> buildCoreProgram(CpuContext& ctx, absl::string_view where,
                                             absl::string_view what, Build build) {
  try {
    DnnlProgram p(ctx);
    build(p);
    return p;
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat(where, ": oneDNN could not create the ", what, ": ",
                                            e.what(), " (status ", static_cast<int>(e.status),
                                            ")"));
  }
}

/// Runs `p` over operand pointers `in` and result pointers `out` (in the order the slots
/// were declared with DnnlProgram::input(i, ...) and output(i, ...)). Null for a slot the
/// program does not have.
inline void runCoreProgram(DnnlProgram& p, std::initializer_list<const void*> in,
                           std::initializer_list<void*> out) {
  // DnnlProgram binds views; only their pointers matter here. oneDNN takes non-const
  // handles for inputs too and does not write them.
  constexpr size_t kMaxSlots = 8;
  std::array<TensorView, kMaxSlots> in_views, out_views;
  assert(in.size() <= kMaxSlots && out.size() <= kMaxSlots);
  size_t i = 0;
  for (const void* d : in) in_views[i++].data = const_cast<void*>(d);
  i = 0;
  for (void* d : out) out_views[i++].data = d;
  p.run(absl::MakeConstSpan(in_views.data(), in.size()),
        absl::MakeConstSpan(out_views.data(), out.size()));
}

/// Row-major strides of `dims`.
inline dnnl::memory::dims denseStrides(const dnnl::memory::dims& dims) {
  dnnl::memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

/// Dense row-major memory of `dims` in `type`.
inline dnnl::memory::desc denseDesc(const dnnl::memory::dims& dims, ir::DType type) {
  return dnnl::memory::desc(dims, dnnlType(type), denseStrides(dims));
}

/// "f32 or bf16" check shared by the cores: an error naming `where` and `role` otherwise.
inline absl::Status checkFloatType(absl::string_view where, absl::string_view role, ir::DType t) {
  if (t == ir::DType::kF32 || t == ir::DType::kBF16) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": ", role, " must be f32 or bf16, not ", ir::dtypeName(t)));
}

}  // namespace tandem::backend::cpu
