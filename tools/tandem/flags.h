#pragma once

#include <memory>
#include <string>

#include "tools/tandem/commands.h"

namespace tandem::tools {

/// Every subcommand's flags, filled by parse().
struct CommandLine {
  std::string subcommand;  // "dump", "explore", "opt", "train", "plot", "simulate", "import",
                           // "run", "export", "predict", "devices"; or empty
  bool version = false;
  DumpFlags dump;
  ExploreFlags explore;
  OptFlags opt;
  TrainFlags train;
  PlotFlags plot;
  SimulateFlags simulate;
  ImportFlags import;
  RunFlags run;
  ExportFlags export_model;
  PredictFlags predict;
  GenerateFlags generate;
};

/// The outcome of parsing argv: a command line to run, or an exit now (help printed:
/// code 0; a usage error: code 2 with `error` to print).
struct ParseOutcome {
  std::unique_ptr<CommandLine> line;
  int exit_code = 0;
  std::string error;
};

/// Parses argv with CLI11 (the only place that does), including every number's range:
/// errors name the flag and the value.
ParseOutcome parseCommandLine(int argc, char** argv);

}  // namespace tandem::tools
