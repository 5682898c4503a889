// The settings both front ends get as text, parsed into the training library's types
// (train/settings_text.h): what each word means, and each mistake named in the words the
// front end hands in (here the library's own keys).

#include "train/settings_text.h"

#include <map>
#include <string>
#include <vector>

#include "frontend/zoo/zoo.h"
#include "gtest/gtest.h"
#include "ir/optimizer_configs.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

using training::Split;
using training::WrittenNumber;

const training::SettingNames& keys() { return training::settingKeys(); }

std::string errorOf(const absl::Status& s) { return std::string(s.message()); }

// Unset, the optimizer is the model's with the model's values; a value given changes that
// one value only.
TEST(ChooseOptimizer, KeepsTheModelsOwnValues) {
  const ir::OptimizerConfig lenet = zoo::modelByName("lenet")->defaults.optimizer;
  ASSERT_EQ(lenet, ir::OptimizerConfig(ir::SgdConfig{.lr = 0.1, .momentum = 0.9}));
  auto chosen = training::chooseOptimizer(lenet, std::nullopt, {{"lr", {0.05, "0.05"}}}, keys());
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(*chosen, ir::OptimizerConfig(ir::SgdConfig{.lr = 0.05, .momentum = 0.9}));
  // Naming the model's own optimizer keeps its values too.
  chosen = training::chooseOptimizer(lenet, "sgd", {}, keys());
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(*chosen, lenet);
}

// Another optimizer starts from its op's presets (PyTorch's), not from the model's values.
TEST(ChooseOptimizer, AnotherOptimizerStartsFromItsPresets) {
  const ir::OptimizerConfig lenet = zoo::modelByName("lenet")->defaults.optimizer;
  auto chosen = training::chooseOptimizer(lenet, "adamw", {{"beta2", {0.99, "0.99"}}}, keys());
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(*chosen, ir::OptimizerConfig(ir::AdamwConfig{.beta2 = 0.99}));
  const ir::OptimizerConfig vit = zoo::modelByName("vit")->defaults.optimizer;
  chosen = training::chooseOptimizer(vit, "sgd", {}, keys());
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(*chosen, ir::OptimizerConfig(ir::SgdConfig{}));
}

TEST(ChooseOptimizer, NamesWhatIsWrongInTheFrontEndsWords) {
  const ir::OptimizerConfig sgd = ir::SgdConfig{};
  EXPECT_EQ(errorOf(training::chooseOptimizer(sgd, "adam", {}, keys()).status()),
            "optimizer: 'adam' is no optimizer (adamw, sgd)");
  EXPECT_EQ(
      errorOf(
          training::chooseOptimizer(sgd, std::nullopt, {{"beta1", {0.8, "0.8"}}}, keys()).status()),
      "beta1: not a setting of optimizer sgd (it takes lr, momentum, weight_decay)");
  // A value out of range is quoted as it was written ("1e39", not "1e+39").
  EXPECT_EQ(
      errorOf(
          training::chooseOptimizer(sgd, std::nullopt, {{"lr", {1e39, "1e39"}}}, keys()).status()),
      "lr: 1e39 rounds to infinity in f32 (the update's arithmetic)");
  EXPECT_EQ(
      errorOf(training::chooseOptimizer(sgd, "sgd", {{"momentum", {1, "1.0"}}}, keys()).status()),
      "momentum: 1.0 is out of range: must be >= 0 and < 1");
  // A config built in code is checked as a whole, its values written exactly.
  EXPECT_EQ(errorOf(training::checkOptimizerValues(ir::AdamwConfig{.beta1 = 1}, keys())),
            "beta1: 1 is out of range: must be >= 0 and < 1");
  EXPECT_TRUE(training::checkOptimizerValues(ir::AdamwConfig{}, keys()).ok());
}

TEST(ParseSplitSetting, ReadsEvenWeightsAndAuto) {
  auto split = training::parseSplitSetting("3,1", /*for_training=*/true, keys());
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->kind, Split::Kind::kWeights);
  EXPECT_EQ(split->weights, (std::vector<double>{3, 1}));
  EXPECT_EQ(split->text(), "3,1");
  for (const char* text : {"even", "auto", "0.25,0.75"}) {
    auto parsed = training::parseSplitSetting(text, /*for_training=*/true, keys());
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status();
    EXPECT_EQ(parsed->text(), text);
  }
  // auto outside training is refused once, where the settings are resolved.
  auto measured = training::parseSplitSetting("auto", /*for_training=*/false, keys());
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_EQ(errorOf(training::resolveModel(*zoo::modelByName("lenet"), {.split = *measured},
                                           /*for_training=*/false, keys())
                        .status()),
            "split: auto measures the devices while training; dump takes even or weights such "
            "as 3,1");
  EXPECT_EQ(errorOf(training::parseSplitSetting("3,-1", /*for_training=*/true, keys()).status()),
            "split: '3,-1' is not even, auto, or positive weights such as 3,1");
}

TEST(ParseSettings, DevicesGroupUpdatesAndDtypes) {
  auto devices = training::parseDevicesSetting("2", keys());
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ(ir::toString((*devices)[1]), "cpu:1");
  EXPECT_EQ(errorOf(training::parseDevicesSetting("", keys()).status()).rfind("devices: ", 0), 0u);
  EXPECT_EQ(*training::parseGroupUpdatesSetting("auto", keys()), std::nullopt);
  EXPECT_EQ(*training::parseGroupUpdatesSetting("on", keys()), std::optional<bool>(true));
  EXPECT_EQ(*training::parseGroupUpdatesSetting("off", keys()), std::optional<bool>(false));
  EXPECT_EQ(errorOf(training::parseGroupUpdatesSetting("yes", keys()).status()),
            "group_updates: 'yes' is not auto, on or off");
  EXPECT_EQ(*training::parseFloatTypeSetting(training::Setting::kPrecision, "bf16", keys()),
            ir::FloatType::kBf16);
  EXPECT_EQ(
      errorOf(training::parseFloatTypeSetting(training::Setting::kAllreduceDtype, "fp8", keys())
                  .status()),
      "allreduce_dtype: 'fp8' is not a dtype Tandem trains in: f32 or bf16");
}

}  // namespace
}  // namespace tandem::testing
