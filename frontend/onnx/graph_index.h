#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "onnx/onnx_pb.h"

namespace tandem::onnx_import {

/// "node 'conv1' (Conv)", or for an unnamed node its index and first output:
/// "node #3 (Conv, output 'y')".
inline std::string describeNode(const onnx::NodeProto& n, int index) {
  if (!n.name().empty()) return absl::StrCat("node '", n.name(), "' (", n.op_type(), ")");
  return absl::StrCat("node #", index, " (", n.op_type(),
                      n.output_size() > 0 ? absl::StrCat(", output '", n.output(0), "'") : "", ")");
}

/// An ONNX graph indexed once for the importer and the pattern matcher (patterns.h):
/// which node computes each value, which nodes read it, which values are the graph's
/// outputs, and the single-element values known before anything runs (initializers and
/// Constant nodes, through Identity: the constants PyTorch writes in these patterns).
class GraphIndex {
 public:
  explicit GraphIndex(const onnx::GraphProto& g);

  const onnx::GraphProto& graph() const { return g_; }
  const onnx::NodeProto& node(int i) const { return g_.node(i); }

  /// The nodes reading `value`, by index, each once, in graph order.
  const std::vector<int>& readers(const std::string& value) const {
    static const std::vector<int> kNone;
    auto it = readers_.find(value);
    return it == readers_.end() ? kNone : it->second;
  }
  bool isOutput(const std::string& value) const { return outputs_.contains(value); }

  static bool is(const onnx::NodeProto& n, const char* op) {
    return n.op_type() == op && (n.domain().empty() || n.domain() == "ai.onnx");
  }

  /// The index of the node computing `value`, or -1 (an input, an initializer).
  int producer(const std::string& value) const {
    auto it = producer_.find(value);
    return it == producer_.end() ? -1 : it->second;
  }

  /// The one node reading `value`, or -1 when none, several, or the graph's output too.
  int soleReader(const std::string& value) const {
    if (outputs_.contains(value)) return -1;
    auto it = readers_.find(value);
    return it == readers_.end() || it->second.size() != 1 ? -1 : it->second[0];
  }

  /// Whether exactly the nodes `nodes` read `value` (and it is no graph output).
  bool readOnlyBy(const std::string& value, std::set<int> nodes) const {
    if (outputs_.contains(value)) return false;
    auto it = readers_.find(value);
    return it != readers_.end() && std::set<int>(it->second.begin(), it->second.end()) == nodes;
  }

  bool known(const std::string& value) const { return known_.contains(value); }

  std::optional<double> scalar(const std::string& value) const {
    auto it = scalars_.find(value);
    return it == scalars_.end() ? std::nullopt : std::optional<double>(it->second);
  }

  /// Whether `value` is a known single element within float rounding of `want`.
  bool isScalar(const std::string& value, double want) const {
    std::optional<double> v = scalar(value);
    return v && std::abs(*v - want) <= 1e-6 * std::abs(want);
  }

  /// The operand of binary node `n` other than `value`, or "" when `value` is not one.
  static std::string other(const onnx::NodeProto& n, const std::string& value) {
    if (n.input_size() != 2) return "";
    if (n.input(0) == value) return n.input(1);
    if (n.input(1) == value) return n.input(0);
    return "";
  }

  /// "'name' (Op)", or "#i (Op)" for an unnamed node.
  std::string describe(int i) const {
    const onnx::NodeProto& n = g_.node(i);
    return n.name().empty() ? absl::StrCat("#", i, " (", n.op_type(), ")")
                            : absl::StrCat("'", n.name(), "' (", n.op_type(), ")");
  }

 private:
  void addScalar(const std::string& name, const onnx::TensorProto& t);

  const onnx::GraphProto& g_;
  std::map<std::string, int> producer_;
  std::map<std::string, std::vector<int>> readers_;
  std::set<std::string> outputs_, known_;
  std::map<std::string, double> scalars_;
};

}  // namespace tandem::onnx_import
