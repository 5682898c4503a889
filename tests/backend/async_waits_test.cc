// The watchdog bounds waits that no host thread blocks in (backend/processes.h,
// AsyncWaits): a GPU collective waiting on the GPU for a rank that died. A source that
// waits longer than the timeout, or that reports an asynchronous error, is aborted and
// the process stops with one line naming the rank, the collective and the device, exit 4,
// as a blocking MPI wait does. Run in a child process each (the watchdog ends it).

#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "backend/processes.h"
#include "gtest/gtest.h"

namespace tandem::testing {
namespace {

/// A source that reports one wait growing from the moment it is watched, or an error.
class StuckCollective final : public backend::AsyncWaits {
 public:
  explicit StuckCollective(std::string error = "") : error_(std::move(error)) {}
  State poll() override {
    State s;
    s.label = {"all_reduce %g.sum.0 (bucket 2)", "cuda:0@1"};
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count();
    s.error = error_;
    return s;
  }
  void abort() override {
    const char line[] = "source aborted\n";
    (void)!::write(STDERR_FILENO, line, sizeof line - 1);
  }

 private:
  std::string error_;
  std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
};

void watchForever(backend::AsyncWaits& waits, double timeout) {
  backend::Processes& p = backend::Processes::current();
  p.setTimeout(timeout);
  p.watchAsync(&waits);
  std::this_thread::sleep_for(std::chrono::seconds(30));  // the watchdog ends it first
  std::_Exit(0);
}

TEST(AsyncWaits, AWaitPastTheTimeoutAbortsTheSourceAndStopsTheRun) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        StuckCollective stuck;
        watchForever(stuck, 0.3);
      },
      ::testing::ExitedWithCode(backend::kExitCollectiveTimeout),
      "source aborted\ntandem: waited 0\\.[3-9] s \\(--collective-timeout 0\\.3\\) in all_reduce "
      "%g\\.sum\\.0 \\(bucket 2\\) on cuda:0@1: a rank died or stalls \\(NCCL does not say "
      "which\\); stopping every rank");
}

TEST(AsyncWaits, AnAsynchronousErrorStopsTheRunAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        StuckCollective failed(
            "NCCL reported remote process exited or there was a network error on cuda:0@1 "
            "(rank 1 of NCCL group (cuda:0, cuda:0@1)) in all_reduce %g.sum.0 (bucket 2)");
        watchForever(failed, 60);
      },
      ::testing::ExitedWithCode(backend::kExitCollectiveTimeout),
      "source aborted\ntandem: NCCL reported remote process exited .* on cuda:0@1 \\(rank 1 of "
      "NCCL group \\(cuda:0, cuda:0@1\\)\\) in all_reduce %g\\.sum\\.0 \\(bucket 2\\); stopping "
      "every rank");
}

// Without a timeout (0) a wait is never cut short; an unwatched source is never polled.
TEST(AsyncWaits, NoTimeoutAndUnwatchedSourcesLeaveTheRunAlone) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        backend::Processes& p = backend::Processes::current();
        StuckCollective stuck;
        p.setTimeout(0);
        p.watchAsync(&stuck);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        p.unwatchAsync(&stuck);
        p.setTimeout(0.1);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        std::_Exit(7);
      },
      ::testing::ExitedWithCode(7), "");
}

}  // namespace
}  // namespace tandem::testing
