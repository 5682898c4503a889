#include "frontend/onnx/refusals.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"

namespace tandem::onnx_import {
namespace {

std::string count(size_t n, const char* noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

}  // namespace

absl::Status refusalError(const std::string& what, std::vector<Refusal> refusals, int nodes,
                          int unchecked) {
  std::stable_sort(refusals.begin(), refusals.end(),
                   [](const Refusal& a, const Refusal& b) { return a.index < b.index; });
  const std::string not_checked =
      unchecked == 0
          ? ""
          : absl::StrCat(" (", count(size_t(unchecked), "node"), " reading ",
                         refusals.size() == 1 ? "its" : "their", " results could not be checked)");
  if (refusals.size() == 1)
    return absl::UnimplementedError(
        absl::StrCat(what, ": Tandem does not support 1 node: ", refusals[0].line, not_checked));
  // The op types in the order the graph first refuses them.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const Refusal*>> by_op;
  for (const Refusal& r : refusals) {
    auto& group = by_op[r.op];
    if (group.empty()) order.push_back(r.op);
    group.push_back(&r);
  }
  std::string text = absl::StrCat(what, ": Tandem does not support ", refusals.size(), " of its ",
                                  count(size_t(nodes), "node"), ", of ",
                                  count(order.size(), "op type"), not_checked, ":");
  for (size_t k = 0; k < order.size() && k < kMaxRefusedOpTypes; ++k) {
    const std::vector<const Refusal*>& group = by_op[order[k]];
    absl::StrAppend(&text, "\n  ", order[k], " (", count(group.size(), "node"), "): ");
    // Names alone are a list ("'a', 'b' and 3 more"); names with reasons, clauses.
    bool why = false;
    for (const Refusal* r : group) why = why || !r->why.empty();
    for (size_t i = 0; i < group.size() && i < kNodesNamedPerOpType; ++i)
      absl::StrAppend(&text,
                      i == 0 ? ""
                      : why  ? "; "
                             : ", ",
                      group[i]->node, group[i]->why.empty() ? "" : ": ", group[i]->why);
    if (group.size() > kNodesNamedPerOpType)
      absl::StrAppend(&text, why ? "; and " : " and ", group.size() - kNodesNamedPerOpType,
                      " more");
  }
  if (order.size() > kMaxRefusedOpTypes) {
    size_t rest = 0;
    for (size_t k = kMaxRefusedOpTypes; k < order.size(); ++k) rest += by_op[order[k]].size();
    absl::StrAppend(&text, "\n  and ", count(order.size() - kMaxRefusedOpTypes, "more op type"),
                    " (", count(rest, "node"), ")");
  }
  return absl::UnimplementedError(text);
}

}  // namespace tandem::onnx_import
