// `tandem train`: trains a zoo model (or an ONNX model) data-parallel on Fashion-MNIST,
// printing one line per epoch (and a progress bar while an epoch runs on a terminal),
// optionally writing the same figures to a CSV file, a picture and a trace. The run itself is
// the training library's (train/training_session.h): this file turns the flags into its
// TrainConfig and hands its events to TrainPrinter; every error names the flag at fault
// (tools/tandem/setting_flags.h). SIGINT and SIGTERM stop after the current step.

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backend/processes.h"
#include "backend/settings.h"
#include "ir/status_macros.h"
#include "ir/target.h"
#include "runtime/checkpoint.h"
#include "runtime/data/open_source.h"
#include "tools/tandem/activity.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/model_flags.h"
#include "tools/tandem/path_claims.h"
#include "tools/tandem/setting_flags.h"
#include "tools/tandem/stop_signal.h"
#include "tools/tandem/train_hooks.h"
#include "tools/tandem/train_printer.h"
#include "train/training_data.h"
#include "train/training_session.h"

namespace tandem::tools {
namespace {

/// The flags the backends read, as backend settings by name (backend/settings.h): CPU
/// threads, convolution algorithms, TF32 on GPUs. The executor checks them.
backend::Settings backendOptions(const TrainFlags& f) {
  return {{"threads_per_device", f.threads_per_device},
          {"conv_algorithm", backend::toString(f.conv_algorithm)},
          {"allow_tf32", !f.no_tf32}};
}

TrainHooks*& hooks() {
  static TrainHooks* installed = nullptr;
  return installed;
}

// The files the data specs read that exist (an image folder's are in its own subfolders;
// a missing one is the data's error), as (flag, file).
std::vector<std::pair<const char*, std::string>> dataFiles(const TrainFlags& f) {
  std::vector<std::pair<const char*, std::string>> files;
  for (const auto& [flag, given] :
       {std::pair{"--data", std::optional(f.data)}, std::pair{"--test-data", f.test_data}}) {
    if (!given) continue;
    for (const std::string& file : runtime::data::filesOfSpec(training::dataSpecOf(*given))) {
      std::error_code unreadable;
      if (std::filesystem::is_regular_file(file, unreadable)) files.emplace_back(flag, file);
    }
  }
  return files;
}

// The files the run reads (the data, a checkpoint to resume) and writes (the metrics,
// trace, picture and checkpoint files), each claimed by its flag (path_claims.h).
absl::Status claimFiles(const TrainFlags& f, const training::TrainConfig& config) {
  PathClaims claims;
  using Use = PathClaims::Use;
  for (const auto& [flag, file] : dataFiles(f))
    RETURN_IF_ERROR(claims.claim(flag, file, Use::kReads));
  // The model's own files are inputs too: an output on them would destroy the model.
  if (f.model.onnx) RETURN_IF_ERROR(claims.claim("--onnx", *f.model.onnx, Use::kReads));
  if (f.module) RETURN_IF_ERROR(claims.claim("--module", *f.module, Use::kReads));
  if (f.resume && !training::writesWhereItResumes(config))
    RETURN_IF_ERROR(claims.claim("--resume", runtime::checkpointPath(*f.resume), Use::kReads));
  if (config.checkpoint) {  // --checkpoint's directory, or --resume's
    const std::string& dir = *config.checkpoint;
    const std::string flag = f.checkpoint ? "--checkpoint" : "--resume";
    RETURN_IF_ERROR(claims.claim(flag, runtime::checkpointPath(dir), Use::kWrites));
    RETURN_IF_ERROR(claims.claim(flag, runtime::checkpointLockPath(dir), Use::kWrites));
    RETURN_IF_ERROR(claims.claimPrefix(flag, dir, runtime::kCheckpointTempPrefix));
  }
  for (const auto& [flag, path] : {std::pair{"--metrics", &f.metrics},
                                   std::pair{"--trace", &f.trace}, std::pair{"--plot", &f.plot}})
    if (*path) RETURN_IF_ERROR(claims.claim(flag, **path, Use::kWrites));
  return absl::OkStatus();
}

// The flags as rank `procs.rank()` runs them: only rank 0 writes the run's files (the
// figures are the same on every rank).
TrainFlags flagsOfRank(const TrainFlags& given, const backend::Processes& procs) {
  TrainFlags f = given;
  if (procs.rank() != 0) {
    f.metrics.reset();
    f.plot.reset();
    f.trace.reset();
    f.trace_steps.reset();
    f.profile = false;
  }
  return f;
}

// Flags of the CLI's own that cannot go together (the library checks its settings').
absl::Status checkFlagCombinations(const TrainFlags& f) {
  const bool auto_split = f.model.written.split == "auto";
  if (auto_split && f.profile)
    return absl::InvalidArgumentError(
        "--profile: cannot go with --split auto (both time every node of the step they trace)");
  if (auto_split && f.trace)
    return absl::InvalidArgumentError(
        "--trace: cannot go with --split auto (it traces the steps it measures itself)");
  if (auto_split && f.module)
    return absl::InvalidArgumentError(
        "--module: cannot go with --split auto (it recompiles the step it re-plans)");
  if (f.trace_steps && !f.trace)
    return absl::InvalidArgumentError("--trace-steps: goes with --trace FILE (which is not given)");
  return absl::OkStatus();
}

// The run the flags ask for. --resume goes on writing checkpoints into the directory it
// reads unless --checkpoint names another.
// (The model's settings are filled once the model is made for the data.)
absl::StatusOr<training::TrainConfig> configOf(const TrainFlags& f) {
  training::TrainConfig c{.epochs = f.epochs,
                          .steps = f.steps,
                          .eval_every = f.eval_every,
                          .seed = f.seed,
                          .data = {.spec = f.data,
                                   .test_spec = f.test_data,
                                   .val_fraction = f.val_fraction,
                                   .augment = f.augment,
                                   .image_height = f.image_height,
                                   .image_width = f.image_width,
                                   .window_length = contextOfFlags(f.model)},
                          .limit_train = f.limit_train,
                          .limit_test = f.limit_test,
                          .checkpoint = f.checkpoint ? f.checkpoint : f.resume,
                          .resume = f.resume,
                          .checkpoint_every = f.checkpoint_every,
                          .allow_nonfinite = f.allow_nonfinite,
                          .executor = {.backend_options = backendOptions(f),
                                       .trace = f.profile,
                                       .record_steps = !f.no_cuda_graphs}};
  // The test build's hooks may fix the devices' speeds, so that --split auto's re-plans
  // are known in advance rather than timing's.
  if (hooks() != nullptr) hooks()->adjustBalancer(c.balancer);
  // Under mpirun every rank must run the same build with the same kernels.
  std::string build = versionText();
  std::replace(build.begin(), build.end(), '\n', ' ');
  c.also_shared = {
      {"the tandem build", build},
      {"--conv-algorithm", f.conv_algorithm == backend::ConvAlgorithm::kDirect ? "direct" : "auto"},
      {"--no-tf32", f.no_tf32 ? "given" : "not given"}};
  return c;
}

}  // namespace

absl::StatusOr<int> runTrain(const TrainFlags& given) {
  // From here on SIGINT and SIGTERM stop cleanly (even while the data loads).
  StopSignals stop;
  setActivity("starting the run");
  // Under mpirun: one process per rank, each driving --devices (backend/processes.h).
  ASSIGN_OR_RETURN(backend::Processes * procs, backend::Processes::start());
  constexpr double kDefaultCollectiveTimeout = 60;
  procs->setTimeout(given.collective_timeout.value_or(kDefaultCollectiveTimeout),
                    &StopSignals::pending);
  const TrainFlags f = flagsOfRank(given, *procs);
  RETURN_IF_ERROR(checkFlagCombinations(f));
  const FlagNames flags(f.model.onnx.has_value());
  // A zoo model's name is checked before the data is read; the model is then made for it.
  if (!f.model.onnx) RETURN_IF_ERROR(modelSpecOfFlags(f.model, /*data=*/nullptr).status());
  ASSIGN_OR_RETURN(training::TrainConfig config, configOf(f));
  // Every file the run reads and writes, claimed before any is written: two outputs on one
  // path, or an output on an input, would lose one of them. Outputs that cannot be made
  // (--plot without gnuplot) are refused before the data is read.
  if (procs->rank() == 0) RETURN_IF_ERROR(claimFiles(f, config));
  ASSIGN_OR_RETURN(TrainOutputs outputs, TrainOutputs::open(f, procs->rank()));
  setActivity(absl::StrCat("opening the data ", f.data));
  ASSIGN_OR_RETURN(config.data.examples,
                   training::openTrainingData(config.data, f.limit_train, f.limit_test, f.seed,
                                              flags));
  std::shared_ptr<ImportedValues> imported;  // --onnx: the model's values
  ASSIGN_OR_RETURN(const ModelSpec spec,
                   modelSpecOfFlags(f.model, config.data.examples->train.get(), &imported));
  ASSIGN_OR_RETURN(config.model, modelSettingsOfFlags(f.model, spec, /*for_training=*/true));
  TrainPrinter printer(f, outputs, stop, imported);
  absl::StatusOr<std::unique_ptr<training::TrainingSession>> session =
      training::TrainingSession::create(spec, config, flags, printer);
  if (absl::IsCancelled(session.status()) && stop.requested()) {
    std::fprintf(stderr, "tandem: stopped by %s before training started\n", stop.name().c_str());
    return stop.exitCode();
  }
  RETURN_IF_ERROR(session.status());
  ASSIGN_OR_RETURN(const training::RunEnd end, (*session)->fit());
  return printer.finish(**session, end);
}

void setTrainHooks(TrainHooks* h) { hooks() = h; }
TrainHooks* trainHooks() { return hooks(); }

}  // namespace tandem::tools
