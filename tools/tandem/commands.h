#pragma once

#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "ir/ir.h"

namespace tandem::tools {

/// How a command prints its module; shared by dump and opt.
struct OutputFlags {
  std::string format = "text";
  std::string graph;
  std::string output;
  bool canonical = false;
  bool timing = false;
  bool no_verify = false;
};

/// Flags of `tandem dump`.
struct DumpFlags {
  std::string model;
  std::string devices = "cpu:0";
  int64_t batch = 256;
  std::string after;
  double lr = 0.1, momentum = 0, weight_decay = 0;
  double bucket_mb = 25, first_bucket_mb = 1;
  std::string weights;
  bool memory = false;
  OutputFlags out;
};

/// Flags of `tandem opt`.
struct OptFlags {
  std::string file;
  std::string passes;
  std::vector<std::string> print_after;
  OutputFlags out;
};

/// Flags of `tandem train`; unset hyper-parameters take the model's defaults.
struct TrainFlags {
  std::string model;
  std::string devices = "cpu:0";
  int64_t batch = 256;
  int epochs = 10;
  std::optional<double> lr, momentum, weight_decay;
  std::optional<std::string> init;
  uint64_t seed = 0;
  int64_t limit_train = 0, limit_test = 0;
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string metrics;
  int threads_per_device = 1;
  double bucket_mb = 25;
  bool profile = false;
};

void addDumpCommand(CLI::App& app, DumpFlags& flags);
void addTrainCommand(CLI::App& app, TrainFlags& flags);
void addOptCommand(CLI::App& app, OptFlags& flags);

absl::Status runDump(const DumpFlags& flags);
absl::Status runOpt(const OptFlags& flags);
/// Trains; a Ctrl-C stop returns a Cancelled status after the current step.
absl::Status runTrain(const TrainFlags& flags);

/// Adds --batch (a 64-bit integer, checked by hand rather than clamped by CLI11).
void addBatchOption(CLI::App* cmd, int64_t& batch);

/// Adds --format, --graph, -o/--output, --canonical, --timing and --no-verify.
void addOutputFlags(CLI::App* cmd, OutputFlags& f);

/// OK when `format` is one writeModule knows (text, dot, summary); checked before any work.
absl::Status checkFormat(const std::string& format);

/// Renders a module as `f.format` (text, dot or summary), optionally one graph only, and
/// writes it to `f.output` (stdout when empty). DOT needs one graph (train_step by default).
absl::Status writeModule(const ir::Module& m, const OutputFlags& f);

}  // namespace tandem::tools
