// The public API (tandem/tandem.h): bad settings, models and data are errors naming the
// setting, the layer or the data at fault; a model of one's own learns from tensors the
// program holds; training through the API is `tandem train` (the same figures for the
// same settings); and a saved model loads and goes on as if never stopped.

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "frontend/zoo/zoo.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tandem/tandem.h"
#include "tests/api/api_test_data.h"
#include "tests/test_util.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

using ::testing::AllOf;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int kClasses = kQuadrantClasses;

Tensor smallMlp(Builder& b, Tensor x) {
  auto scope = b.scope("mlp");
  x = b.relu(b.linear(b.flatten(x), {.out_features = 16, .name = "fc1"}));
  return b.linear(x, {.out_features = kClasses, .name = "fc2"});
}

ModelSpec mlpSpec() { return classifierModel("quadrant_mlp", {1, 8, 8}, kClasses, smallMlp); }

Data quadrantData() { return Data::fromExamples(quadrantImages(256, 1), quadrantImages(64, 2)); }

TrainConfig smallRun() {
  return {.devices = "cpu:0,cpu:1", .batch = 32, .epochs = 3, .optimizer = "adamw", .lr = 0.01};
}

std::string createError(const ModelSpec& spec, const TrainConfig& o, const Data& d) {
  absl::StatusOr<Model> m = Model::create(spec, o, d);
  return m.ok() ? std::string("(no error)") : std::string(m.status().message());
}

TEST(TrainApi, BadOptionsNameTheOption) {
  struct Case {
    std::function<void(TrainConfig&)> change;
    std::string error;
  };
  const std::vector<Case> cases = {
      {[](TrainConfig& o) { o.devices = "tpu:0"; }, "TrainConfig::devices: "},
      {[](TrainConfig& o) { o.batch = 1; },
       "TrainConfig::batch: 1 is smaller than the device count 2"},
      {[](TrainConfig& o) { o.batch = 512; },
       "TrainConfig::batch: 512 is more than the 256 training images"},
      {[](TrainConfig& o) { o.epochs = 0; }, "TrainConfig::epochs: 0 trains nothing"},
      {[](TrainConfig& o) { o.optimizer = "rmsprop"; }, "TrainConfig::optimizer: "},
      {[](TrainConfig& o) { o.lr = -1; }, "TrainConfig::lr: -1 is out of range"},
      {[](TrainConfig& o) { o.momentum = 0.9; },
       "TrainConfig::momentum: not a setting of TrainConfig::optimizer adamw"},
      {[](TrainConfig& o) { o.schedule = "linear"; },
       "TrainConfig::schedule 'linear': unknown schedule"},
      {[](TrainConfig& o) { o.precision = "f16"; }, "TrainConfig::precision: 'f16'"},
      {[](TrainConfig& o) { o.split = "3,1,1"; }, "TrainConfig::split: 3 weights for 2 devices"},
      {[](TrainConfig& o) { o.checkpoint_every = 4; },
       "TrainConfig::checkpoint_every: goes with TrainConfig::checkpoint DIR"},
      {[](TrainConfig& o) { o.threads_per_device = 0; }, "TrainConfig::threads_per_device: 0"},
  };
  for (const Case& c : cases) {
    TrainConfig o = smallRun();
    c.change(o);
    EXPECT_THAT(createError(mlpSpec(), o, quadrantData()), StartsWith(c.error));
  }
}

TEST(TrainApi, BadModelsNameTheModel) {
  ModelSpec no_step = mlpSpec();
  no_step.step = nullptr;
  EXPECT_THAT(createError(no_step, smallRun(), quadrantData()),
              HasSubstr("model quadrant_mlp needs inputs and a step function"));
  // logits 3 wide for 4 classes
  ModelSpec wrong_classes =
      classifierModel("quadrant_mlp", {1, 8, 8}, kClasses, [](Builder& b, Tensor x) {
        return b.linear(b.flatten(x), {.out_features = 3, .name = "fc"});
      });
  EXPECT_THAT(createError(wrong_classes, smallRun(), quadrantData()),
              HasSubstr("model quadrant_mlp: forward returns f32[32,3] but the logits must be "
                        "[32,4]"));
}

TEST(TrainApi, BadDataNamesTheData) {
  Data short_images = quadrantData();
  short_images.train.images.pop_back();
  EXPECT_THAT(createError(mlpSpec(), smallRun(), short_images),
              StartsWith("Data::train.images: 16383 floats for 256 labels"));
  Data bad_label = quadrantData();
  bad_label.test.labels[3] = 7;
  EXPECT_THAT(createError(mlpSpec(), smallRun(), bad_label),
              StartsWith("Data::test.labels[3]: 7 is not a class of model quadrant_mlp (0 to 3)"));
  Data empty = quadrantData();
  empty.test = {};
  EXPECT_THAT(createError(mlpSpec(), smallRun(), empty),
              StartsWith("Data::test holds no images: nothing to evaluate"));
  Data too_many = quadrantData();
  too_many.limit_train = 1000;
  EXPECT_THAT(createError(mlpSpec(), smallRun(), too_many),
              Eq("Data::limit_train: 1000 is more than the 256 training images in Data::train"));
  EXPECT_THAT(createError(mlpSpec(), smallRun(), Data::fashionMnist("/nonexistent/fmnist")),
              HasSubstr("/nonexistent/fmnist"));
  // Fashion-MNIST's 28x28 images against a model of 8x8 ones: the file and both shapes.
  if (whyNoFashionMnist().empty()) {
    EXPECT_THAT(
        createError(mlpSpec(), smallRun(), Data::fashionMnist()),
        AllOf(HasSubstr("train-images-idx3-ubyte"), HasSubstr("1x28x28"), HasSubstr("1x8x8")));
  }
}

TEST(TrainApi, AModelOfItsOwnLearnsFromTensors) {
  int steps = 0, epochs = 0;
  absl::StatusOr<Model> m =
      train(mlpSpec(), smallRun(), quadrantData(),
            {.on_step =
                 [&](const StepMetrics& s) {
                   ++steps;
                   EXPECT_EQ(s.steps, 8);  // 256 images in batches of 32
                   return std::isfinite(s.loss);
                 },
             .on_epoch = [&](const EpochMetrics& e) { return ++epochs == e.epoch; }});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(steps, 3 * 8);
  EXPECT_EQ(epochs, 3);
  ASSERT_EQ(m->history().size(), 3u);
  EXPECT_GT(m->history().back().test_accuracy, 0.9) << "chance is 0.25";
  EXPECT_LT(m->history().back().train_loss, m->history().front().train_loss);
  // evaluate() is the last epoch's test figure; other examples get their own.
  absl::StatusOr<Metrics> test = m->evaluate();
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(test->accuracy, m->history().back().test_accuracy);
  absl::StatusOr<Metrics> other = m->evaluate(quadrantImages(40, 3));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->examples, 40);
  EXPECT_GT(other->accuracy, 0.9);
  EXPECT_THAT(m->trainStepText(), HasSubstr("adamw_update"));
  EXPECT_THAT(m->trainStepText(), HasSubstr("all_reduce("));
}

TEST(TrainApi, ACallbackStopsTraining) {
  absl::StatusOr<Model> m = Model::create(mlpSpec(), smallRun(), quadrantData());
  ASSERT_TRUE(m.ok()) << m.status();
  auto history = m->fit({.on_epoch = [](const EpochMetrics&) { return false; }});
  ASSERT_TRUE(history.ok()) << history.status();
  EXPECT_EQ(history->size(), 1u);
  EXPECT_EQ(m->nextEpoch(), 2);
  history = m->fit();  // goes on with epochs 2 and 3
  ASSERT_TRUE(history.ok()) << history.status();
  EXPECT_EQ(history->size(), 3u);
}

// Issue 41: a checkpoint written is an event (the library's onCheckpoint, the API's
// on_checkpoint): every checkpoint_every steps inside an epoch and after each epoch, each
// saying where a run loaded from it goes on.
TEST(TrainApi, CheckpointsWrittenAreEvents) {
  TempDir dir;
  TrainConfig config = smallRun();  // 256 examples at batch 32: 8 steps an epoch
  config.checkpoint = dir.file("ckpt");
  config.checkpoint_every = 3;
  std::vector<std::pair<int, int64_t>> written;
  absl::StatusOr<Model> m = Model::create(mlpSpec(), config, quadrantData());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(m->fit({.on_checkpoint = [&](const CheckpointWritten& c) {
                 EXPECT_EQ(c.dir, *config.checkpoint);
                 written.emplace_back(c.epoch, c.steps);
               }}).ok());
  EXPECT_EQ(written, (std::vector<std::pair<int, int64_t>>{
                         {1, 3}, {1, 6}, {2, 0}, {2, 3}, {2, 6}, {3, 0}, {3, 3}, {3, 6}, {4, 0}}));
}

// Three epochs straight, and one epoch saved, loaded into a new model on another device
// count and trained on: the same loss and accuracy figures (another device count adds in
// another order, so close rather than the same bits; on the same devices, the same bits).
TEST(TrainApi, SavedModelLoadsAndGoesOn) {
  TempDir dir;
  absl::StatusOr<Model> straight = train(mlpSpec(), smallRun(), quadrantData());
  ASSERT_TRUE(straight.ok()) << straight.status();

  TrainConfig first = smallRun();
  first.epochs = 1;
  absl::StatusOr<Model> one = train(mlpSpec(), first, quadrantData());
  ASSERT_TRUE(one.ok()) << one.status();
  const std::string ckpt = dir.file("ckpt");
  ASSERT_TRUE(one->save(ckpt).ok());
  EXPECT_THAT(std::string(one->save(ckpt).message()),
              HasSubstr("Model::save: "));  // no overwriting unless asked
  ASSERT_TRUE(one->save(ckpt, /*replace=*/true).ok());

  absl::StatusOr<Model> loaded = Model::load(mlpSpec(), smallRun(), quadrantData(), ckpt);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->nextEpoch(), 2);
  auto history = loaded->fit();
  ASSERT_TRUE(history.ok()) << history.status();
  ASSERT_EQ(history->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*history)[i].train_loss, straight->history()[i].train_loss) << "epoch " << i + 1;
    EXPECT_EQ((*history)[i].test_accuracy, straight->history()[i].test_accuracy);
  }

  TrainConfig other_lr = smallRun();
  other_lr.lr = 0.02;
  absl::StatusOr<Model> refused = Model::load(mlpSpec(), other_lr, quadrantData(), ckpt);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              AllOf(StartsWith("Model::load: "),
                    HasSubstr("was written with TrainConfig::lr 0.01; this run has "
                              "TrainConfig::lr 0.02")));
  EXPECT_THAT(
      std::string(
          Model::load(mlpSpec(), smallRun(), quadrantData(), dir.file("none")).status().message()),
      StartsWith("Model::load: "));
}

// Issue 41: the CLI and the API run one training library, which names a setting through
// the front end's SettingNames: the same mistake is the same sentence in both, each naming
// the setting in its own words (no text rewriting). `{lr}` in a case's message is the
// setting's name in each front end's words.
TEST(TrainApi, SettingErrorsNameTheSettingInEachFrontEndsWords) {
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  struct Case {
    std::vector<std::string> flags;                // to `tandem train --model lenet`
    std::function<void(TrainConfig&, Data&)> set;  // the same for the API
    std::string message;                           // with {setting} for each front end's words
  };
  const std::vector<Case> cases = {
      {{"--devices", "tpu:0"},
       [](TrainConfig& c, Data&) { c.devices = "tpu:0"; },
       "{devices}: unknown device 'tpu:0': the device kind must be cpu or cuda"},
      {{"--batch", "1"},
       [](TrainConfig& c, Data&) { c.batch = 1; },
       "{batch}: 1 is smaller than the device count 2; every device needs at least one example"},
      {{"--batch", "300", "--limit-train", "256"},
       [](TrainConfig& c, Data& d) { c.batch = 300, d.limit_train = 256; },
       "{batch}: 300 is more than the 256 training images left by {limit_train} (lower {batch})"},
      {{"--optimizer", "adamw", "--momentum", "0.9"},
       [](TrainConfig& c, Data&) { c.optimizer = "adamw", c.momentum = 0.9; },
       "{momentum}: not a setting of {optimizer} adamw (it takes {lr}, {beta1}, {beta2}, {eps}, "
       "{weight_decay})"},
      {{"--momentum", "1"},
       [](TrainConfig& c, Data&) { c.momentum = 1; },
       "{momentum}: 1 is out of range: must be >= 0 and < 1"},
      {{"--schedule", "linear"},
       [](TrainConfig& c, Data&) { c.schedule = "linear"; },
       "{schedule} 'linear': unknown schedule"},
      {{"--warmup", "100000", "--limit-train", "256", "--batch", "64"},
       [](TrainConfig& c, Data& d) { c.warmup = 100000, c.batch = 64, d.limit_train = 256; },
       "{warmup} 100000: the run has 4 steps, so the warmup would not end before the run does "
       "(the learning rate would reach 4e-05 of {lr} at most); give {warmup} below 4 or more "
       "{epochs}"},
      {{"--precision", "f16"},
       [](TrainConfig& c, Data&) { c.precision = "f16"; },
       "{precision}: 'f16' is not a dtype Tandem trains in: f32 or bf16"},
      {{"--allreduce-dtype", "f16"},
       [](TrainConfig& c, Data&) { c.allreduce_dtype = "f16"; },
       "{allreduce_dtype}: 'f16' is not a dtype Tandem trains in: f32 or bf16"},
      {{"--split", "3,1,1"},
       [](TrainConfig& c, Data&) { c.split = "3,1,1"; },
       "{split}: 3 weights for 2 devices"},
      {{"--checkpoint-every", "4"},
       [](TrainConfig& c, Data&) { c.checkpoint_every = 4; },
       "{checkpoint_every}: goes with {checkpoint} DIR (which is not given)"},
      {{"--limit-test", "20000"},
       [](TrainConfig&, Data& d) { d.limit_test = 20000; },
       "{limit_test}: 20000 is more than the 10000 test images in "
       "/usr/share/datasets/fashion-mnist"},
      {{"--resume", "/nonexistent/run"}, nullptr, "{resume}: "},
  };
  const std::map<std::string, std::pair<std::string, std::string>> words = {
      {"devices", {"--devices", "TrainConfig::devices"}},
      {"batch", {"--batch", "TrainConfig::batch"}},
      {"limit_train", {"--limit-train", "Data::limit_train"}},
      {"limit_test", {"--limit-test", "Data::limit_test"}},
      {"momentum", {"--momentum", "TrainConfig::momentum"}},
      {"optimizer", {"--optimizer", "TrainConfig::optimizer"}},
      {"lr", {"--lr", "TrainConfig::lr"}},
      {"beta1", {"--beta1", "TrainConfig::beta1"}},
      {"beta2", {"--beta2", "TrainConfig::beta2"}},
      {"eps", {"--eps", "TrainConfig::eps"}},
      {"weight_decay", {"--weight-decay", "TrainConfig::weight_decay"}},
      {"schedule", {"--schedule", "TrainConfig::schedule"}},
      {"warmup", {"--warmup", "TrainConfig::warmup"}},
      {"epochs", {"--epochs", "TrainConfig::epochs"}},
      {"precision", {"--precision", "TrainConfig::precision"}},
      {"allreduce_dtype", {"--allreduce-dtype", "TrainConfig::allreduce_dtype"}},
      {"split", {"--split", "TrainConfig::split"}},
      {"checkpoint_every", {"--checkpoint-every", "TrainConfig::checkpoint_every"}},
      {"checkpoint", {"--checkpoint", "TrainConfig::checkpoint"}},
      {"resume", {"--resume", "Model::load"}},
  };
  // The case's message with each {setting} in one front end's words.
  auto in = [&](std::string text, bool cli) {
    for (const auto& [key, names] : words)
      text = absl::StrReplaceAll(text,
                                 {{absl::StrCat("{", key, "}"), cli ? names.first : names.second}});
    return text;
  };
  absl::StatusOr<ModelSpec> lenet = zoo::modelByName("lenet");
  ASSERT_TRUE(lenet.ok());
  for (const Case& c : cases) {
    std::vector<std::string> args = {"train", "--model", "lenet", "--epochs", "1"};
    if (c.flags[0] != "--devices") args.insert(args.end(), {"--devices", "cpu:0,cpu:1"});
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    CommandResult cli = runTandem(args);
    EXPECT_EQ(cli.exit_code, 2) << absl::StrJoin(args, " ");  // a setting refused
    EXPECT_THAT(cli.err, StartsWith(absl::StrCat("tandem: ", in(c.message, true))))
        << absl::StrJoin(args, " ");
    TrainConfig config{.devices = "cpu:0,cpu:1", .epochs = 1};
    Data data = Data::fashionMnist();
    std::string api;
    if (c.set) {
      c.set(config, data);
      api = createError(*lenet, config, data);
    } else {
      api = std::string(Model::load(*lenet, config, data, "/nonexistent/run").status().message());
    }
    EXPECT_THAT(api, StartsWith(in(c.message, false))) << absl::StrJoin(args, " ");
    // Neither front end's words leak into the other's message.
    EXPECT_THAT(api, ::testing::Not(HasSubstr("--")));
    EXPECT_THAT(cli.err, ::testing::Not(HasSubstr("TrainConfig::")));
  }
}

// The CSV `tandem train --metrics` writes: per epoch, its fields by column name.
std::vector<std::map<std::string, std::string>> readMetrics(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> names = absl::StrSplit(line, ',');
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    const std::vector<std::string> fields = absl::StrSplit(line, ',');
    std::map<std::string, std::string>& row = rows.emplace_back();
    for (size_t i = 0; i < names.size() && i < fields.size(); ++i) row[names[i]] = fields[i];
  }
  return rows;
}

// The API is the CLI's path: the zoo's LeNet trained by both with the same settings gives
// the same figures (the CSV's six decimals).
TEST(TrainApi, TrainsAsTheCliDoes) {
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  TempDir dir;
  const std::string csv = dir.file("metrics.csv");
  CommandResult cli =
      runTandem({"train",  "--model",     "lenet", "--devices",     "cpu:0,cpu:1", "--batch",
                 "64",     "--epochs",    "2",     "--limit-train", "640",         "--limit-test",
                 "200",    "--optimizer", "adamw", "--lr",          "0.002",       "--schedule",
                 "cosine", "--metrics",   csv});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  absl::StatusOr<ModelSpec> lenet = zoo::modelByName("lenet");
  ASSERT_TRUE(lenet.ok());
  Data data = Data::fashionMnist();
  data.limit_train = 640;
  data.limit_test = 200;
  absl::StatusOr<Model> m = train(*lenet,
                                  {.devices = "cpu:0,cpu:1",
                                   .batch = 64,
                                   .epochs = 2,
                                   .optimizer = "adamw",
                                   .lr = 0.002,
                                   .schedule = "cosine"},
                                  data);
  ASSERT_TRUE(m.ok()) << m.status();
  const auto rows = readMetrics(csv);
  ASSERT_EQ(rows.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const EpochMetrics& e = m->history()[i];
    EXPECT_EQ(rows[i].at("train_loss"), absl::StrFormat("%.6f", e.train_loss)) << "epoch " << i + 1;
    EXPECT_EQ(rows[i].at("train_acc"), absl::StrFormat("%.6f", e.train_accuracy));
    EXPECT_EQ(rows[i].at("test_loss"), absl::StrFormat("%.6f", e.test_loss));
    EXPECT_EQ(rows[i].at("test_acc"), absl::StrFormat("%.6f", e.test_accuracy));
  }
}

}  // namespace
}  // namespace tandem::testing
