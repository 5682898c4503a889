// `tandem train`: compiles a zoo model for data-parallel training on the given devices
// and trains it on Fashion-MNIST, printing one line per epoch (and a progress bar while an
// epoch runs on a terminal), optionally writing the same figures to a CSV file.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "frontend/zoo/zoo.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/trainer.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/progress.h"

namespace tandem::tools {
namespace {

std::atomic<bool> g_stop{false};

void onInterrupt(int) { g_stop.store(true); }

// "kaiming", "normal:0.01" or the IR's own spelling "normal(std=0.01)".
absl::StatusOr<ir::Initializer> parseInit(const std::string& text) {
  using K = ir::Initializer::Kind;
  if (text == "kaiming") return ir::Initializer{K::kKaiming};
  std::string std_text;
  if (text.rfind("normal:", 0) == 0) std_text = text.substr(7);
  if (text.rfind("normal(std=", 0) == 0 && text.back() == ')')
    std_text = text.substr(11, text.size() - 12);
  double std = 0;
  if (!std_text.empty() && absl::SimpleAtod(std_text, &std) && std > 0)
    return ir::Initializer{K::kNormal, std};
  return absl::InvalidArgumentError(absl::StrCat(
      "--init: '", text, "' is not an initializer (kaiming, or normal:STD such as normal:0.01)"));
}

// Time per op kind summed over all steps and devices, busiest first, split by stream.
std::string profileReport(runtime::Executor& ex) {
  struct Total {
    double seconds = 0;
    int64_t runs = 0;
  };
  std::map<std::pair<bool, std::string>, Total> totals;
  double compute = 0, comm = 0;
  for (const runtime::TraceEntry& e : ex.takeTrace()) {
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

}  // namespace

void addTrainCommand(CLI::App& app, TrainFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "train", "Train a zoo model on Fashion-MNIST, data parallel over the given devices.");
  cmd->add_option("--model", f.model, "Model to train (required): lenet or resnet18");
  cmd->add_option("--devices", f.devices,
                  "Devices: a list such as cpu:0,cpu:1, or a count N meaning cpu:0..cpu:N-1")
      ->capture_default_str();
  addBatchOption(cmd, f.batch);
  cmd->add_option("--epochs", f.epochs, "Passes over the training data")->capture_default_str();
  cmd->add_option("--lr", f.lr, "SGD learning rate (default: the model's)");
  cmd->add_option("--momentum", f.momentum, "SGD momentum (default: the model's)");
  cmd->add_option("--weight-decay", f.weight_decay, "SGD weight decay (default: the model's)");
  cmd->add_option("--init", f.init,
                  "Initializer of conv and linear weights: kaiming or normal:STD (default: the "
                  "model's; the lessons use normal:0.01)");
  cmd->add_option("--seed", f.seed, "Seed of initialization and shuffling")->capture_default_str();
  cmd->add_option("--limit-train", f.limit_train, "Use only the first N training images")
      ->capture_default_str();
  cmd->add_option("--limit-test", f.limit_test, "Use only the first N test images")
      ->capture_default_str();
  cmd->add_option("--data", f.data, "Directory of the Fashion-MNIST IDX files")
      ->capture_default_str();
  cmd->add_option("--metrics", f.metrics, "Also write the per-epoch figures to this CSV file");
  cmd->add_option("--threads-per-device", f.threads_per_device,
                  "CPU threads each device's kernels use")
      ->capture_default_str();
  cmd->add_option("--bucket-mb", f.bucket_mb, "Gradient all_reduce bucket cap in MiB")
      ->capture_default_str();
  cmd->add_flag("--profile", f.profile,
                "Time every node and print, per op, where the training steps spent their time");
}

absl::Status runTrain(const TrainFlags& f) {
  // Ctrl-C from here on finishes the current step and stops (even while data loads).
  g_stop.store(false);
  struct RestoreSigint {
    void (*previous)(int) = std::signal(SIGINT, onInterrupt);
    ~RestoreSigint() { std::signal(SIGINT, previous); }
  } restore;
  if (f.model.empty())
    return absl::InvalidArgumentError("train: --model is required (lenet or resnet18)");
  auto spec = zoo::modelByName(f.model);
  if (!spec.ok())
    return absl::InvalidArgumentError(absl::StrCat("--model: ", spec.status().message()));
  if (spec->image_shape != std::vector<int64_t>{1, 28, 28})
    return absl::InvalidArgumentError(
        absl::StrCat("--model: ", f.model, " takes ", absl::StrJoin(spec->image_shape, "x"),
                     " images, but Fashion-MNIST has 1x28x28 (use lenet or resnet18)"));
  auto devices = ir::parseDeviceList(f.devices);
  if (!devices.ok())
    return absl::InvalidArgumentError(absl::StrCat("--devices: ", devices.status().message()));
  if (f.batch < static_cast<int64_t>(devices->size()))
    return absl::InvalidArgumentError(
        absl::StrCat("--batch: ", f.batch, " is smaller than the device count ", devices->size(),
                     "; every device needs at least one example"));
  if (f.epochs < 1) return absl::InvalidArgumentError("--epochs: must be >= 1");
  if (f.threads_per_device < 1)
    return absl::InvalidArgumentError("--threads-per-device: must be >= 1");
  if (f.limit_train < 0 || f.limit_test < 0)
    return absl::InvalidArgumentError("--limit-train/--limit-test: must be >= 0");

  runtime::ModelDefaults defaults = runtime::defaultsFor(f.model);
  runtime::TrainOptions o{.devices = *devices,
                          .batch = f.batch,
                          .lr = f.lr.value_or(defaults.lr),
                          .momentum = f.momentum.value_or(defaults.momentum),
                          .weight_decay = f.weight_decay.value_or(defaults.weight_decay),
                          .weight_init = defaults.weight_init,
                          .seed = f.seed,
                          .threads_per_device = f.threads_per_device,
                          .bucket_mb = f.bucket_mb,
                          .trace = f.profile};
  if (f.init) {
    auto init = parseInit(*f.init);
    if (!init.ok()) return init.status();
    o.weight_init = *init;
  }

  auto train = runtime::data::loadFashionMnist(f.data, runtime::data::Split::kTrain, f.limit_train);
  if (!train.ok()) return train.status();
  auto test = runtime::data::loadFashionMnist(f.data, runtime::data::Split::kTest, f.limit_test);
  if (!test.ok()) return test.status();
  if (train->count < f.batch)
    return absl::InvalidArgumentError(
        absl::StrCat("--batch: ", f.batch, " is more than the ", train->count,
                     " training images (drop --limit-train or lower --batch)"));

  auto trainer = runtime::Trainer::create(*spec, o);
  if (!trainer.ok()) return trainer.status();
  if (absl::Status s = (*trainer)->initialize(); !s.ok()) return s;

  std::ofstream csv;
  if (!f.metrics.empty()) {
    csv.open(f.metrics);
    if (!csv)
      return absl::InvalidArgumentError(absl::StrCat("--metrics: cannot write ", f.metrics));
    csv << "epoch,train_loss,train_acc,test_loss,test_acc,seconds,images_per_s,eval_seconds\n";
  }
  std::cout << absl::StrFormat(
      "%s on %s, batch %d (%s per device), lr %g, momentum %g, weight decay %g, init %s, %d "
      "train / %d test images\n",
      f.model, ir::toString(*devices), f.batch,
      f.batch % static_cast<int64_t>(devices->size()) == 0
          ? absl::StrCat(f.batch / static_cast<int64_t>(devices->size()))
          : std::string("uneven"),
      o.lr, o.momentum, o.weight_decay, ir::toString(o.weight_init), train->count, test->count);
  std::cout << absl::StrFormat("%5s %10s %9s %9s %8s %9s\n", "epoch", "train_loss", "train_acc",
                               "test_acc", "seconds", "images/s");
  std::cout.flush();

  runtime::data::BatchLoader train_loader(*train, f.batch, /*shuffle=*/true, f.seed,
                                          /*drop_last=*/true);
  runtime::data::BatchLoader test_loader(*test, f.batch, /*shuffle=*/false, f.seed,
                                         /*drop_last=*/false);
  ProgressBar bar(isatty(fileno(stderr)) != 0);
  absl::Status status;
  for (int epoch = 1; epoch <= f.epochs && status.ok(); ++epoch) {
    train_loader.startEpoch(epoch);
    auto r = (*trainer)->trainEpoch(
        train_loader,
        [&](int64_t done, int64_t total, double images_per_s, double loss) {
          bar.update(absl::StrFormat("epoch %d/%d", epoch, f.epochs), done, total,
                     absl::StrFormat("%.0f images/s  loss %.4f", images_per_s, loss));
        },
        &g_stop);
    bar.clear();
    if (!r.ok()) {
      status = r.status();
      break;
    }
    if (g_stop.load()) {
      std::cout << absl::StrFormat("stopped by Ctrl-C in epoch %d after %d images\n", epoch,
                                   r->examples);
      status = absl::CancelledError("interrupted");
      break;
    }
    test_loader.startEpoch(0);
    auto t = (*trainer)->evaluate(test_loader);
    if (!t.ok()) {
      status = t.status();
      break;
    }
    double images_per_s = r->examples / r->seconds;
    std::cout << absl::StrFormat("%5d %10.4f %9.4f %9.4f %8.1f %9.0f\n", epoch, r->loss,
                                 r->accuracy, t->accuracy, r->seconds, images_per_s);
    std::cout.flush();
    if (csv.is_open())
      csv << absl::StrFormat("%d,%.6f,%.6f,%.6f,%.6f,%.3f,%.1f,%.3f\n", epoch, r->loss, r->accuracy,
                             t->loss, t->accuracy, r->seconds, images_per_s, t->seconds)
          << std::flush;
  }
  if (f.profile && status.ok()) std::cout << profileReport((*trainer)->executor());
  return status;
}

}  // namespace tandem::tools
