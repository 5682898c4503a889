#include "runtime/nonfinite_variables.h"

#include <cmath>
#include <cstring>

#include "backend/processes.h"
#include "ir/status_macros.h"

namespace tandem::runtime {
namespace {

// Calls f(value) for each f32 or bf16 value of `t` (bf16 widened exactly).
template <typename F>
void forEachFloat(const HostTensor& t, F f) {
  const int64_t n = t.type.numElements();
  if (t.type.dtype == ir::DType::kF32) {
    for (int64_t i = 0; i < n; ++i) f(t.f32()[i]);
  } else if (t.type.dtype == ir::DType::kBF16) {
    const auto* bits = reinterpret_cast<const uint16_t*>(t.buffer.data());
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t wide = uint32_t{bits[i]} << 16;
      float v;
      std::memcpy(&v, &wide, sizeof v);
      f(v);
    }
  }
}

// This process's devices, as indices into Module::devices().
std::vector<size_t> localDevices(const ir::Module& m) {
  std::vector<size_t> out;
  for (size_t d = 0; d < m.devices().size(); ++d)
    if (m.devices()[d].rank == backend::Processes::current().rank()) out.push_back(d);
  return out;
}

}  // namespace

absl::StatusOr<NonFiniteVariables> findNonFiniteVariables(const Executor& ex) {
  const ir::Module& m = ex.module();
  NonFiniteVariables out;
  for (const ir::Var& v : m.vars()) {
    if (v.role == ir::VarRole::kFed) continue;
    ++out.checked;
    for (size_t d : localDevices(m)) {
      ASSIGN_OR_RETURN(HostTensor t, ex.readVariable(v.name, d));
      int64_t bad = 0;
      forEachFloat(t, [&bad](float x) { bad += std::isfinite(x) ? 0 : 1; });
      if (bad == 0) continue;
      if (out.names.empty()) {
        out.first_bad_values = bad;
        out.first_values = t.type.numElements();
      }
      out.names.push_back(v.name);
      break;
    }
  }
  return out;
}

}  // namespace tandem::runtime
