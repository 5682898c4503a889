// tandem: the command-line front door. Every user error ends with one line on standard
// error and exit code 2.

#include <iostream>

#include "CLI/CLI.hpp"
#include "tools/tandem/commands.h"

namespace {

constexpr int kUsageError = 2;

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
  app.require_subcommand(1);
  tandem::tools::DumpFlags dump;
  tandem::tools::OptFlags opt;
  tandem::tools::addDumpCommand(app, dump);
  tandem::tools::addOptCommand(app, opt);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(e.what());
  }
  absl::Status status;
  if (app.got_subcommand("dump")) status = tandem::tools::runDump(dump);
  if (app.got_subcommand("opt")) status = tandem::tools::runOpt(opt);
  if (!status.ok()) return fail(std::string(status.message()));
  return 0;
}
