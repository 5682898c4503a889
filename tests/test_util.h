#pragma once

// Helpers shared by the test programs: files, golden comparison, building and
// transforming the zoo models, and running the tandem CLI.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.h"
#include "ir/optimizer_configs.h"
#include "tests/device_kinds.h"

namespace tandem::testing {

/// Absolute path of a file in the source tree ("tests/golden/x.tir").
std::string sourcePath(const std::string& relative);
std::string readFile(const std::string& path);
void writeFile(const std::string& path, const std::string& text);

/// Compares `actual` with the golden file (path relative to the source tree) and returns
/// "" when equal, or a diff-like message. With TANDEM_UPDATE_GOLDEN=1 in the environment
/// it rewrites the golden file instead (and returns "").
std::string compareWithGolden(const std::string& actual, const std::string& golden_relative);

/// Builds a zoo model ("lenet", "resnet18", ...) at a global batch; aborts the test on error.
std::unique_ptr<ir::Module> buildZooModel(const std::string& name, int64_t batch);

/// Optimizer `name` (sgd, adamw) with each of `values` (attribute, value) that it has set:
/// each optimizer takes its own hyper-parameters. Aborts the test on an unknown name.
ir::OptimizerConfig optimizerWith(const std::string& name,
                                  const std::vector<std::pair<std::string, double>>& values);

/// Runs a pipeline text over the module (verifier on).
absl::Status runPipeline(ir::Module& m, const std::string& pipeline);

/// Canonical text (no locations) of a module.
std::string canonical(const ir::Module& m);

/// Result of running a program.
struct CommandResult {
  int exit_code = -1;
  std::string out;  // standard output
  std::string err;  // standard error
};
/// Runs the tandem CLI with the given arguments (no shell), optionally feeding stdin.
CommandResult runTandem(const std::vector<std::string>& args, const std::string& stdin_text = "");
/// Runs the CLI built with the tests' hooks (tests/tools/tandem_with_test_hooks.cc), which
/// reads the TANDEM_TEST_* settings listed there: the shipped binary reads none.
CommandResult runHookedTandem(const std::vector<std::string>& args);
/// Its path, for mpirun's command lines.
std::string hookedCliPath();
/// Runs any program by path.
CommandResult runProgram(const std::string& path, const std::vector<std::string>& args,
                         const std::string& stdin_text = "");

/// Whether the tests run where scripts/setup has installed everything they use
/// (TANDEM_TESTS_AFTER_SETUP=1, which scripts/test and so CI set): there a missing data
/// set or tool is a failure of the machine, not a reason to skip.
bool setupInstalledEverything();

/// The Fashion-MNIST files the CLI reads by default (Debian's dataset-fashion-mnist).
inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";
/// "" when they are there, else why a test that trains on them cannot.
std::string whyNoFashionMnist();
/// Why Debian's /usr/bin/python3 cannot run a PyTorch replay (numpy and torch, 1.13), or "".
std::string whyNoTorch();
/// "" when mpirun is on PATH, else why multi-process runs cannot be tested.
std::string whyNoMpirun();
/// "" when Graphviz's dot is at /usr/bin/dot, else why DOT output cannot be rendered.
std::string whyNoGraphviz();
/// "" when Chromium is at /usr/bin/chromium, else why `tandem explore`'s pages cannot be
/// opened in a browser.
std::string whyNoChromium();

/// For a test that needs what scripts/setup installs (the Fashion-MNIST files, mpirun,
/// graphviz, chromium): `why_missing` is "" when it is there. Missing, the test is skipped saying
/// why, or fails where setup ran (setupInstalledEverything): a green run then means it ran.
#define TANDEM_NEED_INSTALLED(why_missing)                                   \
  if (const std::string tandem_why = (why_missing); !tandem_why.empty()) {   \
    if (::tandem::testing::setupInstalledEverything())                       \
      GTEST_FAIL() << tandem_why                                             \
                   << " (scripts/setup installs it; under scripts/test its " \
                      "absence is a failure, not a skip)";                   \
    else                                                                     \
      GTEST_SKIP() << tandem_why;                                            \
  }

/// "" when this CPU runs the bf16 kernels, else why not (for GTEST_SKIP: the bf16 tests
/// need AVX512_BF16 or AMX, which CI machines of another kind may lack).
std::string whyNoBf16();

/// Skips the current test, saying why, on a CPU without bf16 instructions.
#define TANDEM_SKIP_WITHOUT_BF16()                                        \
  if (std::string why = ::tandem::testing::whyNoBf16(); !why.empty()) \
  GTEST_SKIP() << why

}  // namespace tandem::testing
