#pragma once

// Subgraphs that exporters write for an op ONNX lacks at the opsets Tandem reads (6 to
// 17), recognized before the walk and converted as one node into the op of ir/ops.td
// that computes them:
//
//   GELU (nn.GELU(), Gelu came with opset 20)   x/sqrt(2) -> Erf -> +1 -> *x -> *0.5
//                                               (Div by sqrt 2 or Mul by 1/sqrt 2; the
//                                               three factors multiplied in any order)
//                                               -> gelu
//   LayerNorm written out (nn.LayerNorm before  m = ReduceMean(x), d = x - m,
//   opset 17: LayerNormalization came then)     v = ReduceMean(d^2), d / Sqrt(v + eps),
//                                               then * gamma and + beta where known
//                                               -> layer_norm
//   SiLU (nn.SiLU; ONNX has no op)              x * Sigmoid(x) -> silu
//
// Why a pattern although erf, sqrt, reciprocal and sigmoid are ops of their own: the
// fused op is one kernel where the pieces are five to eight, and it is what the zoo's own
// models train through, exactly as PyTorch computes it. A pattern matches only where
// every value inside it is read by the pattern alone; an Erf or Sqrt that is not in one
// runs as its op, and the importer keeps why its pattern did not match (near_misses) for
// the refusal of a model that fails for another reason.

#include <map>
#include <set>
#include <string>

#include "frontend/onnx/graph_index.h"
#include "onnx/onnx_pb.h"

namespace tandem::onnx_import {

/// The op types of fused nodes (no ONNX op has these names; findFusedConverter).
inline constexpr char kFusedGelu[] = "tandem.Gelu";
/// Inputs x, gamma (or ""), beta (or ""); attributes axes (ReduceMean's) and epsilon.
inline constexpr char kFusedLayerNorm[] = "tandem.LayerNorm";
/// Input x.
inline constexpr char kFusedSilu[] = "tandem.Silu";

struct Fusion {
  /// The pattern as one node: op type kFused*, named as the root (its last node), whose
  /// outputs it has; its inputs those the pattern reads from outside.
  onnx::NodeProto node;
  /// Every node of the pattern by index in the graph, the root included.
  std::set<int> members;
  /// The index of the node whose output the pattern computes: the last of the members.
  int root = -1;
};

struct Fusions {
  /// By the index of the pattern's root.
  std::map<int, Fusion> by_root;
  /// Members that are not roots: nothing is built for them.
  std::set<int> interior;
  /// An Erf or Sqrt that no pattern took, by index: why its pattern did not match there
  /// ("its output is not read by one Add of 1 alone").
  std::map<int, std::string> near_misses;
};

/// The patterns of the indexed graph: they never overlap, and each root comes after its
/// other members.
Fusions findFusions(const GraphIndex& g);

}  // namespace tandem::onnx_import
