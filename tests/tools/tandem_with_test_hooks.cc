// The tandem CLI with the tests' hooks (tools/tandem/train_hooks.h): the shipped binary
// reads no test-only setting, so the tests that need a signal at a known step or a digest
// of the variables run this build instead, which reads them from its environment (mpirun
// passes an environment on to its ranks, and gives one rank its own with -x):
//
//   TANDEM_TEST_SIGNAL_AFTER=EPOCH:STEP:SIGNAL  raise SIGNAL after that step, after any
//       checkpoint the step writes. SIGKILL and SIGSTOP stand for a crash or a hang, which
//       strike mid-step: they come at the next step's first kernel, so that in a
//       multi-process run the other ranks wait in that step's collectives.
//   TANDEM_TEST_DIGEST=1  rank 0 prints "tandem: variables digest H" at the end: FNV-1a over
//       the bytes of every variable on its first device.
//   TANDEM_TEST_DEVICE_SPEEDS=A,B,...  --split auto sees device d busy (its weight) ms per
//       image instead of what the trace measured, so that its re-plans are deterministic.
//   TANDEM_TEST_CHILD_DEADLINE_S=S  a child process (gnuplot) may run S seconds, not 60.

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "backend/processes.h"
#include "ir/fnv1a.h"
#include "ir/status_macros.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/train_hooks.h"

namespace tandem::tools {
namespace {

struct SignalPoint {
  int epoch = 0;
  int64_t step = 0;
  int signal = 0;
};

std::optional<SignalPoint> signalPoint() {
  const char* text = std::getenv("TANDEM_TEST_SIGNAL_AFTER");
  int epoch = 0, signal = 0;
  long long step = 0;
  if (text == nullptr || std::sscanf(text, "%d:%lld:%d", &epoch, &step, &signal) != 3)
    return std::nullopt;
  return SignalPoint{epoch, static_cast<int64_t>(step), signal};
}

absl::StatusOr<std::string> variablesDigest(const runtime::Executor& ex) {
  const ir::Module& m = ex.module();
  size_t device = 0;
  while (m.devices()[device].rank != backend::Processes::current().rank()) ++device;
  uint64_t h = ir::kFnv1aOffset;
  for (const ir::Var& v : m.vars()) {
    ASSIGN_OR_RETURN(runtime::HostTensor t, ex.readVariable(v.name, device));
    h = ir::fnv1a(absl::string_view(reinterpret_cast<const char*>(t.buffer.data()),
                                    static_cast<size_t>(t.type.bytes())),
                  h);
  }
  return absl::StrFormat("%016x", h);
}

class EnvironmentHooks final : public TrainHooks {
 public:
  void afterStep(int epoch, int64_t step, runtime::Executor& executor) override {
    if (!point_ || point_->epoch != epoch || point_->step != step) return;
    if (point_->signal == SIGKILL || point_->signal == SIGSTOP)
      executor.setBeforeNodeHook(
          [sig = point_->signal](const ir::Node&, size_t) { std::raise(sig); });
    else
      std::raise(point_->signal);
  }
  absl::Status atEnd(const runtime::Executor& executor) override {
    if (std::getenv("TANDEM_TEST_DIGEST") == nullptr || backend::Processes::current().rank() != 0)
      return absl::OkStatus();
    ASSIGN_OR_RETURN(std::string digest, variablesDigest(executor));
    std::fprintf(stderr, "tandem: variables digest %s\n", digest.c_str());
    return absl::OkStatus();
  }
  void adjustBalancer(runtime::SplitBalancer::Options& o) override {
    const char* text = std::getenv("TANDEM_TEST_DEVICE_SPEEDS");
    if (text == nullptr) return;
    std::vector<double> ms_per_image;
    for (absl::string_view part : absl::StrSplit(text, ',')) {
      double v = 0;
      if (!absl::SimpleAtod(part, &v)) return;
      ms_per_image.push_back(v);
    }
    o.busy_for_test = [ms_per_image](size_t device, int64_t rows) {
      return device < ms_per_image.size() ? 1e6 * ms_per_image[device] * static_cast<double>(rows)
                                          : 0.0;
    };
  }
  std::optional<double> childDeadlineSeconds() override {
    double seconds = 0;
    const char* text = std::getenv("TANDEM_TEST_CHILD_DEADLINE_S");
    if (text == nullptr || !absl::SimpleAtod(text, &seconds)) return std::nullopt;
    return seconds;
  }

 private:
  std::optional<SignalPoint> point_ = signalPoint();
};

}  // namespace
}  // namespace tandem::tools

int main(int argc, char** argv) {
  static tandem::tools::EnvironmentHooks hooks;
  tandem::tools::setTrainHooks(&hooks);
  return tandem::tools::runCommandLine(argc, argv);
}
