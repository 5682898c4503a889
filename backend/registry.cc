// The registry of backends by kind name, in the backend API: the runtime looks backends up
// here and never names one. Which kinds a build has is registerBackends's business
// (backend/backends.cc), which programs link and call.

#include <algorithm>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/backend.h"

namespace tandem::backend {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<const Backend*> by_kind;  // indexed by kind id; null: none in this build
  std::vector<const Backend*> order;    // registration order
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: backends outlive every executor
  return *r;
}

const Backend* find(ir::DeviceKind kind) {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  return kind.id() < r.by_kind.size() ? r.by_kind[kind.id()] : nullptr;
}

}  // namespace

void registerBackend(const Backend& b) {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  const size_t id = b.kind().id();
  if (r.by_kind.size() <= id) r.by_kind.resize(id + 1, nullptr);
  if (r.by_kind[id] == nullptr) r.order.push_back(&b);
  r.by_kind[id] = &b;
}

absl::StatusOr<const Backend*> backendFor(ir::DeviceKind kind) {
  if (const Backend* b = find(kind)) return b;
  if (registeredBackends().empty())  // a program's mistake, not its build's
    return absl::FailedPreconditionError(absl::StrCat(
        "no backend for device kind '", kind.name(),
        "': no backend is registered (a program calls backend::registerBackends first)"));
  if (const ir::TargetInfo* t = ir::findTarget(kind))
    return absl::UnimplementedError(absl::StrCat(
        "this build has no ", kind.name(), " backend", t->missing_backend_hint.empty() ? "" : " (",
        t->missing_backend_hint, t->missing_backend_hint.empty() ? "" : ")"));
  std::vector<std::string> known;
  for (const Backend* b : registeredBackends()) known.emplace_back(b->kind().name());
  return absl::UnimplementedError(absl::StrCat("no backend for device kind '", kind.name(),
                                               "' (this build has ", absl::StrJoin(known, ", "),
                                               ")"));
}

std::vector<const Backend*> registeredBackends() {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  return r.order;
}

std::string describeBackends() {
  std::string out;
  for (const ir::TargetInfo* t : ir::registeredTargets()) {
    auto b = backendFor(t->kind);
    absl::StrAppend(&out, t->kind.name(), ": ",
                    b.ok() ? (*b)->describe() : std::string(b.status().message()), "\n",
                    "  compiles for: ", ir::describeTarget(*t), "\n");
  }
  return out;
}

std::string backendVersions() {
  std::string out;
  for (const ir::TargetInfo* t : ir::registeredTargets()) {
    auto b = backendFor(t->kind);
    absl::StrAppend(&out, t->kind.name(),
                    " backend: ", b.ok() ? (*b)->version() : "none in this build", "\n");
  }
  return out;
}

ScopedBackendOverride::ScopedBackendOverride(const Backend& backend) : kind_(backend.kind()) {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  const size_t id = kind_.id();
  if (r.by_kind.size() <= id) r.by_kind.resize(id + 1, nullptr);
  previous_ = std::exchange(r.by_kind[id], &backend);
}

ScopedBackendOverride::~ScopedBackendOverride() {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  r.by_kind[kind_.id()] = previous_;
}

}  // namespace tandem::backend
