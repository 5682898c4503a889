// `tandem dump`: compiles a zoo model with the default pipeline (or part of it) and prints
// the module in one of the output formats.

#include <iostream>

#include "absl/strings/str_cat.h"
#include "ir/status_macros.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/model_flags.h"
#include "tools/tandem/path_claims.h"
#include "tools/tandem/setting_flags.h"
#include "train/compile.h"

namespace tandem::tools {

absl::Status runDump(const DumpFlags& f) {
  OutputFlags out = f.out;
  if (f.memory) {
    if (out.format && *out.format != "memory")
      return absl::InvalidArgumentError(
          absl::StrCat("--memory: is --format memory, and cannot go with --format ", *out.format));
    out.format = "memory";
  }
  RETURN_IF_ERROR(checkOutputFlags(out));
  // An ONNX model dumped is an input: -o on it would destroy it (path_claims.h).
  PathClaims claims;
  if (f.model.onnx) RETURN_IF_ERROR(claims.claim("--onnx", *f.model.onnx, PathClaims::Use::kReads));
  if (!out.output.empty())
    RETURN_IF_ERROR(claims.claim("--output", out.output, PathClaims::Use::kWrites));
  auto choice = resolveModelFlags(f.model, /*for_training=*/false);
  if (!choice.ok()) return choice.status();
  choice->compile.stop_after = f.after;
  choice->compile.verify = !out.no_verify;
  // The memory plan is made by the last pass; a dump that stops before it has none.
  if (out.format == "memory" && !f.after.empty() && f.after != "plan-memory")
    return absl::InvalidArgumentError(
        absl::StrCat("--format memory: needs plan-memory, the last pass of the pipeline; --after ",
                     f.after, " stops before it"));
  std::unique_ptr<passes::PassManager> pm;
  auto module = training::compileModel(choice->spec, choice->compile, &pm,
                                       FlagNames(f.model.onnx.has_value()));
  if (!module.ok()) return module.status();
  if (const std::string w = inertModelFlagWarning(f.model, **module); !w.empty())
    std::cerr << "tandem: warning: " << w << "\n";
  if (out.timing) std::cerr << pm->timingReport();
  return writeModule(**module, out);
}

}  // namespace tandem::tools
