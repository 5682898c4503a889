#include "passes/pass_manager.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ir/status_macros.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"

namespace tandem::passes {

size_t countNodes(const ir::Module& m) {
  size_t n = 0;
  for (const auto& g : m.graphs()) n += g->numNodes();
  return n;
}

absl::Status PassManager::addPipeline(absl::string_view text) {
  auto passes = parsePipeline(text);
  if (!passes.ok()) return passes.status();
  for (auto& p : *passes) add(std::move(p));
  return absl::OkStatus();
}

absl::Status PassManager::checkPrintAfter() const {
  std::vector<std::string> names;
  for (const auto& pass : passes_) names.emplace_back(pass->name());
  for (const std::string& want : opts_.print_after)
    if (want != "*" && std::find(names.begin(), names.end(), want) == names.end())
      return absl::InvalidArgumentError(absl::StrCat(
          "'", want, "' is not a pass of the pipeline (",
          names.empty() ? std::string("it is empty") : absl::StrJoin(names, ", "), ", or *)"));
  return absl::OkStatus();
}

absl::Status PassManager::run(ir::Module& m) {
  RETURN_IF_ERROR(checkPrintAfter());
  timings_.clear();
  for (const auto& pass : passes_) {
    auto start = std::chrono::steady_clock::now();
    auto changed = pass->run(m);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!changed.ok()) return changed.status();
    timings_.push_back({std::string(pass->name()), seconds, *changed, countNodes(m)});
    if (opts_.verify)
      if (absl::Status s = ir::verifyModule(m); !s.ok())
        return absl::Status(s.code(),
                            absl::StrCat("after ", pass->name(), ": verifier: ", s.message()));
    const auto& pa = opts_.print_after;
    if (opts_.on_print && (std::find(pa.begin(), pa.end(), "*") != pa.end() ||
                           std::find(pa.begin(), pa.end(), pass->name()) != pa.end()))
      opts_.on_print(*pass, m);
  }
  return absl::OkStatus();
}

std::string PassManager::timingReport() const {
  std::string out = absl::StrFormat("%-20s %12s %8s %10s\n", "pass", "ms", "changed", "nodes");
  double total = 0;
  for (const PassTiming& t : timings_) {
    absl::StrAppendFormat(&out, "%-20s %12.3f %8s %10d\n", t.pass, t.seconds * 1e3,
                          t.changed ? "yes" : "no", t.nodes_after);
    total += t.seconds;
  }
  absl::StrAppendFormat(&out, "%-20s %12.3f\n", "total", total * 1e3);
  return out;
}

}  // namespace tandem::passes
