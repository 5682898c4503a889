// Issue 42's regression bar: examples/diabetes_regression.cc (an MLP trained with mean
// squared error through the public API, data-parallel on two devices, on scikit-learn's
// diabetes data read as npz: specs) against a PyTorch replay of the same steps from the
// same initial weights (tests/api/diabetes_replay.py): every epoch's training and test loss
// within 1e-5 relative.

#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

constexpr char kSklearnData[] = "/usr/lib/python3/dist-packages/sklearn/datasets/data";
constexpr int kEpochs = 10;

std::string whyNoDiabetesData() {
  for (const char* file : {"diabetes_data_raw.csv.gz", "diabetes_target.csv.gz"}) {
    const std::string path = absl::StrCat(kSklearnData, "/", file);
    if (::access(path.c_str(), R_OK) != 0)
      return absl::StrCat(path, " is missing (Debian python3-sklearn)");
  }
  return "";
}

TEST(DiabetesRegression, MatchesAPyTorchReplayOfTheSameSteps) {
  TANDEM_NEED_INSTALLED(whyNoDiabetesData());
  TANDEM_NEED_INSTALLED(whyNoTorch());
  TempDir dir;
  const std::string data = dir.file("data"), weights = dir.file("initial"),
                    losses = dir.file("losses.txt");
  const CommandResult wrote = runProgram(
      "/usr/bin/python3", {sourcePath("examples/write_diabetes_npz.py"), kSklearnData, data});
  ASSERT_EQ(wrote.exit_code, 0) << wrote.err;

  const CommandResult trained = runProgram(
      TANDEM_DIABETES_EXAMPLE_PATH, {"--epochs", std::to_string(kEpochs), "--initial-weights",
                                     weights, "--losses", losses, data});
  ASSERT_EQ(trained.exit_code, 0) << trained.out << trained.err;

  // It learnt: the last epoch's losses are well below the first's and below 1, the loss of
  // predicting the mean (the target is standardized).
  std::istringstream lines(readFile(losses));
  std::string line;
  std::getline(lines, line);  // the settings
  std::vector<double> train_loss, test_loss;
  int epoch;
  double tr, te;
  while (lines >> epoch >> tr >> te) {
    EXPECT_EQ(epoch, static_cast<int>(train_loss.size()) + 1);
    train_loss.push_back(tr);
    test_loss.push_back(te);
  }
  ASSERT_EQ(train_loss.size(), static_cast<size_t>(kEpochs)) << readFile(losses);
  EXPECT_LT(train_loss.back(), 0.8 * train_loss.front());
  EXPECT_LT(test_loss.back(), 0.7);

  const CommandResult replay = runProgram(
      "/usr/bin/python3",
      {sourcePath("tests/api/diabetes_replay.py"), data, weights, losses, "--tolerance", "1e-5"});
  EXPECT_EQ(replay.exit_code, 0) << replay.out << replay.err;
  std::printf("%s", replay.out.c_str());  // the per-epoch table and the largest difference
}

}  // namespace
}  // namespace tandem::testing
