#pragma once

// Small helpers shared by the pass tests: loading golden inputs, finding nodes, and
// mapping nodes to device numbers. Everything here reads the IR; nothing rewrites it.

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ir/ir.h"
#include "ir/parser.h"
#include "tests/test_util.h"

namespace tandem::testing {

/// Folder of the pass golden files, relative to the source tree.
inline const std::string kPassGoldenDir = "tests/golden/passes/";

/// Parses a golden file of tests/golden/passes/; fails the test (and returns null) on error.
inline std::unique_ptr<ir::Module> parseGoldenInput(const std::string& file) {
  std::string path = sourcePath(kPassGoldenDir + file);
  auto m = ir::parseModule(readFile(path), path);
  if (!m.ok()) {
    ADD_FAILURE() << m.status();
    return nullptr;
  }
  return *std::move(m);
}

/// The nodes of `g` with op `op`, in graph order.
inline std::vector<const ir::Node*> nodesWithOp(const ir::Graph& g, ir::Op op) {
  std::vector<const ir::Node*> out;
  for (const auto& n : g.nodes())
    if (n->op() == op) out.push_back(n.get());
  return out;
}

/// Index of a device in the module's device list, or -1.
inline int deviceNumber(const ir::Module& m, const std::optional<ir::Device>& d) {
  if (!d) return -1;
  for (size_t i = 0; i < m.devices().size(); ++i)
    if (m.devices()[i] == *d) return static_cast<int>(i);
  return -1;
}

/// Names of the variables with a given role, in module order.
inline std::vector<std::string> varsWithRole(const ir::Module& m, ir::VarRole role) {
  std::vector<std::string> out;
  for (const ir::Var& v : m.vars())
    if (v.role == role) out.push_back(v.name);
  return out;
}

/// The variable an sgd_update writes: the one its first operand reads.
inline std::string updatedVar(const ir::Node& update) {
  const ir::Node* read = update.operand(0)->def();
  if (read == nullptr || read->op() != ir::Op::kParam) return "";
  return read->symbolAttr("var");
}

}  // namespace tandem::testing
