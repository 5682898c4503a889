#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/dot.h"
#include "ir/printer.h"
#include "passes/streams.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/summary.h"

namespace tandem::tools {

absl::Status checkFormat(const std::string& format) {
  if (format == "text" || format == "dot" || format == "summary" || format == "streams")
    return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--format: unknown format '", format,
                                                 "' (expected text, dot, summary or streams)"));
}

void addOutputFlags(CLI::App* cmd, OutputFlags& f) {
  cmd->add_option("--format", f.format,
                  "Output: text (the IR, parses back), dot (Graphviz), summary, or streams (per "
                  "device and stream the issue order and the events waited for)")
      ->capture_default_str();
  cmd->add_option("--graph", f.graph,
                  "Print only this graph (init, train_step, eval_step); dot defaults to "
                  "train_step");
  cmd->add_option("-o,--output", f.output, "Write to this file instead of standard output");
  cmd->add_flag("--canonical", f.canonical, "Omit source locations (the golden-file form)");
  cmd->add_flag("--timing", f.timing, "Print the time of each pass to standard error");
  cmd->add_flag("--no-verify", f.no_verify, "Skip the verifier (on input and between passes)");
}

absl::Status writeModule(const ir::Module& m, const OutputFlags& f) {
  const std::string &format = f.format, &graph = f.graph, &output = f.output;
  const ir::Graph* g = nullptr;
  if (!graph.empty()) {
    g = m.graph(graph);
    if (g == nullptr) {
      std::vector<std::string> names;
      for (const auto& x : m.graphs()) names.push_back(x->name());
      return absl::InvalidArgumentError(absl::StrCat("--graph: module ", m.name(),
                                                     " has no graph '", graph, "' (it has ",
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
    text = ir::exportDot(*g);
  } else if (format == "summary") {
    text = summarizeModule(m);
  } else if (format == "streams") {
    if (!m.isReplicated())
      return absl::InvalidArgumentError(
          "--format streams needs a replicated module (run replicate)");
    if (g == nullptr) g = m.graph(ir::kTrainGraph);
    if (g == nullptr) return absl::InvalidArgumentError("--format streams needs --graph NAME");
    text = passes::printStreams(m, *g);
  } else {
    return checkFormat(format);
  }
  if (output.empty() || output == "-") {
    std::cout << text;
    std::cout.flush();
    if (!std::cout) return absl::DataLossError("cannot write to standard output");
    return absl::OkStatus();
  }
  std::ofstream out(output, std::ios::binary);
  out << text;
  out.close();
  if (!out)
    return absl::PermissionDeniedError(absl::StrCat("--output: cannot write '", output, "'"));
  return absl::OkStatus();
}

}  // namespace tandem::tools
