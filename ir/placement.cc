#include "ir/placement.h"

namespace tandem::ir {

Device deviceOfValue(const Value& v) {
  if (v.device()) return *v.device();
  const Node& n = *v.def();
  if (n.device()) return *n.device();
  const auto& devices = n.devicesAttr();
  if (n.op() == Op::kConcat) return devices.front();
  size_t per_device = n.numResults() / devices.size();
  return devices[static_cast<size_t>(v.index()) / per_device];
}

std::optional<size_t> deviceIndexOfValue(const Module& m, const Value& v) {
  return m.deviceIndex(deviceOfValue(v));
}

int64_t numGroups(const Node& n) {
  return n.info().attrIndex("groups") >= 0 ? n.intAttr("groups") : 1;
}

std::vector<std::vector<size_t>> collectiveGroups(const Node& n) {
  const size_t devices = n.devicesAttr().size();
  const size_t count = static_cast<size_t>(std::max<int64_t>(numGroups(n), 1));
  const size_t size = devices / count;
  std::vector<std::vector<size_t>> out(count);
  for (size_t k = 0; k < devices; ++k)
    out[std::min(k / std::max<size_t>(size, 1), count - 1)].push_back(k);
  return out;
}

size_t groupOfPosition(const Node& n, size_t k) {
  const size_t count = static_cast<size_t>(std::max<int64_t>(numGroups(n), 1));
  const size_t size = std::max<size_t>(n.devicesAttr().size() / count, 1);
  return std::min(k / size, count - 1);
}

}  // namespace tandem::ir
