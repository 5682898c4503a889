// tandem's command line, from argv to the exit code (main.cc calls it; so does the tests'
// build with test hooks). Every way out is one line on standard error and an exit code of
// README's table (commands.h): 2 for bad input, 3 when the loss turns non-finite, 4 when a
// rank of a multi-process run stops them all, 5 when the machine refuses memory or a thread
// (or anything unexpected is thrown), 128 + the signal when SIGINT or SIGTERM stopped a run;
// a crash says so before the signal ends the process.

#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backend/backends.h"
#include "backend/processes.h"
#include "tools/tandem/activity.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/flags.h"

namespace tandem::tools {
namespace {

// One line on standard error, however long or multi-line the message, but for a list the
// message indents itself: lines that start with two spaces (the ONNX importer's refusals,
// one line per op type: frontend/onnx/refusals.h) follow the first as they are. Any other
// line break is a space, and a line quoting a huge input is cut with an ellipsis.
int fail(const std::string& message, int code = kExitUsage) {
  constexpr size_t kMaxBytes = 2000;
  constexpr size_t kMaxLines = 32;
  std::vector<std::string> lines;
  for (absl::string_view part : absl::StrSplit(message, '\n')) {
    if (lines.empty() || (absl::StartsWith(part, "  ") && lines.size() < kMaxLines)) {
      lines.emplace_back(part);
    } else {
      absl::StrAppend(&lines.back(), " ", part);
    }
  }
  std::string text;
  for (std::string& line : lines) {
    for (char& c : line)
      if (c == '\r') c = ' ';
    if (line.size() > kMaxBytes)
      line = absl::StrCat(line.substr(0, kMaxBytes - 100), "... (", line.size() - (kMaxBytes - 100),
                          " more bytes)");
    absl::StrAppend(&text, text.empty() ? "" : "\n", line);
  }
  // Under mpirun each rank says which it is (backend/processes.h), in one write so that
  // the ranks' lines do not interleave.
  const std::string whole =
      absl::StrCat("tandem: ", backend::Processes::current().prefix(), text, "\n");
  std::cerr.write(whole.data(), static_cast<std::streamsize>(whole.size()));
  std::cerr.flush();
  return code;
}

// The exit code of a failed command: a resource the machine refused, or a child process
// that hung past its deadline, is not bad input.
int exitCodeOf(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted ||
                 status.code() == absl::StatusCode::kDeadlineExceeded
             ? kExitResources
             : kExitUsage;
}

int run(int argc, char** argv) {
  ParseOutcome parsed = parseCommandLine(argc, argv);
  if (!parsed.error.empty()) return fail(parsed.error);
  if (!parsed.line) return parsed.exit_code;  // --help
  const CommandLine& line = *parsed.line;
  if (line.version) {
    std::cout << versionText();
    return std::cout.flush() ? 0 : fail("cannot write to standard output");
  }
  // The device kinds this build has and their facts, which every command's device lists,
  // pass options (replicate{devices=...}) and modules read from text are checked against.
  backend::registerBackends();
  absl::Status status;
  if (line.subcommand == "dump") status = runDump(line.dump);
  if (line.subcommand == "explore") status = runExplore(line.explore);
  if (line.subcommand == "opt") status = runOpt(line.opt);
  if (line.subcommand == "devices") status = runDevices();
  if (line.subcommand == "plot") {
    absl::StatusOr<int> code = runPlot(line.plot);
    if (code.ok()) return *code;
    status = code.status();
  }
  if (line.subcommand == "simulate") status = runSimulate(line.simulate);
  if (line.subcommand == "import") status = runImport(line.import);
  if (line.subcommand == "run") status = runInference(line.run);
  if (line.subcommand == "export") status = runExport(line.export_model);
  if (line.subcommand == "predict") status = runPredict(line.predict);
  if (line.subcommand == "generate") status = runGenerate(line.generate);
  if (line.subcommand == "train") {
    absl::StatusOr<int> code = runTrain(line.train);
    // A rank that fails leaves MPI without finalizing: mpirun then ends the other ranks.
    if (code.ok()) backend::Processes::finish();
    if (code.ok()) return *code;
    status = code.status();
  }
  if (!status.ok()) return fail(std::string(status.message()), exitCodeOf(status));
  return 0;
}

}  // namespace

int runCommandLine(int argc, char** argv) {
  // Other threads' exceptions reach std::terminate; the handler names them too.
  installFailureHandlers();
  try {
    return run(argc, argv);
  } catch (...) {
    return fail(describeException(std::current_exception()), kExitResources);
  }
}

}  // namespace tandem::tools
