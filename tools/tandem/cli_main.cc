// tandem's command line, from argv to the exit code (main.cc calls it; so does the tests'
// build with test hooks). Every user error ends with one line on standard error and exit
// code 2; training also exits 3 when the loss turns non-finite and 128 + the signal when
// SIGINT or SIGTERM stopped it (commands.h).

#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "backend/processes.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/flags.h"

namespace tandem::tools {
namespace {

// One line on standard error, however long or multi-line the message: a message quoting
// a huge input is cut with an ellipsis.
int fail(const std::string& message) {
  constexpr size_t kMaxBytes = 2000;
  std::string line = message;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  if (line.size() > kMaxBytes)
    line = absl::StrCat(line.substr(0, kMaxBytes - 100), "... (", line.size() - (kMaxBytes - 100),
                        " more bytes)");
  // Under mpirun each rank says which it is (backend/processes.h), in one write so that
  // the ranks' lines do not interleave.
  const std::string whole =
      absl::StrCat("tandem: ", backend::Processes::current().prefix(), line, "\n");
  std::cerr.write(whole.data(), static_cast<std::streamsize>(whole.size()));
  std::cerr.flush();
  return kExitUsage;
}

}  // namespace

int runCommandLine(int argc, char** argv) {
  ParseOutcome parsed = parseCommandLine(argc, argv);
  if (!parsed.error.empty()) return fail(parsed.error);
  if (!parsed.line) return parsed.exit_code;  // --help
  const CommandLine& line = *parsed.line;
  if (line.version) {
    std::cout << versionText();
    return std::cout.flush() ? 0 : fail("cannot write to standard output");
  }
  absl::Status status;
  if (line.subcommand == "dump") status = runDump(line.dump);
  if (line.subcommand == "opt") status = runOpt(line.opt);
  if (line.subcommand == "devices") status = runDevices();
  if (line.subcommand == "plot") status = runPlot(line.plot);
  if (line.subcommand == "simulate") status = runSimulate(line.simulate);
  if (line.subcommand == "train") {
    absl::StatusOr<int> code = runTrain(line.train);
    // A rank that fails leaves MPI without finalizing: mpirun then ends the other ranks.
    if (code.ok()) backend::Processes::finish();
    if (code.ok()) return *code;
    status = code.status();
  }
  if (!status.ok()) return fail(std::string(status.message()));
  return 0;
}

}  // namespace tandem::tools
