#include "sim/cost_model.h"

#include <algorithm>
#include <cmath>

namespace tandem::sim {
namespace {

struct Path {
  double alpha, busbw;
};

// The link a collective over p devices is bound by.
Path boundingPath(int64_t p, const Topology& t) {
  if (p <= t.gpus_per_node) return {t.intra.alpha_s, t.intra.busbw};
  return {std::max(t.intra.alpha_s, t.inter.alpha_s), std::min(t.intra.busbw, t.inter.busbw)};
}

}  // namespace

double ringAllReduceSeconds(double bytes, int64_t p, const Topology& t) {
  if (p <= 1) return 0;
  const Path path = boundingPath(p, t);
  const double steps = 2.0 * static_cast<double>(p - 1);
  return steps / static_cast<double>(p) * bytes / path.busbw + steps * path.alpha;
}

double treeAllReduceSeconds(double bytes, int64_t p, const Topology& t) {
  if (p <= 1) return 0;
  const Path path = boundingPath(p, t);
  const int64_t per_node = std::min(p, t.gpus_per_node);
  const int64_t nodes = (p + t.gpus_per_node - 1) / t.gpus_per_node;
  const double depth_latency =
      static_cast<double>(per_node - 1) * t.intra.alpha_s +
      (nodes > 1 ? std::ceil(std::log2(static_cast<double>(nodes))) * t.inter.alpha_s : 0.0);
  return 2.0 * depth_latency + 2.0 * bytes / path.busbw;
}

namespace {

CollectiveCost faster(double ring_s, double tree_s) {
  CollectiveCost c;
  c.ring_s = ring_s;
  c.tree_s = tree_s;
  c.algorithm = c.tree_s < c.ring_s ? "tree" : "ring";
  c.seconds = std::min(c.ring_s, c.tree_s);
  return c;
}

}  // namespace

CollectiveCost allReduceCost(double bytes, int64_t p, const Topology& t) {
  if (p <= 1) return {};
  return faster(ringAllReduceSeconds(bytes, p, t), treeAllReduceSeconds(bytes, p, t));
}

double ringReduceScatterSeconds(double bytes, int64_t p, const Topology& t) {
  if (p <= 1) return 0;
  const Path path = boundingPath(p, t);
  const double steps = static_cast<double>(p - 1);
  return steps / static_cast<double>(p) * bytes / path.busbw + steps * path.alpha;
}

double treeReduceScatterSeconds(double bytes, int64_t p, const Topology& t) {
  return treeAllReduceSeconds(bytes, p, t) / 2;
}

CollectiveCost reduceScatterCost(double bytes, int64_t p, const Topology& t) {
  if (p <= 1) return {};
  return faster(ringReduceScatterSeconds(bytes, p, t), treeReduceScatterSeconds(bytes, p, t));
}

}  // namespace tandem::sim
