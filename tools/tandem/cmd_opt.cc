#include <iostream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass_manager.h"
#include "passes/registry.h"
#include "tools/tandem/commands.h"

namespace tandem::tools {

void addOptCommand(CLI::App& app, OptFlags& f) {
  std::vector<std::string> names;
  for (const auto& p : passes::registeredPasses())
    names.push_back(
        absl::StrCat(p.name, p.options.empty() ? "" : absl::StrCat("{", p.options, "}")));
  CLI::App* cmd = app.add_subcommand("opt", "Run a pipeline of passes over a textual IR file.");
  // Required, but checked in runOpt (see main.cc for why not by CLI11).
  cmd->add_option("file", f.file, "IR file to read, required ('-' for standard input)");
  cmd->add_option("--passes", f.passes,
                  "Comma-separated pipeline, e.g. replicate{devices=2},insert-collectives. "
                  "Passes: " +
                      absl::StrJoin(names, "; ") + ". Empty: just parse, verify and print");
  addOutputFlags(cmd, f.out);
  cmd->add_option("--print-after", f.print_after,
                  "Print the IR to standard error after this pass (repeatable; '*' for all)");
}

absl::Status runOpt(const OptFlags& f) {
  if (f.file.empty())
    return absl::InvalidArgumentError("opt: missing the IR file argument ('-' for standard input)");
  if (absl::Status s = checkFormat(f.out.format); !s.ok()) return s;
  // The pipeline is checked before the (possibly large) file is read.
  passes::PassManager pm({.verify = !f.out.no_verify,
                          .print_after = f.print_after,
                          .on_print = [&](const passes::Pass& p, const ir::Module& m) {
                            std::cerr << "// ----- after " << p.name() << " -----\n"
                                      << ir::printModule(m, {.locations = !f.out.canonical});
                          }});
  if (absl::Status s = pm.addPipeline(f.passes); !s.ok())
    return absl::Status(s.code(), absl::StrCat("--passes: ", s.message()));
  absl::StatusOr<std::unique_ptr<ir::Module>> module;
  if (f.file == "-") {
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    module = ir::parseModule(text, "<stdin>");
  } else {
    module = ir::parseModuleFile(f.file);
  }
  if (!module.ok()) return module.status();
  if (!f.out.no_verify)
    if (absl::Status s = ir::verifyModule(**module); !s.ok())
      return absl::Status(s.code(), absl::StrCat(f.file, ": verifier: ", s.message()));
  if (absl::Status s = pm.run(**module); !s.ok()) return s;
  if (f.out.timing) std::cerr << pm.timingReport();
  return writeModule(**module, f.out);
}

}  // namespace tandem::tools
