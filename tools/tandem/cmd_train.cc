// `tandem train`: compiles a zoo model for data-parallel training on the given devices
// and trains it on Fashion-MNIST, printing one line per epoch (and a progress bar while an
// epoch runs on a terminal), optionally writing the same figures to a CSV file. Every
// line written is checked; SIGINT and SIGTERM stop after the current step. With
// --checkpoint it writes a checkpoint after every epoch; --resume continues one.

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "backend/processes.h"
#include "backend/settings.h"
#include "ir/interfaces.h"
#include "ir/op_views.h"
#include "ir/printer.h"
#include "ir/status_macros.h"
#include "ir/target.h"
#include "runtime/checkpoint.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/lr_schedule.h"
#include "runtime/nonfinite_variables.h"
#include "runtime/trainer.h"
#include "train/auto_split.h"
#include "train/compile.h"
#include "train/training_data.h"
#include "train/training_session.h"
#include "tools/tandem/activity.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/model_flags.h"
#include "tools/tandem/module_file.h"
#include "tools/tandem/output_file.h"
#include "tools/tandem/path_claims.h"
#include "tools/tandem/plot.h"
#include "tools/tandem/progress.h"
#include "tools/tandem/stop_signal.h"
#include "tools/tandem/summary.h"
#include "tools/tandem/trace_file.h"
#include "tools/tandem/train_hooks.h"

namespace tandem::tools {
namespace {

/// The flags the backends read, as backend settings by name (backend/settings.h): CPU
/// threads, convolution algorithms, TF32 on GPUs. The executor checks them.
backend::Settings backendOptions(const TrainFlags& f) {
  return {{"threads_per_device", f.threads_per_device},
          {"conv_algorithm", backend::toString(f.conv_algorithm)},
          {"allow_tf32", !f.no_tf32}};
}

// Time per op kind summed over all steps and devices, busiest first, split by stream.
std::string profileReport(const std::vector<runtime::TraceEntry>& trace) {
  struct Total {
    double seconds = 0;
    int64_t runs = 0;
  };
  std::map<std::pair<bool, std::string>, Total> totals;
  double compute = 0, comm = 0;
  for (const runtime::TraceEntry& e : trace) {
    // The input pipeline's copies overlap the step before: not the step's stream time.
    if (e.node->graph()->name() != ir::kTrainGraph || e.prefetch) continue;
    double s = (e.end_ns - e.start_ns) * 1e-9;
    Total& t = totals[{e.comm, std::string(e.node->opName())}];
    t.seconds += s;
    ++t.runs;
    (e.comm ? comm : compute) += s;
  }
  std::vector<std::pair<std::pair<bool, std::string>, Total>> rows(totals.begin(), totals.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  std::string out = absl::StrFormat(
      "\nprofile of train_step (all devices): compute %.2f s, comm %.2f s\n%-32s %-8s %10s %8s "
      "%12s\n",
      compute, comm, "op", "stream", "seconds", "share", "us per run");
  for (const auto& [key, t] : rows)
    absl::StrAppend(&out, absl::StrFormat("%-32s %-8s %10.3f %7.1f%% %12.1f\n", key.second,
                                          key.first ? "comm" : "compute", t.seconds,
                                          100 * t.seconds / (key.first ? comm : compute),
                                          1e6 * t.seconds / t.runs));
  return out;
}

// "1 step", "3 steps".
std::string counted(int64_t n, const std::string& noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

std::string runHeader(const TrainFlags& f, const ModelChoice& c, const ir::Module& m,
                      int64_t train_count, int64_t test_count) {
  const training::CompileOptions& o = c.compile;
  std::vector<int64_t> split = training::perDeviceBatch(m);
  bool even = std::all_of(split.begin(), split.end(), [&](int64_t s) { return s == split[0]; });
  const int64_t batch = o.build.batch, steps = train_count / batch;
  const int64_t dropped = train_count - steps * batch;
  const passes::PipelineConfig& p = o.pipeline;
  const std::string optimizer =
      p.optimizer == "sgd"
          ? absl::StrFormat("lr %g, momentum %g, weight decay %g", p.lr, p.momentum, p.weight_decay)
          : absl::StrFormat("%s lr %g, betas %g/%g, eps %g, weight decay %g", p.optimizer, p.lr,
                            p.beta1, p.beta2, p.eps, p.weight_decay);
  const std::string schedule =
      p.lr_schedule ? absl::StrCat(", schedule ", c.schedule,
                                   c.warmupSteps(steps, f.epochs) > 0
                                       ? absl::StrCat(" after ", c.warmupSteps(steps, f.epochs),
                                                      " warmup steps")
                                       : "")
                    : "";
  std::string clip =
      p.clip_grad_norm > 0 ? absl::StrCat(", gradients clipped to norm ", p.clip_grad_norm) : "";
  if (o.build.label_smoothing > 0)
    absl::StrAppend(&clip, ", label smoothing ", o.build.label_smoothing);
  std::string line1 = absl::StrFormat(
      "%s on %s, batch %d (%s per device), %s%s%s, init %s, seed %d\n", c.spec.name,
      deviceList(p.devices), batch, even ? absl::StrCat(split[0]) : absl::StrJoin(split, "/"),
      optimizer, schedule, clip, ir::toString(o.build.weight_init), f.seed);
  std::string line2 =
      dropped == 0
          ? absl::StrFormat("%s training %s per epoch in %s, %s test %s\n", thousands(train_count),
                            train_count == 1 ? "image" : "images", counted(steps, "step"),
                            thousands(test_count), test_count == 1 ? "image" : "images")
          : absl::StrFormat(
                "%s of %s training images per epoch in %s (%s not fill a batch %s left out, "
                "different ones each epoch), %s test %s\n",
                thousands(steps * batch), thousands(train_count), counted(steps, "step"),
                dropped == 1 ? "the 1 that does" : absl::StrCat("the ", dropped, " that do"),
                dropped == 1 ? "is" : "are", thousands(test_count),
                test_count == 1 ? "image" : "images");
  return line1 + line2;
}

// A loss for the table: fixed point, or exponent form once it has blown up, so the
// columns stay aligned.
std::string lossCell(double loss) {
  return std::abs(loss) < 1e5 ? absl::StrFormat("%10.4f", loss) : absl::StrFormat("%10.3e", loss);
}

// "tandem: warning: ...": a legal setting that is surely a mistake or changes nothing. One
// line each, from rank 0 only (every rank has the same flags).
void warn(const std::string& text) {
  if (backend::Processes::current().rank() != 0) return;
  const std::string line = absl::StrCat("tandem: warning: ", text, "\n");
  std::fputs(line.c_str(), stderr);
}

// Flags that apply to what this run does not have: said rather than ignored in silence.
void warnAboutInertFlags(const TrainFlags& f, const ir::Module& m, bool several_processes) {
  const bool any_cuda = std::any_of(m.devices().begin(), m.devices().end(),
                                    [](const ir::Device& d) { return d.kind.name() == "cuda"; });
  if (f.no_tf32 && !any_cuda)
    warn(
        "--no-tf32: only CUDA devices round f32 to TF32; the CPU devices compute in full f32 "
        "anyway");
  const bool any_recording =
      std::any_of(m.devices().begin(), m.devices().end(), [](const ir::Device& d) {
        const ir::TargetInfo* t = ir::findTarget(d.kind);
        return t != nullptr && t->step_recording;
      });
  if (f.no_cuda_graphs && !any_recording)
    warn(
        "--no-cuda-graphs: only CUDA devices record steps as CUDA graphs; it changes nothing "
        "on CPU devices");
  if (f.collective_timeout && !several_processes)
    warn(
        "--collective-timeout: bounds waits for other processes under mpirun; this run is one "
        "process");
}

// One core or more per device is what the kernels are tuned for; oversubscribed cores
// make every device wait on the others (500x slower at 1000 threads on 2 cores).
void warnAboutThreads(const TrainFlags& f, size_t devices) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const uint64_t threads = static_cast<uint64_t>(f.threads_per_device) * devices;
  if (f.threads_per_device > 1 && threads > cores)
    std::fprintf(stderr,
                 "tandem: warning: --threads-per-device %d on %zu devices asks for %llu threads "
                 "but this machine has %u cores; the devices will wait on each other (use "
                 "--threads-per-device %u)\n",
                 f.threads_per_device, devices, static_cast<unsigned long long>(threads), cores,
                 std::max<unsigned>(1, cores / static_cast<unsigned>(devices)));
}

// Why the loss is not finite, as the variables and the settings tell after the stop, and
// what to do: the first variable (in model order) holding a NaN or an infinity and how many
// do; with AdamW and --eps 0, its division by sqrt(exp_avg_sq) + eps, which is 0/0 for a
// value whose gradient has been 0 (by the stop every moment is NaN, so the settings say
// it); else divergence, which a lower --lr helps.
std::string nonFiniteCause(const runtime::Executor& ex, const passes::PipelineConfig& p) {
  constexpr absl::string_view kKeepGoing = "pass --allow-nonfinite to keep going";
  absl::StatusOr<runtime::NonFiniteVariables> bad = runtime::findNonFiniteVariables(ex);
  std::string where;
  if (bad.ok() && !bad->names.empty())
    where = absl::StrFormat("@%s holds NaN or infinity (%d of its %d values)%s: ", bad->names[0],
                            bad->first_bad_values, bad->first_values,
                            bad->names.size() == 1
                                ? ""
                                : absl::StrFormat(", as do %d more of the %d variables",
                                                  bad->names.size() - 1, bad->checked));
  else if (bad.ok())
    where = "every variable is still finite, so this step's arithmetic overflowed: ";
  if (p.optimizer == "adamw" && p.eps == 0)
    return absl::StrCat(where,
                        "AdamW divides by sqrt(exp_avg_sq) + eps, which --eps 0 leaves 0 where a "
                        "gradient has been 0 throughout, and 0/0 is NaN; give --eps > 0 such as "
                        "PyTorch's 1e-08, or ",
                        kKeepGoing);
  return absl::StrCat(where, "training diverged; lower --lr, or ", kKeepGoing);
}

// "nan" or "inf" without the sign printf gives a NaN whose sign bit is set ("-nan").
std::string lossText(double loss) { return std::isnan(loss) ? "nan" : absl::StrFormat("%g", loss); }

TrainHooks*& hooks() {
  static TrainHooks* installed = nullptr;
  return installed;
}

// FNV-1a of bytes, as hex: digests the ranks of a multi-process run compare.
std::string digestOf(absl::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return absl::StrFormat("%016x", h);
}

// The settings every rank of a multi-process run must share: all that decide the module
// it compiles, the data order, the run's length and which collectives it makes (the
// checkpoints, a stop on a non-finite loss). mpirun's MPMD lines give each rank its own
// flags, so they are compared at start-up (Processes::agree), before any collective that
// a difference would corrupt. Per-rank choices that change no result may differ:
// --threads-per-device, --data's path (its contents are
// compared after loading), --collective-timeout, and the outputs (rank 0 writes them).
std::vector<std::pair<std::string, std::string>> settingsEveryRankShares(const TrainFlags& f,
                                                                         const ModelChoice& c,
                                                                         int ranks) {
  const training::CompileOptions& o = c.compile;
  const passes::PipelineConfig& p = o.pipeline;
  const std::vector<ir::Device> local(
      p.devices.begin(), p.devices.begin() + static_cast<std::ptrdiff_t>(p.devices.size() / ranks));
  std::string build = versionText();
  std::replace(build.begin(), build.end(), '\n', ' ');
  auto given = [](bool on) { return std::string(on ? "given" : "not given"); };
  auto number = [](const auto& v) { return v ? absl::StrCat(*v) : std::string("unset"); };
  return {
      {"the tandem build", build},
      {"--model", c.spec.name},
      {"--devices", deviceList(local)},
      {"--batch", absl::StrCat(o.build.batch)},
      {"--split", f.model.split},
      {"--optimizer", p.optimizer},
      {"--lr", training::exactNumber(p.lr)},
      {"--momentum", training::exactNumber(p.momentum)},
      {"--weight-decay", training::exactNumber(p.weight_decay)},
      {"--beta1", training::exactNumber(p.beta1)},
      {"--beta2", training::exactNumber(p.beta2)},
      {"--eps", training::exactNumber(p.eps)},
      {"--schedule", c.schedule},
      {"--warmup", c.warmupText()},
      {"--clip-grad-norm", training::exactNumber(p.clip_grad_norm)},
      {"--label-smoothing", training::exactNumber(o.build.label_smoothing)},
      {"--init", ir::toString(o.build.weight_init)},
      {"--bucket-mb", training::exactNumber(p.bucket_mb)},
      {"--first-bucket-mb", training::exactNumber(p.first_bucket_mb)},
      {"--allreduce-groups", absl::StrCat(p.allreduce_groups)},
      {"--sync-bn", f.model.sync_bn ? "on" : "off"},
      {"--shard-updates", given(f.model.shard_updates)},
      {"--no-fuse", given(f.model.no_fuse)},
      {"--plain-layout", given(f.model.plain_layout)},
      {"--no-recompute", given(f.model.no_recompute)},
      {"--group-updates", f.model.group_updates},
      {"--precision", f.model.precision},
      {"--allreduce-dtype", f.model.allreduce_dtype},
      {"--conv-algorithm", f.conv_algorithm == backend::ConvAlgorithm::kDirect ? "direct" : "auto"},
      {"--no-tf32", given(f.no_tf32)},
      {"--epochs", absl::StrCat(f.epochs)},
      {"--seed", absl::StrCat(f.seed)},
      {"--limit-train", number(f.limit_train)},
      {"--limit-test", number(f.limit_test)},
      {"--allow-nonfinite", given(f.allow_nonfinite)},
      {"--checkpoint", given(f.checkpoint.has_value())},
      {"--checkpoint-every", number(f.checkpoint_every)},
      {"--resume", given(f.resume.has_value())}};
}

// What the ranks compare once the module is compiled and the data read: a rank of
// another build, or one whose --data holds other files, would train another step.
std::vector<std::pair<std::string, std::string>> contentsEveryRankShares(
    const ir::Module& m, const runtime::data::Dataset& train, const runtime::data::Dataset& test) {
  // zlib's crc32 (a few GB/s) rather than FNV: the training images are 188 MB of floats.
  auto dataDigest = [](const runtime::data::Dataset& d) {
    uLong crc = crc32(0L, Z_NULL, 0);
    auto add = [&crc](const void* data, size_t bytes) {
      const auto* p = static_cast<const Bytef*>(data);
      for (size_t at = 0; at < bytes; at += 1u << 30)
        crc = crc32(crc, p + at, static_cast<uInt>(std::min<size_t>(bytes - at, 1u << 30)));
    };
    add(d.images.data(), d.images.size() * sizeof(float));
    add(d.labels.data(), d.labels.size() * sizeof(int32_t));
    return absl::StrFormat("%08x (%d images)", crc, d.count);
  };
  return {{"the compiled module's digest", digestOf(ir::printModule(m, {.locations = false}))},
          {"the training data's digest", dataDigest(train)},
          {"the test data's digest", dataDigest(test)}};
}

// Whether --checkpoint names the directory --resume reads (the run goes on writing there).
bool sameCheckpointDirectory(const TrainFlags& f) {
  if (!f.resume) return false;
  const std::string dir = f.checkpoint.value_or(*f.resume);
  std::error_code ignored;
  return dir == *f.resume || std::filesystem::equivalent(dir, *f.resume, ignored);
}

// The files the run reads (the data, a checkpoint to resume) and writes (the metrics,
// trace, picture and checkpoint files), each claimed by its flag (path_claims.h).
absl::Status claimFiles(const TrainFlags& f) {
  PathClaims claims;
  using Use = PathClaims::Use;
  for (const char* split : {"train", "t10k"})
    for (const char* kind : {"images-idx3-ubyte", "labels-idx1-ubyte"})
      for (const char* suffix : {".gz", ""}) {
        const std::string file = absl::StrCat(f.data, "/", split, "-", kind, suffix);
        std::error_code unreadable;  // the data's own check says why, later
        if (std::filesystem::exists(file, unreadable))
          RETURN_IF_ERROR(claims.claim("--data", file, Use::kReads));
      }
  // The model's own files are inputs too: an output on them would destroy the model.
  if (f.model.onnx) RETURN_IF_ERROR(claims.claim("--onnx", *f.model.onnx, Use::kReads));
  if (f.module) RETURN_IF_ERROR(claims.claim("--module", *f.module, Use::kReads));
  if (f.resume && !sameCheckpointDirectory(f))
    RETURN_IF_ERROR(claims.claim("--resume", runtime::checkpointPath(*f.resume), Use::kReads));
  if (f.checkpoint || f.resume) {
    const std::string dir = f.checkpoint.value_or(*f.resume);
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

// The balancer's options: the test build's hooks may fix the devices' speeds, so that its
// re-plans are known in advance rather than timing's.
runtime::SplitBalancer::Options balancerOptions() {
  runtime::SplitBalancer::Options o;
  if (hooks() != nullptr) hooks()->adjustBalancer(o);
  return o;
}

// The flags as rank `procs.rank()` runs them: the module spans every rank's --devices, and
// only rank 0 writes the run's files (the figures are the same on every rank).
TrainFlags flagsOfRank(const TrainFlags& given, const backend::Processes& procs) {
  TrainFlags f = given;
  f.model.ranks = procs.size();
  if (procs.rank() != 0) {
    f.metrics.reset();
    f.plot.reset();
    f.trace.reset();
    f.trace_steps.reset();
    f.profile = false;
  }
  return f;
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
  std::shared_ptr<ImportedValues> imported;  // --onnx: the model's values
  auto choice = resolveModelFlags(f.model, /*for_training=*/true, &imported);
  if (!choice.ok()) return choice.status();
  // Under mpirun: the same settings on every rank, before any collective.
  RETURN_IF_ERROR(procs->agree(settingsEveryRankShares(given, *choice, procs->size()),
                               "comparing the ranks' settings"));
  const int64_t batch = choice->compile.build.batch;
  warnAboutThreads(f, choice->compile.pipeline.devices.size() / static_cast<size_t>(procs->size()));
  if (procs->several())  // under mpirun, the kinds must talk across processes
    for (const ir::Device& d : choice->compile.pipeline.devices)
      if (const ir::TargetInfo* t = ir::findTarget(d.kind);
          t != nullptr && !t->cross_process_collectives)
        return absl::InvalidArgumentError(
            absl::StrCat("--devices: ", ir::toString(d), " is a ", t->display_name,
                         " device, which has no collectives across processes (mpirun)"));
  if (procs->several() && choice->auto_split)
    return absl::InvalidArgumentError(
        "--split: auto re-plans the split within one process; under mpirun give even or weights");
  if (choice->auto_split && f.profile)
    return absl::InvalidArgumentError(
        "--profile: cannot go with --split auto (both time every node of the step they trace)");
  if (choice->auto_split && f.trace)
    return absl::InvalidArgumentError(
        "--trace: cannot go with --split auto (it traces the steps it measures itself)");
  if (choice->auto_split && f.module)
    return absl::InvalidArgumentError(
        "--module: cannot go with --split auto (it recompiles the step it re-plans)");
  if (f.trace_steps && !f.trace)
    return absl::InvalidArgumentError("--trace-steps: goes with --trace FILE (which is not given)");
  if (f.checkpoint_every && !f.checkpoint && !f.resume)
    return absl::InvalidArgumentError(
        "--checkpoint-every: goes with --checkpoint DIR (which is not given)");
  // The checkpoint to continue is read and verified first: a bad one fails at once.
  std::optional<runtime::Checkpoint> resumed;
  std::string resumed_path;
  if (f.resume) {
    resumed_path = runtime::checkpointPath(*f.resume);
    auto read = runtime::readCheckpointFile(*f.resume);
    if (!read.ok())
      return absl::InvalidArgumentError(absl::StrCat("--resume: ", read.status().message()));
    resumed.emplace(*std::move(read));
    if (resumed->epoch - 1 > f.epochs)
      return absl::InvalidArgumentError(absl::StrCat("--epochs: ", f.epochs, " is fewer than the ",
                                                     resumed->epoch - 1, " epochs '", resumed_path,
                                                     "' has finished already"));
    if (resumed->epoch > f.epochs && resumed->progress.steps > 0)
      return absl::InvalidArgumentError(
          absl::StrCat("--epochs: ", f.epochs, " ends before epoch ", resumed->epoch, ", which '",
                       resumed_path, "' is in already (step ", resumed->progress.steps, ")"));
  }
  // Only one process writes checkpoints: rank 0 of a multi-process run (all of them call
  // the writer: it gathers every rank's devices on rank 0).
  const bool writes_checkpoints = procs->rank() == 0;
  // Every file the run reads and writes, claimed before any is opened: two outputs on one
  // path, or an output on an input, would lose one of them.
  if (writes_checkpoints) RETURN_IF_ERROR(claimFiles(f));
  std::optional<runtime::CheckpointWriter> checkpoints;
  if (f.checkpoint || f.resume) {
    const std::string dir = f.checkpoint.value_or(*f.resume);
    checkpoints.emplace(dir, writes_checkpoints);
    RETURN_IF_ERROR(checkpoints->prepare(/*replacing=*/sameCheckpointDirectory(f)));
  }

  // The metrics file is claimed before anything slow, so a bad path or a file another run
  // writes fails at once; it is emptied and its header written only once every check has
  // passed (a refused run leaves it as it was), before the first step (a run stopped in
  // epoch 1 still leaves a header).
  std::optional<OutputFile> csv;
  if (f.metrics) {
    auto claimed = OutputFile::claim(*f.metrics, "--metrics");
    if (!claimed.ok()) return claimed.status();
    csv.emplace(*std::move(claimed));
  }
  // So are gnuplot and the picture's directory: no training first and a failure after.
  std::optional<TraceFile> trace;  // opened now too, so that a bad path fails at once
  if (f.trace) {
    auto opened = TraceFile::open(*f.trace, f.trace_steps.value_or(TraceFile::kDefaultSteps));
    if (!opened.ok()) return opened.status();
    trace.emplace(*std::move(opened));
  }
  std::vector<runtime::TraceEntry> profiled;  // --profile's entries, when --trace takes them
  std::optional<PlotFile> plot;
  if (f.plot) {
    auto opened = PlotFile::open(*f.plot, "--plot");
    if (!opened.ok()) return opened.status();
    plot.emplace(*std::move(opened));
  }
  std::vector<EpochPoint> curves;
  // Rank 0 prints the run; the other ranks' figures are the same (every sum is all-reduced).
  OutputFile out = OutputFile::standardOutput();
  if (procs->rank() != 0) {
    ASSIGN_OR_RETURN(out, OutputFile::open("/dev/null", "standard output of rank > 0"));
  }

  setActivity(absl::StrCat("reading the data in ", f.data));
  ASSIGN_OR_RETURN(training::TrainingData data,
                   training::loadFashionMnist(f.data, f.limit_train, f.limit_test, batch));
  const runtime::data::Dataset* train = &data.train;
  const runtime::data::Dataset* test = &data.test;

  // The learning-rate schedule over the run's steps (checked before anything slow).
  const int64_t steps_per_epoch = train->count / batch;
  ASSIGN_OR_RETURN(const runtime::LrSchedule schedule,
                   training::learningRateSchedule(*choice, steps_per_epoch, f.epochs));
  const bool scheduled = choice->compile.pipeline.lr_schedule;
  // The learning rate of epoch `epoch`'s last update, as the table shows it.
  auto lrOfEpoch = [&](int epoch) {
    return choice->compile.pipeline.lr * schedule.factor(epoch * steps_per_epoch - 1);
  };

  if (resumed) {
    // A refusal names the flag that gave the model, and a warmup the user did not give as
    // the model's own, which follows the run's length.
    runtime::CompatibilityNotes notes{.model_setting = f.model.onnx ? "--onnx" : "--model"};
    if (choice->compile.pipeline.lr_schedule && !choice->warmup_steps)
      notes.values["--warmup"] =
          absl::StrCat(choice->spec.name, "'s own warmup for --epochs ", f.epochs);
    if (absl::Status s = runtime::checkCompatible(
            *resumed, choice->spec.name,
            training::resumeSettings(*choice, f.model, f.seed, train->count, f.epochs), resumed_path,
            notes);
        !s.ok())
      return absl::InvalidArgumentError(absl::StrCat("--resume: ", s.message()));
    // --split auto goes on from the split it had reached (the balancer measures afresh).
    const size_t devices = choice->compile.pipeline.devices.size();
    if (choice->auto_split && resumed->devices == devices && resumed->split.size() == devices)
      choice->compile.pipeline.weights.assign(resumed->split.begin(), resumed->split.end());
  }

  auto stoppedBeforeTraining = [&]() -> int {
    std::fprintf(stderr, "tandem: stopped by %s before training started\n", stop.name().c_str());
    return stop.exitCode();
  };
  if (stop.requested()) return stoppedBeforeTraining();
  setActivity(absl::StrCat(
      "compiling ", choice->spec.name, " for ",
      counted(static_cast<int64_t>(choice->compile.pipeline.devices.size()), "device")));
  auto module = training::compileModel(choice->spec, choice->compile);
  if (!module.ok()) return module.status();
  if (f.module) {
    ASSIGN_OR_RETURN(*module, readModuleToTrain(*f.module, **module));
  }
  // ... and the same module and data: a difference would corrupt the first collective.
  if (procs->several())
    RETURN_IF_ERROR(procs->agree(contentsEveryRankShares(**module, *train, *test),
                                 "comparing the compiled module and the data"));
  if (const std::string w = inertModelFlagWarning(f.model, **module); !w.empty()) warn(w);
  warnAboutInertFlags(f, **module, procs->several());
  const std::string header = runHeader(f, *choice, **module, train->count, test->count);
  setActivity(absl::StrCat("loading ", choice->spec.name, " onto its devices"));
  ASSIGN_OR_RETURN(
      std::unique_ptr<training::TrainingSession> session,
      training::TrainingSession::create(
          std::move(*module), *train, *test,
          {.executor = {.seed = f.seed,
                        .backend_options = backendOptions(f),
                        .trace = f.profile,
                        .record_steps = !f.no_cuda_graphs},
           .seed = f.seed,
           .schedule = scheduled ? std::optional(schedule) : std::nullopt,
           .model = choice->spec.name,
           .settings = training::resumeSettings(*choice, f.model, f.seed, train->count, f.epochs)}));
  runtime::Trainer& trainer = session->trainer();
  runtime::data::BatchLoader& train_loader = session->trainLoader();
  setActivity("initializing the variables");
  RETURN_IF_ERROR(session->initialize());
  if (imported && !f.model.reinit && !resumed)
    RETURN_IF_ERROR(writeImportedValues(trainer.executor(), *imported));
  if (resumed)
    if (absl::Status s = session->restore(*resumed, resumed_path); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat("--resume: ", s.message()));
  if (stop.requested()) return stoppedBeforeTraining();

  if (csv) {
    RETURN_IF_ERROR(csv->start());
    RETURN_IF_ERROR(
        csv->write(absl::StrCat("epoch,train_loss,train_acc,test_loss,test_acc,seconds,"
                                "images_per_s,eval_seconds,split,replans",
                                choice->compile.pipeline.lr_schedule ? ",lr" : "", "\n")));
  }
  RETURN_IF_ERROR(out.write(header));
  if (procs->several()) {  // each rank reads its devices' rows of every batch
    ASSIGN_OR_RETURN(auto rows, trainer.rowsOfThisProcess(ir::kTrainGraph));
    train_loader.setRows(rows.first, rows.second);
  }
  if (resumed)
    RETURN_IF_ERROR(
        out.write(resumed->progress.steps == 0
                      ? absl::StrFormat("resumed from '%s' after epoch %d\n", resumed_path,
                                        resumed->epoch - 1)
                      : absl::StrFormat("resumed from '%s' at epoch %d, step %d of %d\n",
                                        resumed_path, resumed->epoch, resumed->progress.steps,
                                        train_loader.batchesPerEpoch())));
  RETURN_IF_ERROR(out.write(absl::StrFormat("%5s %10s %9s %9s %8s %9s%s\n", "epoch", "train_loss",
                                            "train_acc", "test_acc", "seconds", "images/s",
                                            scheduled ? absl::StrFormat(" %10s", "lr") : "")));
  // A finished epoch's row, CSV line and curve point (a resumed run's earlier epochs too).
  // --split auto's re-plans so far (a resumed run's too): each is in the table, the
  // checkpoint and the epoch's CSV row (its "replans" column: STEP:ROWS ...).
  std::vector<runtime::SplitReplan> replans;
  if (resumed) replans = resumed->replans;
  auto showEpoch = [&](const runtime::EpochFigures& e) -> absl::Status {
    // Under a schedule, the lr of the epoch's last update ends the row.
    const std::string lr_cell =
        scheduled ? absl::StrFormat(" %10.4g", lrOfEpoch(e.epoch)) : std::string();
    RETURN_IF_ERROR(out.write(absl::StrFormat("%5d %s %9.4f %9.4f %8.1f %9.0f%s\n", e.epoch,
                                              lossCell(e.train_loss), e.train_accuracy,
                                              e.test_accuracy, e.seconds, e.images_per_second,
                                              lr_cell)));
    std::vector<std::string> replanned;
    for (const runtime::SplitReplan& r : replans)
      if (r.epoch == e.epoch)
        replanned.push_back(absl::StrCat(r.step, ":", absl::StrJoin(r.rows, "/")));
    if (csv)
      RETURN_IF_ERROR(csv->write(absl::StrFormat(
          "%d,%.6f,%.6f,%.6f,%.6f,%.3f,%.1f,%.3f,%s,%s%s\n", e.epoch, e.train_loss,
          e.train_accuracy, e.test_loss, e.test_accuracy, e.seconds, e.images_per_second,
          e.eval_seconds, absl::StrJoin(e.split, "/"), absl::StrJoin(replanned, " "),
          scheduled ? absl::StrFormat(",%.9g", lrOfEpoch(e.epoch)) : std::string())));
    if (plot) {  // redrawn each epoch (one gnuplot run), so the picture is always current
      curves.push_back({e.epoch, e.train_loss, e.train_accuracy, e.test_accuracy});
      const absl::Status drawn =
          plot->draw(curves, f.epochs,
                     absl::StrFormat("%s on %s, batch %d, lr %g", choice->spec.name,
                                     deviceList(choice->compile.pipeline.devices), batch,
                                     choice->compile.pipeline.lr));
      // A stop signal ended gnuplot: the picture keeps the epochs before, and the run
      // stops at the end of this epoch, as the signal asks.
      if (!(absl::IsCancelled(drawn) && stop.requested())) RETURN_IF_ERROR(drawn);
    }
    return absl::OkStatus();
  };
  // A re-plan's line in the table (one replayed from the checkpoint has no busy times).
  auto showReplan = [&](const runtime::SplitReplan& r, const std::string& why) {
    return out.write(
        absl::StrFormat("split re-planned after step %d of epoch %d: %s images per "
                        "device (%s)\n",
                        r.step, r.epoch, absl::StrJoin(r.rows, "/"), why));
  };
  std::vector<runtime::EpochFigures> history;
  if (resumed) {
    for (const runtime::EpochFigures& e : resumed->history) {
      for (const runtime::SplitReplan& r : replans)
        if (r.epoch == e.epoch) RETURN_IF_ERROR(showReplan(r, "in the run resumed"));
      RETURN_IF_ERROR(showEpoch(e));
      history.push_back(e);
    }
    for (const runtime::SplitReplan& r : replans)
      if (r.epoch == resumed->epoch) RETURN_IF_ERROR(showReplan(r, "in the run resumed"));
  }
  // --split auto: a resumed run goes on from the balancer's state, so that it re-plans
  // where the run it continues would (with the same measurements).
  std::optional<training::AutoSplit> auto_split;
  if (choice->auto_split) {
    auto_split.emplace(choice->spec, choice->compile, trainer, balancerOptions());
    if (resumed && resumed->balancer) auto_split->restore(*resumed->balancer);
  }
  // The run as it stands after `progress` of `epoch` (at an epoch's end: the next epoch,
  // at step 0).
  auto saveCheckpoint = [&](int epoch, const runtime::EpochProgress& progress) -> absl::Status {
    if (!checkpoints) return absl::OkStatus();
    runtime::Checkpoint c = session->checkpoint(epoch, progress, history);
    c.replans = replans;
    if (auto_split) c.balancer = auto_split->balancer().state();
    return checkpoints->save(trainer.executor(), std::move(c));
  };
  if (procs->several()) {
    ASSIGN_OR_RETURN(auto rows, trainer.rowsOfThisProcess(ir::kEvalGraph));
    session->testLoader().setRows(rows.first, rows.second);
  }
  ProgressBar bar(isatty(fileno(stderr)) != 0 && procs->rank() == 0);
  absl::Status split_status, trace_status, checkpoint_status, stop_status;
  // The stop signal every rank acts on (0: none yet). Under mpirun a signal may reach one
  // rank alone, or the ranks at different steps; they agree after every step on the
  // largest signal any got, so all stop at the same step and write one checkpoint.
  int stop_signal = 0;
  auto stopAgreed = [&]() -> bool {
    if (stop_signal != 0) return true;
    absl::StatusOr<int> agreed = procs->maxOverRanks(stop.signal(), "agreeing whether to stop");
    if (!agreed.ok()) {
      stop_status = agreed.status();
      return true;
    }
    stop_signal = *agreed;
    return stop_signal != 0;
  };
  // How the run ended when not by finishing every epoch: the line to say, and the code.
  std::string ending;
  int exit_code = 0;
  for (int epoch = resumed ? resumed->epoch : 1; epoch <= f.epochs && exit_code == 0; ++epoch) {
    // A resumed epoch goes on from the checkpoint's step with its sums so far.
    const runtime::EpochProgress from =
        resumed && epoch == resumed->epoch ? resumed->progress : runtime::EpochProgress{};
    runtime::EpochProgress done = from;  // what a checkpoint written now would hold
    setActivity(absl::StrCat("training ", choice->spec.name, ", epoch ", epoch));
    runtime::StepReport bad_step;
    bool nonfinite = false;
    auto r = session->trainEpoch(epoch, from, [&](const runtime::StepReport& s) {
      bar.update(absl::StrFormat("epoch %d/%d", epoch, f.epochs), s.step, s.steps,
                 absl::StrFormat("%.0f images/s  loss %.4f", s.examples / s.seconds, s.mean_loss));
      if (trace) {  // takes each step's entries, so --profile gets them from it
        trace_status = trace->afterStep(trainer.executor(), f.profile ? &profiled : nullptr);
        if (!trace_status.ok()) return false;
      }
      if (!std::isfinite(s.loss) && !f.allow_nonfinite) {
        nonfinite = true;
        bad_step = s;
        return false;
      }
      if (auto_split) {
        absl::StatusOr<std::optional<std::vector<int64_t>>> changed = auto_split->afterStep();
        if (!changed.ok()) {
          split_status = changed.status();
          return false;
        }
        if (changed->has_value()) {
          bar.clear();
          std::vector<std::string> busy;
          for (double ns : auto_split->balancer().lastBusyNs())
            busy.push_back(absl::StrFormat("%.1f", ns * 1e-6));
          replans.push_back({.epoch = epoch, .step = s.step, .rows = **changed});
          split_status = showReplan(replans.back(), absl::StrCat("busy ", absl::StrJoin(busy, "/"),
                                                                 " ms per step before"));
          if (!split_status.ok()) return false;
        }
      }
      done = {.steps = s.step,
              .examples = s.examples,
              .correct = s.correct,
              .loss_sum = s.loss_sum,
              .seconds = s.seconds};
      // The epoch's last step is followed by the epoch's own checkpoint.
      if (f.checkpoint_every && s.step % *f.checkpoint_every == 0 && s.step < s.steps) {
        checkpoint_status = saveCheckpoint(epoch, done);
        if (!checkpoint_status.ok()) return false;
      }
      if (hooks() != nullptr) hooks()->afterStep(epoch, s.step, trainer.executor());
      return !stopAgreed();
    });
    bar.clear();
    if (!r.ok()) return r.status();
    if (!split_status.ok()) return split_status;
    if (!trace_status.ok()) return trace_status;
    if (!checkpoint_status.ok()) return checkpoint_status;
    if (!stop_status.ok()) return stop_status;
    // Stopped by a signal: the checkpoint takes the run as it stands, for --resume.
    std::string resume_hint;
    if (stop_signal != 0 && !nonfinite && checkpoints) {
      RETURN_IF_ERROR(saveCheckpoint(epoch, done));
      resume_hint = absl::StrCat("; --resume ", checkpoints->dir(), " continues from there");
    }
    if (nonfinite) {
      ending = absl::StrFormat("tandem: the loss is %s at epoch %d, step %d of %d (lr %g): %s\n",
                               lossText(bad_step.loss), epoch, bad_step.step, bad_step.steps,
                               choice->compile.pipeline.lr,
                               nonFiniteCause(trainer.executor(), choice->compile.pipeline));
      exit_code = kExitNonFinite;
      break;
    }
    if (stop_signal != 0) {
      ending = absl::StrFormat(
          "tandem: stopped by %s in epoch %d after step %d of %d (%s images); the table has "
          "every epoch before it%s\n",
          StopSignals::nameOf(stop_signal), epoch, r->steps, train_loader.batchesPerEpoch(),
          thousands(r->examples), resume_hint);
      exit_code = 128 + stop_signal;
      break;
    }
    setActivity(absl::StrCat("evaluating ", choice->spec.name, " after epoch ", epoch));
    auto t = session->evaluate([&] { return !stopAgreed(); });
    if (!t.ok()) return t.status();
    if (!stop_status.ok()) return stop_status;
    if (t->stopped) {
      if (checkpoints) {  // trained: the resumed run evaluates it
        RETURN_IF_ERROR(saveCheckpoint(epoch, done));
        resume_hint = absl::StrCat("; --resume ", checkpoints->dir(), " continues from there");
      }
      ending = absl::StrFormat(
          "tandem: stopped by %s in epoch %d while evaluating it (trained, not evaluated); the "
          "table has every epoch before it%s\n",
          StopSignals::nameOf(stop_signal), epoch, resume_hint);
      exit_code = 128 + stop_signal;
      break;
    }
    history.push_back(session->figures(epoch, *r, *t));
    RETURN_IF_ERROR(showEpoch(history.back()));
    setActivity(absl::StrCat("writing the checkpoint after epoch ", epoch));
    RETURN_IF_ERROR(saveCheckpoint(epoch + 1, {}));
    // A signal that came while the epoch's row was written (or its picture drawn) stops
    // the run here, rather than one step into the next epoch.
    if (epoch < f.epochs && stopAgreed()) {
      if (!stop_status.ok()) return stop_status;
      ending = absl::StrFormat(
          "tandem: stopped by %s after epoch %d; the table has every epoch%s\n",
          StopSignals::nameOf(stop_signal), epoch,
          checkpoints ? absl::StrCat("; --resume ", checkpoints->dir(), " continues from there")
                      : "");
      exit_code = 128 + stop_signal;
    }
  }
  if (trace) RETURN_IF_ERROR(trace->finish(trainer.executor().module()));
  if (f.profile) {
    std::vector<runtime::TraceEntry> rest = trainer.executor().takeTrace();
    profiled.insert(profiled.end(), rest.begin(), rest.end());
    RETURN_IF_ERROR(out.write(profileReport(profiled)));
  }
  if (hooks() != nullptr) RETURN_IF_ERROR(hooks()->atEnd(trainer.executor()));
  if (csv) RETURN_IF_ERROR(csv->close());
  RETURN_IF_ERROR(out.close());
  // "tandem: rank 1: stopped ...": every rank says how it ended, and which it is.
  if (!ending.empty()) ending.insert(std::strlen("tandem: "), procs->prefix());
  if (!ending.empty()) std::fputs(ending.c_str(), stderr);
  return exit_code;
}

void setTrainHooks(TrainHooks* h) { hooks() = h; }
TrainHooks* trainHooks() { return hooks(); }

}  // namespace tandem::tools
