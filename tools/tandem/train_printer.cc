#include "tools/tandem/train_printer.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numbers>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "backend/processes.h"
#include "ir/status_macros.h"
#include "ir/target.h"
#include "passes/optimizer_options.h"
#include "tools/tandem/activity.h"
#include "tools/tandem/model_flags.h"
#include "tools/tandem/module_file.h"
#include "tools/tandem/summary.h"
#include "tools/tandem/train_hooks.h"
#include "train/loaded_model.h"

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

// A loss for the table: fixed point, or exponent form once it has blown up, so the
// columns stay aligned.
std::string lossCell(double loss) {
  return std::abs(loss) < 1e5 ? absl::StrFormat("%10.4f", loss) : absl::StrFormat("%10.3e", loss);
}

// "nan" or "inf" without the sign printf gives a NaN whose sign bit is set ("-nan").
std::string lossText(double loss) { return std::isnan(loss) ? "nan" : absl::StrFormat("%g", loss); }

// "tandem: warning: ...": a legal setting that is surely a mistake or changes nothing. One
// line each, from rank 0 only (every rank has the same flags).
void warn(const std::string& text) {
  if (backend::Processes::current().rank() != 0) return;
  const std::string line = absl::StrCat("tandem: warning: ", text, "\n");
  std::fputs(line.c_str(), stderr);
}

// Flags that apply to what this run does not have: said rather than ignored in silence.
void warnAboutInertFlags(const TrainFlags& f, const ir::Module& m) {
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
  if (f.collective_timeout && !backend::Processes::current().several())
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

}  // namespace

absl::StatusOr<TrainOutputs> TrainOutputs::open(const TrainFlags& f, int rank) {
  TrainOutputs o;
  // Rank 0 prints the run; the other ranks' figures are the same (every sum is all-reduced).
  if (rank != 0) {
    ASSIGN_OR_RETURN(o.out, OutputFile::open("/dev/null", "standard output of rank > 0"));
  }
  // The metrics file is claimed now, so a bad path or a file another run writes fails at
  // once; it is emptied and its header written only once every check has passed (a
  // refused run leaves it as it was), before the first step.
  if (f.metrics) {
    ASSIGN_OR_RETURN(OutputFile claimed, OutputFile::claim(*f.metrics, "--metrics"));
    o.csv.emplace(std::move(claimed));
  }
  if (f.trace) {
    ASSIGN_OR_RETURN(TraceFile opened,
                     TraceFile::open(*f.trace, f.trace_steps.value_or(TraceFile::kDefaultSteps)));
    o.trace.emplace(std::move(opened));
  }
  if (f.plot) {  // gnuplot and the picture's directory: no training first and a failure after
    ASSIGN_OR_RETURN(PlotFile opened, PlotFile::open(*f.plot, "--plot"));
    o.plot.emplace(std::move(opened));
  }
  return o;
}

TrainPrinter::TrainPrinter(const TrainFlags& f, TrainOutputs& outputs, StopSignals& stop,
                           std::shared_ptr<ImportedValues> imported)
    : f_(f),
      outputs_(outputs),
      stop_(stop),
      imported_(std::move(imported)),
      bar_(isatty(fileno(stderr)) != 0 && backend::Processes::current().rank() == 0) {}

void TrainPrinter::onActivity(const std::string& what) { setActivity(what); }

absl::Status TrainPrinter::onCompiled(std::unique_ptr<ir::Module>& module) {
  if (f_.module) {
    ASSIGN_OR_RETURN(module, readModuleToTrain(*f_.module, *module));
  }
  if (const std::string w = inertModelFlagWarning(f_.model, *module); !w.empty()) warn(w);
  warnAboutInertFlags(f_, *module);
  const size_t ranks = static_cast<size_t>(backend::Processes::current().size());
  warnAboutThreads(f_, module->devices().size() / ranks);
  return absl::OkStatus();
}

absl::Status TrainPrinter::onInitialized(runtime::Executor& executor) {
  if (imported_ && !f_.model.reinit) return writeImportedValues(executor, *imported_);
  return absl::OkStatus();
}

double TrainPrinter::lrOfEpoch(int epoch) const {
  return lr_ * (schedule_ ? schedule_->factor(epoch * steps_per_epoch_ - 1) : 1.0);
}

std::string TrainPrinter::header(const training::RunInfo& run) const {
  const training::ModelChoice& c = run.choice;
  const training::CompileOptions& o = c.compile;
  std::vector<int64_t> split = training::perDeviceBatch(run.module);
  bool even = std::all_of(split.begin(), split.end(), [&](int64_t s) { return s == split[0]; });
  const int64_t batch = o.build.batch, steps = run.train_count / batch;
  const int64_t dropped = run.train_count - steps * batch;
  const passes::PipelineConfig& p = o.pipeline;
  // "sgd lr 0.1, momentum 0.9, weight decay 0": the optimizer's values in its op's order.
  const std::string optimizer =
      absl::StrCat(passes::optimizerShortName(passes::optimizerOp(p.optimizer)), " ",
                   absl::StrJoin(passes::hyperParameters(p.optimizer), ", ",
                                 [](std::string* out, const auto& h) {
                                   absl::StrAppend(out, absl::StrReplaceAll(h.first, {{"_", " "}}),
                                                   " ", absl::StrFormat("%g", h.second));
                                 }));
  const int64_t warmup = c.warmupSteps(steps, f_.epochs);
  const std::string schedule =
      p.lr_schedule
          ? absl::StrCat(", schedule ", c.schedule,
                         warmup > 0 ? absl::StrCat(" after ", warmup, " warmup steps") : "")
          : "";
  std::string clip =
      p.clip_grad_norm > 0 ? absl::StrCat(", gradients clipped to norm ", p.clip_grad_norm) : "";
  if (o.build.label_smoothing > 0)
    absl::StrAppend(&clip, ", label smoothing ", o.build.label_smoothing);
  auto images = [&](int64_t n, const char* what) {
    return absl::StrCat(thousands(n), " ", what, *what ? " " : "", unit_, n == 1 ? "" : "s");
  };
  std::string line1 = absl::StrFormat(
      "%s on %s, batch %d (%s per device), %s%s%s, init %s, seed %d\n", c.spec.name,
      deviceList(p.devices), batch, even ? absl::StrCat(split[0]) : absl::StrJoin(split, "/"),
      optimizer, schedule, clip, ir::toString(o.build.weight_init), f_.seed);
  if (f_.steps)  // trained by steps: no epochs to speak of
    return line1 + absl::StrFormat("%s of %s%s, an evaluation every %s on %s\n",
                                   counted(*f_.steps, "step"), images(batch, ""),
                                   tokens_per_example_ > 0
                                       ? absl::StrCat(" (", tokens_per_example_, " tokens each)")
                                       : "",
                                   counted(steps, "step"), images(run.test_count, "validation"));
  std::string line2 =
      dropped == 0
          ? absl::StrFormat("%s per epoch in %s, %s\n", images(run.train_count, "training"),
                            counted(steps, "step"), images(run.test_count, "test"))
          : absl::StrFormat(
                "%s of %s training %ss per epoch in %s (%s not fill a batch %s left out, "
                "different ones each epoch), %s\n",
                thousands(steps * batch), thousands(run.train_count), unit_, counted(steps, "step"),
                dropped == 1 ? "the 1 that does" : absl::StrCat("the ", dropped, " that do"),
                dropped == 1 ? "is" : "are", images(run.test_count, "test"));
  return line1 + line2;
}

absl::Status TrainPrinter::onStart(const training::RunInfo& run) {
  const passes::PipelineConfig& p = run.choice.compile.pipeline;
  // A classifier's table shows accuracies; any other model its test loss and its metrics.
  const ModelSpec& spec = run.choice.spec;
  accuracy_ = std::find(spec.metrics.begin(), spec.metrics.end(), "accuracy") != spec.metrics.end();
  metrics_.clear();
  for (const std::string& m : spec.metrics)
    if (m != "accuracy") metrics_.push_back(m);
  // Images, or sequences of tokens (a language model: its first input integer ids), or
  // examples.
  unit_ = "example";
  if (!spec.inputs.empty()) {
    const ModelInput& x = spec.inputs.front();
    if (x.dtype == ir::DType::kF32 && x.shape.size() == 3) unit_ = "image";
    if ((x.dtype == ir::DType::kI32 || x.dtype == ir::DType::kI64) && x.shape.size() == 1 &&
        !accuracy_) {
      unit_ = "sequence";
      tokens_per_example_ = x.shape[0];
    }
  }
  lr_ = passes::learningRate(p.optimizer);
  title_ = absl::StrFormat("%s on %s, batch %d, lr %g", run.choice.spec.name, deviceList(p.devices),
                           run.choice.compile.build.batch, lr_);
  steps_per_epoch_ = run.steps_per_epoch;
  curves_.by_step = f_.steps.has_value();
  if (run.schedule != nullptr) schedule_ = *run.schedule;
  if (outputs_.csv) {
    RETURN_IF_ERROR(outputs_.csv->start());
    RETURN_IF_ERROR(outputs_.csv->write(
        absl::StrCat("epoch,train_loss,train_acc,test_loss,test_acc,seconds,images_per_s,"
                     "eval_seconds,split,replans",
                     schedule_ ? ",lr" : "",
                     tokens_per_example_ > 0 ? ",step,val_loss,val_bpc,tokens_per_s" : "", "\n")));
  }
  OutputFile& out = outputs_.out;
  RETURN_IF_ERROR(out.write(header(run)));
  if (const runtime::Checkpoint* r = run.resumed)
    RETURN_IF_ERROR(out.write(
        r->progress.steps == 0
            ? absl::StrFormat("resumed from '%s' after epoch %d\n", run.resumed_path, r->epoch - 1)
            : absl::StrFormat("resumed from '%s' at epoch %d, step %d of %d\n", run.resumed_path,
                              r->epoch, r->progress.steps, run.steps_per_epoch)));
  // A language model's held-out part is its validation text, and its loss per token in
  // bits (per character, for a text of characters) is how such models are compared.
  std::string columns = accuracy_ ? absl::StrFormat("%9s %9s", "train_acc", "test_acc")
                        : tokens_per_example_ > 0
                            ? absl::StrFormat("%10s %8s", "val_loss", "val_bpc")
                            : absl::StrFormat("%10s", "test_loss");
  for (const std::string& m : metrics_) absl::StrAppend(&columns, absl::StrFormat(" %12s", m));
  const std::string rate = tokens_per_example_ > 0 ? "tokens/s" : absl::StrCat(unit_, "s/s");
  return out.write(absl::StrFormat("%5s %10s %s %8s %9s%s\n", f_.steps ? "step" : "epoch",
                                   "train_loss", columns, "seconds", rate,
                                   schedule_ ? absl::StrFormat(" %10s", "lr") : ""));
}

bool TrainPrinter::onStep(const training::StepEvent& e) {
  const runtime::StepReport& s = e.report;
  bar_.update(absl::StrFormat("epoch %d/%d", e.epoch, f_.epochs), s.step, s.steps,
              absl::StrFormat("%.0f %s  loss %.4f",
                              s.examples / s.seconds *
                                  static_cast<double>(std::max<int64_t>(tokens_per_example_, 1)),
                              tokens_per_example_ > 0 ? "tokens/s" : unit_ + "s/s", s.mean_loss));
  if (outputs_.trace) {  // takes each step's entries, so --profile gets them from it
    step_status_ = outputs_.trace->afterStep(e.executor, f_.profile ? &profiled_ : nullptr);
    if (!step_status_.ok()) return false;
  }
  if (TrainHooks* hooks = trainHooks()) hooks->afterStep(e.epoch, s.step, e.executor);
  return true;
}

// A re-plan's line in the table (one replayed from the checkpoint has no busy times).
absl::Status TrainPrinter::onReplan(const runtime::SplitReplan& r, const std::string& why) {
  bar_.clear();
  replans_.push_back(r);
  return outputs_.out.write(
      absl::StrFormat("split re-planned after step %d of epoch %d: %s images per device (%s)\n",
                      r.step, r.epoch, absl::StrJoin(r.rows, "/"), why));
}

// A finished epoch's row, CSV line and curve point (a resumed run's earlier epochs too).
absl::StatusOr<bool> TrainPrinter::onEpoch(const runtime::EpochFigures& e, bool replayed) {
  (void)replayed;  // the table shows the run's every epoch
  bar_.clear();
  // Under a schedule, the lr of the epoch's last update ends the row.
  const std::string lr_cell =
      schedule_ ? absl::StrFormat(" %10.4g", lrOfEpoch(e.epoch)) : std::string();
  std::string cells =
      accuracy_ ? absl::StrFormat("%9.4f %9.4f", e.train_accuracy, e.test_accuracy)
      : tokens_per_example_ > 0
          ? absl::StrFormat(" %s %8.4f", lossCell(e.test_loss), e.test_loss / std::numbers::ln2)
          : absl::StrCat(" ", lossCell(e.test_loss));
  for (const std::string& m : metrics_)  // the test pass's figure of each
    for (const runtime::MetricValue& v : e.test_metrics)
      if (v.name == m) absl::StrAppend(&cells, absl::StrFormat(" %12.6g", v.value));
  const double rate =
      e.images_per_second * static_cast<double>(std::max<int64_t>(tokens_per_example_, 1));
  // Trained by steps, a row is an evaluation and says the step it came after.
  const int64_t at = f_.steps ? e.epoch * steps_per_epoch_ : e.epoch;
  RETURN_IF_ERROR(outputs_.out.write(absl::StrFormat(
      "%5d %s %s %8.1f %9.0f%s\n", at, lossCell(e.train_loss), cells, e.seconds, rate, lr_cell)));
  // --split auto's re-plans in the epoch: its CSV row's "replans" column (STEP:ROWS ...).
  std::vector<std::string> replanned;
  for (const runtime::SplitReplan& r : replans_)
    if (r.epoch == e.epoch)
      replanned.push_back(absl::StrCat(r.step, ":", absl::StrJoin(r.rows, "/")));
  if (outputs_.csv)
    RETURN_IF_ERROR(outputs_.csv->write(absl::StrFormat(
        "%d,%.6f,%.6f,%.6f,%.6f,%.3f,%.1f,%.3f,%s,%s%s%s\n", e.epoch, e.train_loss,
        e.train_accuracy, e.test_loss, e.test_accuracy, e.seconds, e.images_per_second,
        e.eval_seconds, absl::StrJoin(e.split, "/"), absl::StrJoin(replanned, " "),
        schedule_ ? absl::StrFormat(",%.9g", lrOfEpoch(e.epoch)) : std::string(),
        tokens_per_example_ > 0
            ? absl::StrFormat(",%d,%.6f,%.6f,%.1f", e.epoch * steps_per_epoch_, e.test_loss,
                              e.test_loss / std::numbers::ln2,
                              e.images_per_second * static_cast<double>(tokens_per_example_))
            : std::string())));
  if (outputs_.plot) {  // redrawn each epoch (one gnuplot run), so the picture is always current
    curves_.points.push_back({.epoch = e.epoch,
                              .train_loss = e.train_loss,
                              .train_acc = e.train_accuracy,
                              .test_acc = e.test_accuracy,
                              .step = curves_.by_step ? at : 0,
                              .val_loss = e.test_loss});
    const absl::Status drawn = outputs_.plot->draw(
        {curves_}, curves_.by_step ? *f_.steps : static_cast<int64_t>(f_.epochs), title_);
    // A stop signal ended gnuplot: the picture keeps the epochs before, and the run stops
    // at the end of this epoch, as the signal asks.
    if (!(absl::IsCancelled(drawn) && stop_.requested())) RETURN_IF_ERROR(drawn);
  }
  return true;
}

std::string TrainPrinter::endingLine(training::TrainingSession& session,
                                     const training::RunEnd& end) const {
  using Why = training::RunEnd::Why;
  const std::optional<std::string> dir = session.checkpointDir();
  const std::string resume_hint =
      end.checkpointed && dir ? absl::StrCat("; --resume ", *dir, " continues from there") : "";
  if (end.why == Why::kNonFinite)
    return absl::StrFormat(
        "tandem: the loss is %s at epoch %d, step %d of %d (lr %g): %s\n",
        lossText(end.bad_step.loss), end.epoch, end.bad_step.step, end.bad_step.steps,
        passes::learningRate(session.choice().compile.pipeline.optimizer), end.cause);
  const std::string signal = StopSignals::nameOf(end.signal);
  if (end.while_evaluating)
    return absl::StrFormat(
        "tandem: stopped by %s in epoch %d while evaluating it (trained, not evaluated); the "
        "table has every epoch before it%s\n",
        signal, end.epoch, resume_hint);
  if (end.after_epoch)
    return absl::StrFormat("tandem: stopped by %s after epoch %d; the table has every epoch%s\n",
                           signal, end.epoch, resume_hint);
  return absl::StrFormat(
      "tandem: stopped by %s in epoch %d after step %d of %d (%s images); the table has every "
      "epoch before it%s\n",
      signal, end.epoch, end.steps_done, session.stepsPerEpoch(), thousands(end.examples_done),
      resume_hint);
}

absl::StatusOr<int> TrainPrinter::finish(training::TrainingSession& session,
                                         const training::RunEnd& end) {
  bar_.clear();
  RETURN_IF_ERROR(step_status_);
  runtime::Executor& executor = session.executor();
  if (outputs_.trace) RETURN_IF_ERROR(outputs_.trace->finish(executor.module()));
  if (f_.profile) {
    std::vector<runtime::TraceEntry> rest = executor.takeTrace();
    profiled_.insert(profiled_.end(), rest.begin(), rest.end());
    RETURN_IF_ERROR(outputs_.out.write(profileReport(profiled_)));
    const double train = session.trainSeconds(), wait = session.inputWaitSeconds();
    RETURN_IF_ERROR(outputs_.out.write(absl::StrFormat(
        "waiting for the data: %.2f s of the %.2f s of training (%.1f%%)\n", wait, train,
        train > 0 ? 100 * wait / train : 0.0)));
  }
  if (TrainHooks* hooks = trainHooks()) RETURN_IF_ERROR(hooks->atEnd(executor));
  if (outputs_.csv) RETURN_IF_ERROR(outputs_.csv->close());
  RETURN_IF_ERROR(outputs_.out.close());
  using Why = training::RunEnd::Why;
  if (end.why == Why::kFinished) return 0;
  std::string line = endingLine(session, end);
  // "tandem: rank 1: stopped ...": every rank says how it ended, and which it is.
  line.insert(std::strlen("tandem: "), backend::Processes::current().prefix());
  std::fputs(line.c_str(), stderr);
  return end.why == Why::kNonFinite ? kExitNonFinite : 128 + end.signal;
}

}  // namespace tandem::tools
