#include "tools/tandem/summary.h"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ir/interfaces.h"
#include "ir/op_views.h"
#include "ir/plan.h"

namespace tandem::tools {
namespace {

std::string mib(int64_t bytes) { return absl::StrFormat("%.2f MiB", bytes / 1048576.0); }

// A summary stays readable at 4096 devices: long lists show their ends and their length.
constexpr size_t kListedInFull = 16;

std::string sizeList(const std::vector<int64_t>& sizes) {
  if (sizes.size() <= kListedInFull) return absl::StrJoin(sizes, "/");
  const int64_t lo = *std::min_element(sizes.begin(), sizes.end());
  const int64_t hi = *std::max_element(sizes.begin(), sizes.end());
  return lo == hi ? absl::StrCat(lo, " each") : absl::StrCat(lo, " to ", hi, " each");
}

}  // namespace

std::string deviceList(const std::vector<ir::Device>& ds) {
  if (ds.size() <= kListedInFull) return ir::toString(ds);
  return absl::StrCat("[", ir::toString(ds[0]), ", ", ir::toString(ds[1]), ", ..., ",
                      ir::toString(ds.back()), "] (", ds.size(), " devices)");
}

std::string thousands(int64_t n) {
  std::string digits = absl::StrCat(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string summarizeModule(const ir::Module& m) {
  std::string out;
  int64_t param_bytes = 0;
  std::map<ir::VarRole, int> var_counts;
  for (const ir::Var& v : m.vars()) {
    ++var_counts[v.role];
    if (v.role == ir::VarRole::kParam) param_bytes += v.type.bytes();
  }
  absl::StrAppend(&out, "model ", m.name(), ": ", thousands(m.countElements(ir::VarRole::kParam)),
                  " parameters (", mib(param_bytes), ") in ", var_counts[ir::VarRole::kParam],
                  " variables, ", var_counts[ir::VarRole::kBuffer], " buffers, ",
                  var_counts[ir::VarRole::kOptimizer], " optimizer variables\n");
  if (m.isReplicated()) absl::StrAppend(&out, "devices: ", deviceList(m.devices()), "\n");
  for (const auto& g : m.graphs()) {
    std::map<absl::string_view, int> ops;  // op names live in the op table
    for (const auto& n : g->nodes()) ++ops[n->opName()];
    const absl::flat_hash_set<const ir::Value*> returned(g->outputs().begin(), g->outputs().end());
    absl::StrAppend(&out, "\ngraph @", g->name(), ": ", g->numNodes(), " nodes\n");
    std::vector<std::string> cells;
    for (const auto& [op, count] : ops) cells.push_back(absl::StrCat(op, " ", count));
    absl::StrAppend(&out, "  ", absl::StrJoin(cells, ", "), "\n");
    for (const auto& n : g->nodes()) {
      if (ir::SplitView::is(*n)) {
        const ir::SplitView split(*n);
        absl::StrAppend(&out, "  split %", split.x()->name(), " ", ir::toString(split.x()->type()),
                        " -> ", sizeList(split.sizes()), " over ", deviceList(split.devices()),
                        "\n");
      }
      if (ir::AllReduceView::is(*n)) {
        size_t per_device = n->numOperands() / ir::AllReduceView(*n).devices().size();
        int64_t bytes = 0;
        for (size_t i = 0; i < per_device; ++i) bytes += n->operand(i)->type().bytes();
        // Reductions of what the step returns (loss, correct count) are not gradients.
        absl::StrAppend(&out, "  all_reduce bucket ", ir::AllReduceView(*n).bucket(), ": ",
                        per_device, per_device == 1 ? " tensor, " : " tensors, ", mib(bytes),
                        " per device, first %", n->operand(0)->name(),
                        returned.contains(n->result(0)) ? " (returned value)" : "", "\n");
      }
      // shard-weight-update's pair per bucket: the gradients' shards, the stepped weights.
      if (ir::ReduceScatterView::is(*n)) {
        const ir::ReduceScatterView rs(*n);
        absl::StrAppend(&out, "  reduce_scatter bucket ", rs.bucket(), ": ",
                        thousands(n->operand(0)->type().numElements()), " elements (",
                        mib(n->operand(0)->type().bytes()), ") in shards of ", sizeList(rs.sizes()),
                        ", first %", n->operand(0)->name(), "\n");
      }
      if (ir::AllGatherView::is(*n))
        absl::StrAppend(&out, "  all_gather bucket ", ir::AllGatherView(*n).bucket(), ": ",
                        thousands(n->result(0)->type().numElements()), " elements (",
                        mib(n->result(0)->type().bytes()), ") gathered, first %",
                        n->result(0)->name(), "\n");
    }
  }
  return out;
}

namespace {

/// Per device what the step keeps besides its arenas: the variables by role (a sharded
/// one, shard-weight-update's state, only the device's shard); the reduced gradients the
/// updates read (a sharded update's its shard; they live in the arena); and the training
/// step's arena at its live peak (activations, gradients in flight, workspaces).
std::string deviceMemory(const ir::Module& m) {
  const size_t devices = std::max<size_t>(m.devices().size(), 1);
  std::vector<std::map<ir::VarRole, int64_t>> vars(devices);
  for (const ir::Var& v : m.vars())
    for (size_t d = 0; d < devices; ++d)
      vars[d][v.role] += (m.isReplicated() ? v.replicaType(d) : v.type).bytes();
  std::vector<int64_t> grads(devices, 0);
  if (const ir::Graph* step = m.graph(ir::kTrainGraph))
    for (const auto& n : step->nodes())
      for (const ir::Value* g : ir::updateGradients(*n)) {
        const std::optional<size_t> d =
            n->device() ? m.deviceIndex(*n->device()) : std::optional<size_t>(0);
        if (d && *d < devices) grads[*d] += g->type().bytes();
      }
  // The training step's arena at its live peak: activations, gradients in flight, workspaces.
  const ir::Graph* step = m.graph(ir::kTrainGraph);
  const ir::GraphPlan* plan = step != nullptr ? step->plan() : nullptr;
  std::string out =
      absl::StrFormat("\n%-12s %-8s %12s %12s %12s %12s %12s\n", "per device", "device",
                      "parameters", "gradients", "optimizer", "buffers", "step peak");
  for (size_t d = 0; d < devices; ++d)
    absl::StrAppend(&out, absl::StrFormat("%-12s %-8s %12s %12s %12s %12s %12s\n", "variables",
                                          m.isReplicated() ? ir::toString(m.devices()[d]) : "-",
                                          mib(vars[d][ir::VarRole::kParam]), mib(grads[d]),
                                          mib(vars[d][ir::VarRole::kOptimizer]),
                                          mib(vars[d][ir::VarRole::kBuffer]),
                                          plan != nullptr && d < plan->arenas.size()
                                              ? mib(plan->arenas[d].live_peak_bytes)
                                              : std::string("-")));
  return out;
}

}  // namespace

std::string memoryReport(const ir::Module& m, const ir::Graph* only) {
  std::string out = absl::StrFormat("%-12s %-8s %12s %12s %12s\n", "graph", "device", "arena",
                                    "live peak", "no reuse");
  for (const auto& g : m.graphs()) {
    if (only != nullptr && only != g.get()) continue;
    const ir::GraphPlan* plan = g->plan();
    if (plan == nullptr) continue;  // callers check first; nothing to show
    for (size_t d = 0; d < plan->arenas.size(); ++d)
      absl::StrAppend(
          &out, absl::StrFormat("%-12s %-8s %12s %12s %12s\n", g->name(),
                                m.isReplicated() ? ir::toString(m.devices()[d]) : "-",
                                mib(plan->arenas[d].bytes), mib(plan->arenas[d].live_peak_bytes),
                                mib(plan->arenas[d].unshared_bytes)));
  }
  if (only == nullptr) out.append(deviceMemory(m));
  return out;
}

}  // namespace tandem::tools
