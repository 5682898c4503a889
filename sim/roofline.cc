#include "sim/roofline.h"

#include <algorithm>

#include "ir/interfaces.h"

namespace tandem::sim {

NodeWork nodeWork(const ir::Node& n) { return ir::opWork(n); }

double rooflineSeconds(const NodeWork& w, const GpuSpec& gpu) {
  const double peak = w.low_precision ? gpu.bf16_flops : gpu.f32_flops;
  return std::max(w.flops / peak, w.bytes / gpu.mem_bytes_per_s);
}

double collectiveBytesPerDevice(const ir::Node& n) {
  std::optional<ir::CollectiveView> c = ir::CollectiveView::of(n);
  double total = 0;
  if (c && c->kind() == ir::CollectiveKind::kAllGather) {
    for (size_t i = 0; i < n.numResults(); ++i)
      total += static_cast<double>(n.result(i)->type().bytes());
  } else {
    for (const ir::Value* v : n.operands()) total += static_cast<double>(v->type().bytes());
  }
  const size_t devices =
      c && c->kind() != ir::CollectiveKind::kScatter ? std::max<size_t>(1, c->devices().size()) : 1;
  return total / static_cast<double>(devices);
}

double collectiveSeconds(const ir::Node& n, int64_t p, const Topology& topo) {
  switch (ir::collectiveKind(n).value_or(ir::CollectiveKind::kScatter)) {
    case ir::CollectiveKind::kReduce:
      return allReduceCost(collectiveBytesPerDevice(n), p, topo).seconds;
    case ir::CollectiveKind::kReduceScatter:
    case ir::CollectiveKind::kAllGather:
      return reduceScatterCost(collectiveBytesPerDevice(n), p, topo).seconds;
    default:
      return 0;
  }
}

}  // namespace tandem::sim
