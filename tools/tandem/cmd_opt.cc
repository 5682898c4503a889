// `tandem opt`: runs a pipeline of passes over a textual IR file and prints the result.

#include <iostream>

#include "absl/strings/str_cat.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/status_macros.h"
#include "ir/verifier.h"
#include "passes/pass_manager.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/path_claims.h"

namespace tandem::tools {

absl::Status runOpt(const OptFlags& f) {
  if (f.file.empty())
    return absl::InvalidArgumentError("opt: missing the IR file argument ('-' for standard input)");
  RETURN_IF_ERROR(checkOutputFlags(f.out, !f.print_after.empty()));
  // The pipeline is checked before the (possibly large) file is read.
  passes::PassManager pm({.verify = !f.out.no_verify,
                          .print_after = f.print_after,
                          .on_print = [&](const passes::Pass& p, const ir::Module& m) {
                            std::cerr << "// ----- after " << p.name() << " -----\n"
                                      << ir::printModule(m, {.locations = !f.out.canonical});
                          }});
  if (absl::Status s = pm.addPipeline(f.passes); !s.ok())
    return absl::Status(s.code(), absl::StrCat("--passes: ", s.message()));
  if (absl::Status s = pm.checkPrintAfter(); !s.ok())
    return absl::Status(s.code(), absl::StrCat("--print-after: ", s.message()));
  // The output, claimed against the file read before anything is written (path_claims.h):
  // -o on the input would destroy it.
  PathClaims claims;
  if (f.file != "-") RETURN_IF_ERROR(claims.claim("tandem opt", f.file, PathClaims::Use::kReads));
  if (!f.out.output.empty())
    RETURN_IF_ERROR(claims.claim("--output", f.out.output, PathClaims::Use::kWrites));
  auto module = ir::parseModuleFile(f.file);
  if (!module.ok()) return module.status();
  if (!f.out.no_verify)
    if (absl::Status s = ir::verifyModule(**module); !s.ok())
      return absl::Status(s.code(), absl::StrCat(f.file, ": verifier: ", s.message()));
  RETURN_IF_ERROR(pm.run(**module));
  if (f.out.timing) std::cerr << pm.timingReport();
  return writeModule(**module, f.out);
}

}  // namespace tandem::tools
