// The NCCL communicators' watchdog (backend/cuda/nccl_watch.h): each collective bracketed
// by a start and an end event on its comm stream, polled. Without a GPU: the watch over a
// fake probe (events that complete when the test says, a clock the test moves, an
// asynchronous error on demand). With GPUs: a rank stopped under mpirun, and the others
// stop within the timeout with the line (tests/cuda_training/mpi_gpu_test.cc).

#include "backend/cuda/nccl_watch.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace tandem::testing {
namespace {

namespace cu = backend::cuda;

struct FakeState {
  std::set<cudaEvent_t> done;
  std::map<cudaEvent_t, int> records;
  int next = 1;
  double now = 100;
  ncclResult_t error = ncclSuccess;
  std::vector<ncclComm_t> aborted;
  int destroyed = 0;
};

class FakeProbe final : public cu::NcclWatch::Probe {
 public:
  explicit FakeProbe(FakeState& s) : s_(s) {}
  absl::Status createEvent(int, cudaEvent_t* e) override {
    *e = reinterpret_cast<cudaEvent_t>(static_cast<intptr_t>(s_.next++));
    s_.done.insert(*e);  // an event never recorded is complete, as CUDA's
    return absl::OkStatus();
  }
  void destroyEvent(int, cudaEvent_t) override { ++s_.destroyed; }
  absl::Status record(int, cudaEvent_t e, cudaStream_t) override {
    s_.done.erase(e);  // pending until the test completes it
    ++s_.records[e];
    return absl::OkStatus();
  }
  bool done(int, cudaEvent_t e) override { return s_.done.count(e) > 0; }
  ncclResult_t asyncError(ncclComm_t) override { return s_.error; }
  std::string lastError(ncclComm_t) override { return "socket closed by peer"; }
  void abort(ncclComm_t c) override { s_.aborted.push_back(c); }
  double now() override { return s_.now; }

 private:
  FakeState& s_;
};

ncclComm_t comm(int i) { return reinterpret_cast<ncclComm_t>(static_cast<intptr_t>(0x100 + i)); }

cudaEvent_t event(int i) { return reinterpret_cast<cudaEvent_t>(static_cast<intptr_t>(i)); }

TEST(NcclWatch, ACollectiveWaitsFromWhenItCanStartUntilItEnds) {
  FakeState s;
  {
    cu::NcclWatch watch("NCCL group (cuda:0, cuda:0@1)", {{comm(0), 0, "cuda:0", 0}},
                        std::make_unique<FakeProbe>(s));
    auto c = watch.begin(0, "all_reduce %g.sum.0 (bucket 0)", nullptr);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE(watch.end(*c, nullptr).ok());
    // Start (event 1) not reached: the comm stream is still busy before it. Not a wait.
    EXPECT_EQ(watch.poll().seconds, 0);
    s.done.insert(event(1));  // the collective can start now
    s.now += 0.02;
    EXPECT_EQ(watch.poll().seconds, 0);  // first seen waiting at this poll
    s.now += 5;
    backend::AsyncWaits::State w = watch.poll();
    EXPECT_DOUBLE_EQ(w.seconds, 5);
    EXPECT_EQ(w.label.collective, "all_reduce %g.sum.0 (bucket 0)");
    EXPECT_EQ(w.label.device, "cuda:0");
    EXPECT_TRUE(w.error.empty());
    s.done.insert(event(2));  // it ended
    EXPECT_EQ(watch.poll().seconds, 0);

    // The next step uses the same events (no new ones per step), and its wait starts
    // afresh.
    auto again = watch.begin(0, "all_reduce %g.sum.0 (bucket 0)", nullptr);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *c);
    ASSERT_TRUE(watch.end(*again, nullptr).ok());
    EXPECT_EQ(s.records[event(1)], 2);
    EXPECT_EQ(s.records[event(2)], 2);
    s.done.insert(event(1));
    s.now += 100;
    EXPECT_EQ(watch.poll().seconds, 0);
    s.now += 1;
    EXPECT_DOUBLE_EQ(watch.poll().seconds, 1);
  }
  EXPECT_EQ(s.destroyed, 2);
}

TEST(NcclWatch, TheLongestWaitOfAnyRankIsReported) {
  FakeState s;
  cu::NcclWatch watch("NCCL group (cuda:0, cuda:1, cuda:0@1, cuda:1@1)",
                      {{comm(0), 0, "cuda:0", 0}, {comm(1), 1, "cuda:1", 1}},
                      std::make_unique<FakeProbe>(s));
  auto a = *watch.begin(0, "all_reduce %a (bucket 0)", nullptr);  // events 1, 2
  auto b = *watch.begin(1, "all_reduce %a (bucket 0)", nullptr);  // events 3, 4
  ASSERT_TRUE(watch.end(a, nullptr).ok());
  ASSERT_TRUE(watch.end(b, nullptr).ok());
  s.done.insert(event(3));
  watch.poll();
  s.now += 2;
  s.done.insert(event(1));
  watch.poll();
  s.now += 1;
  backend::AsyncWaits::State w = watch.poll();
  EXPECT_DOUBLE_EQ(w.seconds, 3);
  EXPECT_EQ(w.label.device, "cuda:1");
}

TEST(NcclWatch, AnAsynchronousErrorNamesTheRankTheCollectiveAndTheDevice) {
  FakeState s;
  cu::NcclWatch watch("NCCL group (cuda:0, cuda:0@1)", {{comm(0), 0, "cuda:0@1", 1}},
                      std::make_unique<FakeProbe>(s));
  auto c = *watch.begin(0, "all_reduce %fc.w.grad.sum.0 (bucket 3)", nullptr);
  ASSERT_TRUE(watch.end(c, nullptr).ok());
  s.done.insert(event(1));
  s.error = ncclInProgress;  // healthy: a nonblocking operation still going
  EXPECT_TRUE(watch.poll().error.empty());
  s.error = ncclRemoteError;
  const std::string e = watch.poll().error;
  for (const char* part : {"NCCL reported", "socket closed by peer", "on cuda:0@1", "rank 1 of",
                           "NCCL group (cuda:0, cuda:0@1)", "in all_reduce %fc.w.grad.sum.0"})
    EXPECT_TRUE(absl::StrContains(e, part)) << part << " in: " << e;
}

TEST(NcclWatch, AbortAbortsEveryCommunicatorOnce) {
  FakeState s;
  cu::NcclWatch watch("g", {{comm(0), 0, "cuda:0", 0}, {comm(1), 1, "cuda:1", 1}},
                      std::make_unique<FakeProbe>(s));
  watch.abort();
  watch.abort();
  EXPECT_EQ(s.aborted, (std::vector<ncclComm_t>{comm(0), comm(1)}));
  s.error = ncclSystemError;
  EXPECT_TRUE(watch.poll().error.empty());  // aborted: nothing more to say
}

}  // namespace
}  // namespace tandem::testing
