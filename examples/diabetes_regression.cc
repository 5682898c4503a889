// diabetes_regression: a regression through the public API (tandem/tandem.h): an MLP
// trained with mean squared error, data-parallel on two devices, on scikit-learn's diabetes
// data set (442 patients, 10 features, a real target), read from .npz files as
// `tandem train --data npz:FILE` reads them. It includes nothing but tandem/tandem.h.
//
//   python3 examples/write_diabetes_npz.py /tmp/diabetes      (train.npz, test.npz)
//   diabetes_regression [--epochs N] [--initial-weights DIR] [--losses FILE] /tmp/diabetes
//
// --initial-weights writes every parameter as Model::create drew it, before training, as
// DIR/NAME.npy (numpy.load reads them; "fc1.w.npy" is [32, 10], as torch's nn.Linear); and
// --losses writes the settings and every epoch's training and test loss (exactly: %.17g).
// With both, a program of its own can replay the same steps from the same start
// (tests/api/diabetes_replay.py does so in PyTorch and compares the losses).

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tandem/tandem.h"

namespace {

using tandem::Builder;
using tandem::Tensor;

// The settings the replay needs too: it reads them from the losses file.
constexpr int64_t kBatch = 16;  // divides the 64 test examples (write_diabetes_npz.py)
constexpr double kLr = 0.05, kMomentum = 0.9;
constexpr uint64_t kSeed = 0;

// 10 features -> 32 -> relu -> 1 prediction, its mean squared error against the target y.
// The loss is the batch's mean in the training step and its sum in the evaluation step (as
// tandem::StepOutputs asks: a pass reports the sums over its examples divided by them).
tandem::ModelSpec diabetesMlp() {
  tandem::ModelSpec spec{.name = "diabetes_mlp",
                         .inputs = {{.name = "x", .shape = {10}}, {.name = "y", .shape = {1}}}};
  spec.step = [](Builder& b, const tandem::StepInputs& in) {
    Tensor h = b.relu(b.linear(in["x"], {.out_features = 32, .name = "fc1"}));
    Tensor prediction = b.linear(h, {.out_features = 1, .name = "fc2"});
    const auto reduction =
        b.training() ? tandem::ir::Reduction::kMean : tandem::ir::Reduction::kSum;
    return tandem::StepOutputs{.loss = b.mseLoss(prediction, in["y"], {.reduction = reduction})};
  };
  return spec;
}

// One array as a .npy file (format version 1.0): a header that numpy.load parses, then
// the elements, little-endian and row-major as the weight holds them.
absl::Status writeNpy(const std::string& path, const tandem::Weight& w) {
  if (w.dtype != tandem::ir::DType::kF32)
    return absl::UnimplementedError(absl::StrCat(w.name, ": only f32 weights are written"));
  std::string header =
      absl::StrCat("{'descr': '<f4', 'fortran_order': False, 'shape': (",
                   absl::StrJoin(w.shape, ", "), w.shape.size() == 1 ? ",)" : ")", ", }");
  // Magic (6), version (2) and length (2), then the header padded to 64 bytes with spaces
  // and a newline.
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const char length[2] = {static_cast<char>(header.size() & 0xff),
                          static_cast<char>(header.size() >> 8)};
  out.write(length, 2);
  out << header << w.bytes;
  if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

int fail(const absl::Status& status) {
  std::cerr << "diabetes_regression: " << status << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int epochs = 10;
  std::string initial_weights, losses_file, dir;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 < argc && arg == "--epochs") {
      epochs = std::atoi(argv[++i]);
    } else if (i + 1 < argc && arg == "--initial-weights") {
      initial_weights = argv[++i];
    } else if (i + 1 < argc && arg == "--losses") {
      losses_file = argv[++i];
    } else if (dir.empty() && arg.rfind("--", 0) != 0) {
      dir = arg;
    } else {
      std::cerr << "usage: diabetes_regression [--epochs N] [--initial-weights DIR] "
                   "[--losses FILE] DATA_DIR (train.npz, test.npz: write_diabetes_npz.py)\n";
      return 2;
    }
  }
  if (dir.empty()) dir = ".";
  const tandem::TrainConfig config{.devices = "cpu:0,cpu:1",
                                   .batch = kBatch,
                                   .epochs = epochs,
                                   .seed = kSeed,
                                   .optimizer = "sgd",
                                   .lr = kLr,
                                   .momentum = kMomentum,
                                   .weight_decay = 0.0,
                                   .schedule = "constant"};
  // The data as `tandem train --data npz:train.npz --test-data npz:test.npz` reads it.
  const tandem::Data data =
      tandem::Data::fromSpec(absl::StrCat("npz:", dir, "/train.npz"), "npz:" + dir + "/test.npz");
  absl::StatusOr<tandem::Model> model = tandem::Model::create(diabetesMlp(), config, data);
  if (!model.ok()) return fail(model.status());

  // The parameters as drawn, before any step (a replay starts from them).
  if (!initial_weights.empty()) {
    absl::StatusOr<std::vector<tandem::Weight>> weights = model->weights();
    if (!weights.ok()) return fail(weights.status());
    std::error_code error;
    std::filesystem::create_directories(initial_weights, error);
    if (error)
      return fail(absl::InternalError(
          absl::StrCat("cannot make directory ", initial_weights, ": ", error.message())));
    for (const tandem::Weight& w : *weights)
      if (absl::Status s = writeNpy(absl::StrCat(initial_weights, "/", w.name, ".npy"), w); !s.ok())
        return fail(s);
  }

  absl::StatusOr<std::vector<tandem::EpochMetrics>> history =
      model->fit({.on_epoch = [](const tandem::EpochMetrics& e) {
        std::printf("epoch %d: train loss %.4f, test loss %.4f\n", e.epoch, e.train_loss,
                    e.test_loss);
        return true;
      }});
  if (!history.ok()) return fail(history.status());

  if (!losses_file.empty()) {
    std::ofstream out(losses_file);
    // The settings first, as key=value: what a replay must do alike.
    out << "# batch=" << kBatch << " lr=" << kLr << " momentum=" << kMomentum << " seed=" << kSeed
        << " devices=" << config.devices << "\n";
    char line[128];
    for (const tandem::EpochMetrics& e : *history) {
      std::snprintf(line, sizeof line, "%d %.17g %.17g\n", e.epoch, e.train_loss, e.test_loss);
      out << line;
    }
    if (!out.flush()) return fail(absl::InternalError("cannot write " + losses_file));
  }
  // The loss is in units of the target's variance (write_diabetes_npz.py standardizes it):
  // 1 is what predicting the mean scores.
  if (!history->empty())
    std::printf("test loss %.4f (1 = predicting the mean)\n", history->back().test_loss);
  return 0;
}
