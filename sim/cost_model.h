#pragma once

// Alpha-beta costs of a gradient all_reduce over p devices, ring and tree, the way NCCL
// chooses between them: the faster for the message size.

#include <cstdint>
#include <string>

#include "sim/gpu_specs.h"

namespace tandem::sim {

/// Where the devices sit: `gpus_per_node` devices share the intra-node link; between
/// nodes the inter-node link carries the traffic.
struct Topology {
  int64_t gpus_per_node = 8;
  LinkSpec intra, inter;
};

struct CollectiveCost {
  double ring_s = 0, tree_s = 0;
  /// The smaller of the two, and which it was ("ring", "tree", or "none" for p = 1).
  double seconds = 0;
  std::string algorithm = "none";
};

/// Ring all_reduce of `bytes` per device over `p` devices:
///   2 (p-1)/p * bytes / busbw + 2 (p-1) alpha
/// (a reduce-scatter and an all-gather of p-1 steps each). Within one node busbw and alpha
/// are the intra-node link's; once the ring leaves the node, every step waits for its
/// slowest hop, so the inter-node link's alpha and the smaller busbw hold.
double ringAllReduceSeconds(double bytes, int64_t p, const Topology& t);

/// Tree all_reduce as NCCL builds it: a chain through the GPUs of a node and a (double)
/// binary tree across the nodes, reduce up and broadcast down. Latency grows with the
/// depth, 2 ((g-1) alpha_intra + ceil(log2 nodes) alpha_inter) for g GPUs per node; every
/// byte goes up and down once, 2 bytes / busbw (the double tree keeps links busy both
/// ways but not the ring's (p-1)/p saving).
double treeAllReduceSeconds(double bytes, int64_t p, const Topology& t);

/// Both, and the faster (NCCL's tuner picks per message size the same way).
CollectiveCost allReduceCost(double bytes, int64_t p, const Topology& t);

/// Ring reduce_scatter of a `bytes` buffer per device over `p` devices (each keeps 1/p of
/// the result), the first half of the ring all_reduce:
///   (p-1)/p * bytes / busbw + (p-1) alpha.
/// An all_gather into a `bytes` buffer per device is the same steps backwards: the same
/// cost.
double ringReduceScatterSeconds(double bytes, int64_t p, const Topology& t);

/// The tree form: the reduce half of the tree all_reduce (and all_gather its broadcast
/// half), the tree's depth in latency and every byte over the link once:
///   (g-1) alpha_intra + ceil(log2 nodes) alpha_inter + bytes / busbw.
/// So reduce_scatter + all_gather cost what all_reduce costs in either algorithm, and the
/// tuner's choice is the all_reduce's: the tree for small buckets at scale, the ring for
/// large ones. (NCCL 2.28 has no tree reduce-scatter; its PAT algorithm, log-depth, runs
/// only with one GPU per node.)
double treeReduceScatterSeconds(double bytes, int64_t p, const Topology& t);

/// Both, and the faster: reduce_scatter's and all_gather's cost.
CollectiveCost reduceScatterCost(double bytes, int64_t p, const Topology& t);

}  // namespace tandem::sim
