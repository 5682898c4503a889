// tandem: the command-line front door. Every user error ends with one line on standard
// error and exit code 2.

#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "tools/tandem/commands.h"

namespace {

constexpr int kUsageError = 2;
constexpr int kInterrupted = 130;  // the shell's code for a SIGINT stop

int fail(const std::string& message) {
  std::string line = message;
  for (char& c : line)
    if (c == '\n') c = ' ';
  std::cerr << "tandem: " << line << "\n";
  return kUsageError;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tandem: compile a network into a data-parallel training step and inspect it."};
  // Required arguments are checked by hand after parsing, not by CLI11: CLI11 checks
  // them before unknown arguments, so `tandem dump --modle x` would blame the missing
  // --model instead of the misspelt flag.
  app.require_subcommand(0, 1);
  tandem::tools::DumpFlags dump;
  tandem::tools::OptFlags opt;
  tandem::tools::addDumpCommand(app, dump);
  tandem::tools::addOptCommand(app, opt);
  tandem::tools::TrainFlags train;
  tandem::tools::addTrainCommand(app, train);
  // CLI11 would call a misspelt subcommand an unexpected argument; name it plainly.
  std::vector<std::string> subs;
  bool known = false;
  const CLI::App& const_app = app;  // the const overload lists every subcommand
  for (const CLI::App* sub : const_app.get_subcommands(std::function<bool(const CLI::App*)>())) {
    subs.push_back(sub->get_name());
    known = known || (argc > 1 && sub->get_name() == argv[1]);
  }
  std::string names;  // "dump, opt or train"
  for (size_t i = 0; i < subs.size(); ++i)
    names += (i == 0 ? "" : i + 1 == subs.size() ? " or " : ", ") + subs[i];
  if (argc > 1 && argv[1][0] != '-' && !known)
    return fail(std::string("unknown subcommand '") + argv[1] + "' (expected " + names + ")");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(e.what());
  }
  if (app.get_subcommands().empty())
    return fail("missing subcommand (" + names + "); see tandem --help");
  absl::Status status;
  if (app.got_subcommand("dump")) status = tandem::tools::runDump(dump);
  if (app.got_subcommand("opt")) status = tandem::tools::runOpt(opt);
  if (app.got_subcommand("train")) status = tandem::tools::runTrain(train);
  if (absl::IsCancelled(status)) return kInterrupted;  // Ctrl-C: already reported
  if (!status.ok()) return fail(std::string(status.message()));
  return 0;
}
