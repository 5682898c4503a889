#include "passes/streams.h"

namespace tandem::passes {

ir::Device deviceOfValue(const ir::Value& v) {
  if (v.device()) return *v.device();
  const ir::Node& n = *v.def();
  if (n.device()) return *n.device();
  const auto& devices = n.devicesAttr();
  if (n.op() == ir::Op::kConcat) return devices.front();
  size_t per_device = n.numResults() / devices.size();
  return devices[static_cast<size_t>(v.index()) / per_device];
}

}  // namespace tandem::passes
