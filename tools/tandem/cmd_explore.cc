// `tandem explore`: one self-contained HTML page to inspect a parallel step in a browser:
// the graph by scope with per-device lanes, each node's plan, the memory plan and, from a
// training run, the measured timeline and the learning curves (tools/tandem/explore/).

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/file_input.h"
#include "ir/parser.h"
#include "ir/status_macros.h"
#include "ir/verifier.h"
#include "runtime/chrome_trace.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/explore/assets.h"
#include "tools/tandem/explore/page.h"
#include "tools/tandem/explore/page_data.h"
#include "tools/tandem/model_flags.h"
#include "tools/tandem/output_file.h"
#include "tools/tandem/path_claims.h"
#include "tools/tandem/plot.h"
#include "tools/tandem/setting_flags.h"
#include "train/compile.h"

namespace tandem::tools {
namespace {

// A trace of ResNet-152 on 8 devices over 3 steps is about 30 MB.
constexpr int64_t kMaxTraceBytes = int64_t{1} << 30;

absl::Status exploreFlagError(absl::string_view flag, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", message));
}

// Every file the command reads and the page it writes, claimed by their flags first.
absl::Status claimExploreFiles(const ExploreFlags& f) {
  PathClaims claims;
  using Use = PathClaims::Use;
  if (f.module) RETURN_IF_ERROR(claims.claim("--module", *f.module, Use::kReads));
  if (f.trace) RETURN_IF_ERROR(claims.claim("--trace", *f.trace, Use::kReads));
  if (f.metrics) RETURN_IF_ERROR(claims.claim("--metrics", *f.metrics, Use::kReads));
  return claims.claim("--output", f.output, Use::kWrites);
}

// The module to explore: the --module file (parsed, verified, its plan too), or the one
// the model flags compile to, as `tandem dump` compiles it.
absl::StatusOr<std::unique_ptr<ir::Module>> exploredModule(const ExploreFlags& f,
                                                           std::string& source) {
  if (f.module) {
    source = absl::StrCat("--module ", *f.module);
    auto m = ir::parseModuleFile(*f.module);
    if (!m.ok())
      return absl::Status(m.status().code(),
                          absl::StrCat("--module ", *f.module, ": ", m.status().message()));
    if (absl::Status s = ir::verifyModule(**m); !s.ok())
      return absl::Status(s.code(),
                          absl::StrCat("--module ", *f.module, ": verifier: ", s.message()));
    return std::move(*m);
  }
  ASSIGN_OR_RETURN(ModelChoice choice, resolveModelFlags(f.model, /*for_training=*/false));
  choice.compile.stop_after = f.after;
  auto m = training::compileModel(choice.spec, choice.compile, nullptr, FlagNames());
  if (!m.ok()) return m.status();
  if (const std::string w = inertModelFlagWarning(f.model, **m); !w.empty())
    std::cerr << "tandem: warning: " << w << "\n";
  source = absl::StrCat("--model ", f.model.onnx ? *f.model.onnx : f.model.model, " --devices ",
                        (*m)->devices().size(), f.after.empty() ? "" : " --after ", f.after);
  return std::move(*m);
}

}  // namespace

absl::Status runExplore(const ExploreFlags& f) {
  if (!explore::haveLayoutLibrary())
    return absl::FailedPreconditionError(
        "explore: this build has no graph layout library (dagre, Debian's "
        "python3-xstatic-dagre, was not installed when tandem was built); install it "
        "(scripts/setup does) and rebuild");
  if (f.output.empty())
    return exploreFlagError("--output", "required: the HTML page to write (-o STEP.html)");
  if (f.module && (!f.model.model.empty() || f.model.onnx))
    return exploreFlagError("--module", absl::StrCat("and --", f.model.onnx ? "onnx " : "model ",
                                                     f.model.onnx ? *f.model.onnx : f.model.model,
                                                     " name two modules; give one"));
  if (f.module && !f.after.empty())
    return exploreFlagError("--after",
                            "applies to a compiled --model; a --module file is "
                            "explored as it is");
  RETURN_IF_ERROR(claimExploreFiles(f));
  // The inputs that are files are checked before the (possibly slow) compile.
  std::optional<std::string> trace_text;
  if (f.trace) {
    auto text = ir::readInputFile(
        *f.trace, {absl::StrCat("--trace '", *f.trace, "'"), "a Chrome trace (train --trace)"},
        kMaxTraceBytes);
    if (!text.ok()) return text.status();
    trace_text = *std::move(text);
  }
  explore::PageInputs in;
  if (f.metrics) {
    auto rows = readMetricsCsv(*f.metrics);
    if (!rows.ok())
      return absl::Status(rows.status().code(),
                          absl::StrCat("--metrics: ", rows.status().message()));
    if (rows->points.empty())
      return exploreFlagError("--metrics", absl::StrCat(*f.metrics, " has no epoch rows"));
    in.metrics = std::move(rows->points);
  }
  auto out = OutputFile::openReplacing(f.output, "--output");
  if (!out.ok()) return out.status();

  ASSIGN_OR_RETURN(std::unique_ptr<ir::Module> m, exploredModule(f, in.source));
  const ir::Graph* g = m->graph(f.graph);
  if (g == nullptr) {
    std::vector<std::string> names;
    for (const auto& x : m->graphs()) names.push_back(x->name());
    return exploreFlagError(
        "--graph", absl::StrCat("module ", m->name(), " has no graph '", f.graph, "' (it has ",
                                absl::StrJoin(names, ", "), ")"));
  }
  if (trace_text) {
    if (f.graph != ir::kTrainGraph)
      return exploreFlagError(
          "--trace", absl::StrCat("train --trace records @", ir::kTrainGraph, ", and --graph is ",
                                  f.graph, "; drop one of them"));
    if (!m->isReplicated())
      return exploreFlagError("--trace", absl::StrCat("the module is not yet replicated (--after ",
                                                      f.after, "); a trace is of the whole step"));
    auto spans = runtime::readChromeTrace(*m, *g, *trace_text);
    if (!spans.ok())
      return absl::Status(spans.status().code(),
                          absl::StrCat("--trace ", *f.trace, ": ", spans.status().message()));
    in.spans = *std::move(spans);
  }
  in.module = m.get();
  in.graph = g;
  ASSIGN_OR_RETURN(std::string data, explore::pageData(in));
  const std::string title =
      absl::StrCat(m->name(), " @", g->name(), " on ", std::max<size_t>(m->devices().size(), 1),
                   " device", m->devices().size() > 1 ? "s" : "", " - tandem explore");
  RETURN_IF_ERROR(out->write(explore::explorePage(data, title)));
  return out->close();
}

}  // namespace tandem::tools
