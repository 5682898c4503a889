// `tandem train`: compiles a zoo model for data-parallel training on the given devices
// and trains it on Fashion-MNIST, printing one line per epoch (and a progress bar while an
// epoch runs on a terminal), optionally writing the same figures to a CSV file. Every
// line written is checked; SIGINT and SIGTERM stop after the current step.

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ir/status_macros.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/trainer.h"
#include "tools/driver/auto_split.h"
#include "tools/driver/compile.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/model_flags.h"
#include "tools/tandem/output_file.h"
#include "tools/tandem/plot.h"
#include "tools/tandem/progress.h"
#include "tools/tandem/stop_signal.h"
#include "tools/tandem/summary.h"
#include "tools/tandem/trace_file.h"

namespace tandem::tools {
namespace {

// Time per op kind summed over all steps and devices, busiest first, split by stream.
std::string profileReport(const std::vector<runtime::TraceEntry>& trace) {
  struct Total {
    double seconds = 0;
    int64_t runs = 0;
  };
  std::map<std::pair<bool, std::string>, Total> totals;
  double compute = 0, comm = 0;
  for (const runtime::TraceEntry& e : trace) {
    if (e.node->graph()->name() != ir::kTrainGraph) continue;
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

// Images per device of the compiled step: the sizes of the split of the images input.
std::vector<int64_t> perDeviceBatch(const ir::Module& m) {
  for (const auto& n : m.graph(ir::kTrainGraph)->nodes())
    if (n->op() == ir::Op::kSplit && n->operand(0)->def()->op() == ir::Op::kInput &&
        n->operand(0)->type().shape.size() == 4)
      return n->attrAs<std::vector<int64_t>>("sizes");
  return {m.graph(ir::kTrainGraph)->inputs()[0]->result()->type().shape[0]};
}

std::string runHeader(const TrainFlags& f, const ModelChoice& c, const ir::Module& m,
                      int64_t train_count, int64_t test_count) {
  const driver::CompileOptions& o = c.compile;
  std::vector<int64_t> split = perDeviceBatch(m);
  bool even = std::all_of(split.begin(), split.end(), [&](int64_t s) { return s == split[0]; });
  const int64_t batch = o.build.batch, steps = train_count / batch;
  const int64_t dropped = train_count - steps * batch;
  std::string line1 = absl::StrFormat(
      "%s on %s, batch %d (%s per device), lr %g, momentum %g, weight decay %g, init %s, seed "
      "%d\n",
      c.spec.name, deviceList(o.pipeline.devices), batch,
      even ? absl::StrCat(split[0]) : absl::StrJoin(split, "/"), o.pipeline.lr, o.pipeline.momentum,
      o.pipeline.weight_decay, ir::toString(o.build.weight_init), f.seed);
  std::string line2 =
      dropped == 0
          ? absl::StrFormat("%s training images per epoch in %d steps, %s test images\n",
                            thousands(train_count), steps, thousands(test_count))
          : absl::StrFormat(
                "%s of %s training images per epoch in %d steps (the %d that do not fill a "
                "batch are left out, different ones each epoch), %s test images\n",
                thousands(steps * batch), thousands(train_count), steps, dropped,
                thousands(test_count));
  return line1 + line2;
}

// A loss for the table: fixed point, or exponent form once it has blown up, so the
// columns stay aligned.
std::string lossCell(double loss) {
  return std::abs(loss) < 1e5 ? absl::StrFormat("%10.4f", loss) : absl::StrFormat("%10.3e", loss);
}

absl::Status checkLimit(const char* flag, const std::optional<int64_t>& limit,
                        const runtime::data::Dataset& data, const char* what,
                        const std::string& dir) {
  if (limit && *limit > data.available)
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", *limit, " is more than the ",
                                                   data.available, " ", what, " images in ", dir));
  return absl::OkStatus();
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

}  // namespace

absl::StatusOr<int> runTrain(const TrainFlags& f) {
  // From here on SIGINT and SIGTERM stop cleanly (even while the data loads).
  StopSignals stop;
  auto choice = resolveModelFlags(f.model, /*for_training=*/true);
  if (!choice.ok()) return choice.status();
  const int64_t batch = choice->compile.build.batch;
  warnAboutThreads(f, choice->compile.pipeline.devices.size());
  if (choice->auto_split && f.profile)
    return absl::InvalidArgumentError(
        "--profile: cannot go with --split auto (both time every node of the step they trace)");
  if (choice->auto_split && f.trace)
    return absl::InvalidArgumentError(
        "--trace: cannot go with --split auto (it traces the steps it measures itself)");
  if (f.trace_steps && !f.trace)
    return absl::InvalidArgumentError("--trace-steps: goes with --trace FILE (which is not given)");

  // The metrics file is opened (and its header written) before anything slow, so a bad
  // path fails at once and a run stopped in epoch 1 still leaves a header.
  std::optional<OutputFile> csv;
  if (f.metrics) {
    auto opened = OutputFile::open(*f.metrics, "--metrics");
    if (!opened.ok()) return opened.status();
    csv.emplace(*std::move(opened));
    RETURN_IF_ERROR(
        csv->write("epoch,train_loss,train_acc,test_loss,test_acc,seconds,"
                   "images_per_s,eval_seconds\n"));
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
  OutputFile out = OutputFile::standardOutput();

  using runtime::data::Split;
  auto train = runtime::data::loadFashionMnist(f.data, Split::kTrain, f.limit_train.value_or(0));
  if (!train.ok()) return train.status();
  RETURN_IF_ERROR(checkLimit("--limit-train", f.limit_train, *train, "training", f.data));
  auto test = runtime::data::loadFashionMnist(f.data, Split::kTest, f.limit_test.value_or(0));
  if (!test.ok()) return test.status();
  RETURN_IF_ERROR(checkLimit("--limit-test", f.limit_test, *test, "test", f.data));
  if (train->count < batch)
    return absl::InvalidArgumentError(
        absl::StrCat("--batch: ", batch, " is more than the ", train->count, " training images",
                     f.limit_train ? " left by --limit-train" : "", " (lower --batch)"));

  auto stoppedBeforeTraining = [&]() -> int {
    std::fprintf(stderr, "tandem: stopped by %s before training started\n", stop.name().c_str());
    return stop.exitCode();
  };
  if (stop.requested()) return stoppedBeforeTraining();
  auto module = driver::compileModel(choice->spec, choice->compile);
  if (!module.ok()) return module.status();
  const std::string header = runHeader(f, *choice, **module, train->count, test->count);
  auto trainer =
      runtime::Trainer::create(std::move(*module), {.seed = f.seed,
                                                    .threads_per_device = f.threads_per_device,
                                                    .conv_algorithm = f.conv_algorithm,
                                                    .blocked_activations = !f.plain_layout,
                                                    .trace = f.profile,
                                                    .allow_tf32 = !f.no_tf32,
                                                    .record_steps = !f.no_cuda_graphs});
  if (!trainer.ok()) return trainer.status();
  RETURN_IF_ERROR((*trainer)->initialize());
  if (stop.requested()) return stoppedBeforeTraining();

  RETURN_IF_ERROR(out.write(header));
  RETURN_IF_ERROR(out.write(absl::StrFormat("%5s %10s %9s %9s %8s %9s\n", "epoch", "train_loss",
                                            "train_acc", "test_acc", "seconds", "images/s")));

  runtime::data::BatchLoader train_loader(*train, batch, /*shuffle=*/true, f.seed,
                                          /*drop_last=*/true);
  runtime::data::BatchLoader test_loader(*test, batch, /*shuffle=*/false, f.seed,
                                         /*drop_last=*/false);
  ProgressBar bar(isatty(fileno(stderr)) != 0);
  std::optional<driver::AutoSplit> auto_split;
  if (choice->auto_split) auto_split.emplace(choice->spec, choice->compile, **trainer);
  absl::Status split_status, trace_status;
  // How the run ended when not by finishing every epoch: the line to say, and the code.
  std::string ending;
  int exit_code = 0;
  for (int epoch = 1; epoch <= f.epochs && exit_code == 0; ++epoch) {
    train_loader.startEpoch(epoch);
    runtime::StepReport bad_step;
    bool nonfinite = false;
    auto r = (*trainer)->trainEpoch(train_loader, [&](const runtime::StepReport& s) {
      bar.update(absl::StrFormat("epoch %d/%d", epoch, f.epochs), s.step, s.steps,
                 absl::StrFormat("%.0f images/s  loss %.4f", s.examples / s.seconds, s.mean_loss));
      if (trace) {  // takes each step's entries, so --profile gets them from it
        trace_status = trace->afterStep((*trainer)->executor(), f.profile ? &profiled : nullptr);
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
          split_status = out.write(absl::StrFormat(
              "split re-planned after step %d of epoch %d: %s images per device (busy %s ms "
              "per step before)\n",
              s.step, epoch, absl::StrJoin(**changed, "/"), absl::StrJoin(busy, "/")));
          if (!split_status.ok()) return false;
        }
      }
      return !stop.requested();
    });
    bar.clear();
    if (!r.ok()) return r.status();
    if (!split_status.ok()) return split_status;
    if (!trace_status.ok()) return trace_status;
    if (nonfinite) {
      ending = absl::StrFormat(
          "tandem: the loss is %g at epoch %d, step %d of %d (lr %g): training diverged; lower "
          "--lr, or pass --allow-nonfinite to keep going\n",
          bad_step.loss, epoch, bad_step.step, bad_step.steps, choice->compile.pipeline.lr);
      exit_code = kExitNonFinite;
      break;
    }
    if (stop.requested()) {
      ending = absl::StrFormat(
          "tandem: stopped by %s in epoch %d after step %d of %d (%s images); the table has "
          "every epoch before it\n",
          stop.name(), epoch, r->steps, train_loader.batchesPerEpoch(), thousands(r->examples));
      exit_code = stop.exitCode();
      break;
    }
    test_loader.startEpoch(0);
    auto t = (*trainer)->evaluate(test_loader, [&] { return !stop.requested(); });
    if (!t.ok()) return t.status();
    if (t->stopped) {
      ending = absl::StrFormat(
          "tandem: stopped by %s in epoch %d while evaluating it (trained, not evaluated); the "
          "table has every epoch before it\n",
          stop.name(), epoch);
      exit_code = stop.exitCode();
      break;
    }
    double images_per_s = r->examples / r->seconds;
    RETURN_IF_ERROR(
        out.write(absl::StrFormat("%5d %s %9.4f %9.4f %8.1f %9.0f\n", epoch, lossCell(r->loss),
                                  r->accuracy, t->accuracy, r->seconds, images_per_s)));
    if (csv)
      RETURN_IF_ERROR(csv->write(absl::StrFormat("%d,%.6f,%.6f,%.6f,%.6f,%.3f,%.1f,%.3f\n", epoch,
                                                 r->loss, r->accuracy, t->loss, t->accuracy,
                                                 r->seconds, images_per_s, t->seconds)));
    if (plot) {  // redrawn each epoch (one gnuplot run), so the picture is always current
      curves.push_back({epoch, r->loss, r->accuracy, t->accuracy});
      RETURN_IF_ERROR(plot->draw(curves, f.epochs,
                                 absl::StrFormat("%s on %s, batch %d, lr %g", choice->spec.name,
                                                 deviceList(choice->compile.pipeline.devices),
                                                 batch, choice->compile.pipeline.lr)));
    }
  }
  if (trace) RETURN_IF_ERROR(trace->finish((*trainer)->executor().module()));
  if (f.profile) {
    std::vector<runtime::TraceEntry> rest = (*trainer)->executor().takeTrace();
    profiled.insert(profiled.end(), rest.begin(), rest.end());
    RETURN_IF_ERROR(out.write(profileReport(profiled)));
  }
  if (csv) RETURN_IF_ERROR(csv->close());
  RETURN_IF_ERROR(out.close());
  if (!ending.empty()) std::fputs(ending.c_str(), stderr);
  return exit_code;
}

}  // namespace tandem::tools
