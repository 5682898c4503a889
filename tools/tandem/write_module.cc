#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/dot_views.h"
#include "ir/plan.h"
#include "ir/printer.h"
#include "ir/status_macros.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/output_file.h"
#include "tools/tandem/summary.h"

namespace tandem::tools {
namespace {

const char* const kFormats[] = {"text", "dot", "summary", "streams", "memory"};

}  // namespace

absl::Status checkOutputFlags(const OutputFlags& f, bool prints_ir) {
  const std::string format = f.format.value_or("text");
  if (std::find(std::begin(kFormats), std::end(kFormats), format) == std::end(kFormats))
    return absl::InvalidArgumentError(absl::StrCat(
        "--format: unknown format '", format, "' (expected ", absl::StrJoin(kFormats, ", "), ")"));
  if (f.canonical && format != "text" && !prints_ir)
    return absl::InvalidArgumentError(absl::StrCat(
        "--canonical: applies to --format text only (source locations), not --format ", format));
  // The drawing's views apply to dot only: refused elsewhere rather than ignored.
  if (f.collapse && format != "dot")
    return absl::InvalidArgumentError(absl::StrCat(
        "--collapse: applies to --format dot only (boxes per scope), not --format ", format));
  if (f.focus && format != "dot")
    return absl::InvalidArgumentError(absl::StrCat(
        "--focus: applies to --format dot only (one scope drawn node by node), not --format ",
        format));
  if (f.focus && f.collapse == 0)
    return absl::InvalidArgumentError(
        "--focus: --collapse 0 draws every node already; drop --focus, or collapse the rest "
        "with --collapse 1 or more");
  if (f.focus && f.focus->empty())
    return absl::InvalidArgumentError(
        "--focus: empty scope; give one such as stage2.block0 (the error of a wrong one lists "
        "the graph's scopes)");
  if (!f.graph.empty() && format == "summary")
    return absl::InvalidArgumentError(
        "--graph: --format summary describes the whole module; drop --graph, or use another "
        "format");
  return absl::OkStatus();
}

absl::Status writeModule(const ir::Module& m, const OutputFlags& f) {
  const std::string format = f.format.value_or("text");
  const ir::Graph* g = nullptr;
  if (!f.graph.empty()) {
    g = m.graph(f.graph);
    if (g == nullptr) {
      std::vector<std::string> names;
      for (const auto& x : m.graphs()) names.push_back(x->name());
      return absl::InvalidArgumentError(absl::StrCat("--graph: module ", m.name(),
                                                     " has no graph '", f.graph, "' (it has ",
                                                     absl::StrJoin(names, ", "), ")"));
    }
  }
  ir::PrintOptions opts{.locations = !f.canonical};
  std::string text;
  if (format == "text") {
    text = g ? ir::printGraph(*g, opts) : ir::printModule(m, opts);
  } else if (format == "dot") {
    if (g == nullptr) g = m.graph(ir::kTrainGraph);
    if (g == nullptr) return absl::InvalidArgumentError("--format dot needs --graph NAME");
    auto dot = ir::exportDotView(
        *g, ir::DotView{.collapse = f.collapse.value_or(1), .focus = f.focus.value_or("")});
    if (!dot.ok())
      return absl::Status(dot.status().code(), absl::StrCat("--focus: ", dot.status().message()));
    text = *std::move(dot);
  } else if (format == "summary") {
    text = summarizeModule(m);
  } else if (format == "streams") {
    if (!m.isReplicated())
      return absl::InvalidArgumentError(
          "--format streams needs a replicated module (run replicate)");
    if (g == nullptr) g = m.graph(ir::kTrainGraph);
    if (g == nullptr) return absl::InvalidArgumentError("--format streams needs --graph NAME");
    if (g->plan() == nullptr || !g->plan()->has(ir::PlanPart::kEvents))
      return absl::InvalidArgumentError(
          absl::StrCat("--format streams: graph @", g->name(),
                       " has no events in its plan (assign-streams and plan-events have not "
                       "run over it)"));
    text = ir::printStreams(m, *g);
  } else {  // memory
    for (const auto& graph : m.graphs())
      if ((g == nullptr || g == graph.get()) &&
          (graph->plan() == nullptr || !graph->plan()->has(ir::PlanPart::kMemory)))
        return absl::InvalidArgumentError(
            absl::StrCat("--format memory: graph @", graph->name(),
                         " has no memory plan (plan-memory has not run over it)"));
    text = memoryReport(m, g);
  }
  auto out = OutputFile::open(f.output.empty() ? "-" : f.output, "--output");
  if (!out.ok()) return out.status();
  RETURN_IF_ERROR(out->write(text));
  return out->close();
}

}  // namespace tandem::tools
