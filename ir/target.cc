#include "ir/target.h"

#include <algorithm>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/ir.h"

namespace tandem::ir {
namespace {

struct Registry {
  std::mutex mu;
  // Never erased, so the pointers handed out stay valid; replaced facts stay alive too.
  std::vector<std::unique_ptr<TargetInfo>> all;
  std::vector<const TargetInfo*> current;  // per kind id, null when not registered
  std::vector<DeviceKind> order;           // kinds in the order they first registered
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: looked up until exit
  return *r;
}

/// "cpu or cuda", "cpu, cuda or tpu".
std::string kindList(const std::vector<const TargetInfo*>& targets) {
  std::vector<std::string> names;
  for (const TargetInfo* t : targets) names.emplace_back(t->kind.name());
  if (names.size() <= 1) return absl::StrJoin(names, "");
  const std::string last = names.back();
  names.pop_back();
  return absl::StrCat(absl::StrJoin(names, ", "), " or ", last);
}

}  // namespace

void registerTarget(TargetInfo info) {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  const size_t id = info.kind.id();
  if (r.current.size() <= id) r.current.resize(id + 1, nullptr);
  if (r.current[id] == nullptr) r.order.push_back(info.kind);
  r.all.push_back(std::make_unique<TargetInfo>(std::move(info)));
  r.current[id] = r.all.back().get();
}

const TargetInfo* findTarget(DeviceKind kind) {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  return kind.id() < r.current.size() ? r.current[kind.id()] : nullptr;
}

std::vector<const TargetInfo*> registeredTargets() {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  std::vector<const TargetInfo*> out;
  for (DeviceKind k : r.order) out.push_back(r.current[k.id()]);
  return out;
}

absl::Status checkTargetDevice(const Device& d) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("unknown device '", toString(d), "': ", why));
  };
  const TargetInfo* t = findTarget(d.kind);
  if (t == nullptr) {
    std::vector<const TargetInfo*> known = registeredTargets();
    if (known.empty()) return bad("no device kind is registered (backend::registerBackends)");
    return bad(absl::StrCat("the device kind must be ", kindList(known)));
  }
  if (d.share != 0 && !t->shares_devices) return bad(t->no_shares_reason);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Device>> parseTargetDevices(absl::string_view text) {
  auto devices = parseDeviceList(text, [](DeviceKind kind) {
    const TargetInfo* t = findTarget(kind);
    return t != nullptr && t->shares_devices;
  });
  if (!devices.ok()) return devices.status();
  for (const Device& d : *devices)
    if (absl::Status s = checkTargetDevice(d); !s.ok()) return s;
  return devices;
}

absl::StatusOr<int64_t> targetAlignment(const std::vector<Device>& devices) {
  int64_t alignment = 1;
  for (const Device& d : devices) {
    const TargetInfo* t = findTarget(d.kind);
    if (t == nullptr) return checkTargetDevice(d);
    alignment = std::max(alignment, t->alignment);
  }
  return alignment;
}

absl::StatusOr<int64_t> declaredWorkspace(const TargetInfo* t, const Node& n) {
  if (t == nullptr || !t->workspace_bytes) return 0;
  const int64_t bytes = t->workspace_bytes(n);
  if (bytes > t->max_workspace_bytes)
    return absl::InvalidArgumentError(absl::StrCat(
        n.describe(), ": its kernel needs ", bytes, " bytes of workspace, more than ",
        t->display_name, "'s budget of ", t->max_workspace_bytes, " bytes per kernel"));
  return std::max<int64_t>(bytes, 0);
}

absl::string_view layoutName(ActivationLayout l) {
  switch (l) {
    case ActivationLayout::kPlain:
      return "nchw";
    case ActivationLayout::kChannelBlocked:
      return "nChw16c";
    case ActivationLayout::kChannelsLast:
      return "nhwc";
  }
  return "?";
}

std::optional<ActivationLayout> layoutNamed(absl::string_view name) {
  for (ActivationLayout l : {ActivationLayout::kPlain, ActivationLayout::kChannelBlocked,
                             ActivationLayout::kChannelsLast})
    if (layoutName(l) == name) return l;
  return std::nullopt;
}

std::string describeTarget(const TargetInfo& t) {
  auto layout = [](ActivationLayout l) -> absl::string_view {
    switch (l) {
      case ActivationLayout::kPlain:
        return "activations plain NCHW";
      case ActivationLayout::kChannelBlocked:
        return "activations nChw16c between the kernels that take it";
      case ActivationLayout::kChannelsLast:
        return "activations NHWC between the kernels that take it";
    }
    return "";
  };
  std::vector<std::string> dtypes;
  for (DType d : t.dtypes) dtypes.emplace_back(dtypeName(d));
  return absl::StrCat(
      "arenas aligned to ", t.alignment, " B; ", layout(t.preferred_layout), "; computes in ",
      absl::StrJoin(dtypes, ", "), "; optimizer updates ",
      t.multi_tensor_update ? "grouped into one launch" : "one kernel per tensor", "; ",
      t.step_recording ? "steps recorded once and replayed" : "steps run kernel by kernel",
      t.cross_process_collectives ? "; collectives across processes (mpirun)" : "",
      t.shares_devices ? "; logical devices may share one (cuda:0.1)" : "");
}

}  // namespace tandem::ir
