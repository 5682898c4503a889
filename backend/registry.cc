// The one place that knows which device kinds this build has: the CPU backend always,
// the CUDA backend when the build found nvcc (it is there on machines without a GPU too,
// where making a device says so).

#include <algorithm>
#include <array>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#if defined(TANDEM_HAVE_CUDA)
#include "backend/cuda/cuda_device.h"
#endif

namespace tandem::backend {
namespace {

constexpr size_t kKinds = 2;  // ir::DeviceKind: cpu, cuda

struct Registry {
  std::mutex mu;
  std::array<const Backend*, kKinds> by_kind{};
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry();  // never destroyed: backends outlive every executor
    reg->by_kind[static_cast<size_t>(ir::DeviceKind::kCpu)] = &cpu::cpuBackend();
#if defined(TANDEM_HAVE_CUDA)
    reg->by_kind[static_cast<size_t>(ir::DeviceKind::kCuda)] = &cuda::cudaBackend();
#endif
    return reg;
  }();
  return *r;
}

const char* kindName(ir::DeviceKind kind) { return kind == ir::DeviceKind::kCpu ? "cpu" : "cuda"; }

}  // namespace

absl::StatusOr<const Backend*> backendFor(ir::DeviceKind kind) {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  if (const Backend* b = r.by_kind[static_cast<size_t>(kind)]) return b;
  return absl::UnimplementedError(
      absl::StrCat("this build has no ", kindName(kind),
                   " backend (use cpu:N devices; docs/GPU.md says what a CUDA build needs)"));
}

absl::StatusOr<int64_t> alignmentFor(absl::Span<const ir::Device> devices) {
  int64_t alignment = 1;
  for (const ir::Device& d : devices) {
    auto b = backendFor(d.kind);
    if (!b.ok())
      return absl::Status(b.status().code(),
                          absl::StrCat(ir::toString(d), ": ", b.status().message()));
    alignment = std::max(alignment, (*b)->alignment());
  }
  return alignment;
}

std::string describeBackends() {
  std::string out;
  for (ir::DeviceKind kind : {ir::DeviceKind::kCpu, ir::DeviceKind::kCuda}) {
    auto b = backendFor(kind);
    absl::StrAppend(&out, kindName(kind), ": ",
                    b.ok() ? (*b)->describe() : std::string(b.status().message()), "\n");
  }
  return out;
}

ScopedBackendOverride::ScopedBackendOverride(const Backend& backend) : kind_(backend.kind()) {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  previous_ = std::exchange(r.by_kind[static_cast<size_t>(kind_)], &backend);
}

ScopedBackendOverride::~ScopedBackendOverride() {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  r.by_kind[static_cast<size_t>(kind_)] = previous_;
}

}  // namespace tandem::backend
