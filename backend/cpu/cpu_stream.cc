#include "backend/cpu/cpu_stream.h"

#include <omp.h>

#include "absl/strings/str_cat.h"
#include "backend/cpu/cpu_backend.h"

namespace tandem::backend::cpu {
namespace {

// A CPU event counts records: `recorded` is bumped when a record is enqueued, `completed`
// when the worker reaches it. A wait remembers the count at enqueue time (CUDA semantics).
class CpuEvent final : public Event {
 public:
  uint64_t bumpRecorded() {
    std::lock_guard<std::mutex> l(mu_);
    return ++recorded_;
  }
  uint64_t recorded() {
    std::lock_guard<std::mutex> l(mu_);
    return recorded_;
  }
  void complete(uint64_t generation) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (generation > completed_) completed_ = generation;
    }
    cv_.notify_all();
  }
  void waitFor(uint64_t generation) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return completed_ >= generation; });
  }
  void synchronize() override { waitFor(recorded()); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t recorded_ = 0, completed_ = 0;
};

}  // namespace

CpuStream::CpuStream(std::string name, int threads)
    : name_(std::move(name)), worker_([this, threads] { loop(threads); }) {}

CpuStream::~CpuStream() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

const Backend& CpuStream::backend() const { return cpuBackend(); }

absl::StatusOr<CpuStream*> CpuStream::of(Stream& stream) {
  // Streams of one backend are of one class: the backend tag makes the cast safe.
  if (&stream.backend() != &cpuBackend())
    return absl::InternalError(
        absl::StrCat("stream ", stream.name(), " is not a CPU stream: CPU work cannot go on it"));
  return static_cast<CpuStream*>(&stream);
}

absl::Status CpuStream::enqueueOn(Stream& stream, absl::AnyInvocable<absl::Status() &&> work) {
  absl::StatusOr<CpuStream*> cpu = of(stream);
  if (!cpu.ok()) return cpu.status();
  (*cpu)->enqueue(std::move(work));
  return absl::OkStatus();
}

void CpuStream::loop(int threads) {
  // OpenMP's thread count is per calling thread: this bounds every oneDNN primitive this
  // worker runs without touching other devices' workers.
  omp_set_num_threads(threads);
  for (;;) {
    absl::AnyInvocable<absl::Status() &&> work;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    absl::Status s = std::move(work)();
    {
      std::lock_guard<std::mutex> l(mu_);
      if (error_.ok() && !s.ok()) error_ = std::move(s);
      ++done_;
    }
    idle_.notify_all();
  }
}

void CpuStream::enqueue(absl::AnyInvocable<absl::Status() &&> work) {
  {
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_back(std::move(work));
    ++enqueued_;
  }
  cv_.notify_one();
}

void CpuStream::hostCallback(absl::AnyInvocable<void() &&> fn) {
  enqueue([fn = std::move(fn)]() mutable {
    std::move(fn)();
    return absl::OkStatus();
  });
}

void CpuStream::record(Event& event) {
  auto& e = static_cast<CpuEvent&>(event);
  uint64_t g = e.bumpRecorded();
  enqueue([&e, g] {
    e.complete(g);
    return absl::OkStatus();
  });
}

void CpuStream::wait(Event& event) {
  auto& e = static_cast<CpuEvent&>(event);
  uint64_t g = e.recorded();
  if (g == 0) return;
  enqueue([&e, g] {
    e.waitFor(g);
    return absl::OkStatus();
  });
}

absl::Status CpuStream::synchronize() {
  std::unique_lock<std::mutex> l(mu_);
  uint64_t target = enqueued_;
  idle_.wait(l, [&] { return done_ >= target; });
  return std::exchange(error_, absl::OkStatus());
}

std::unique_ptr<Event> CpuStream::createEvent() { return std::make_unique<CpuEvent>(); }

}  // namespace tandem::backend::cpu
