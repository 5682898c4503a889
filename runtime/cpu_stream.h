#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "runtime/stream.h"

namespace tandem::runtime {

/// A CPU stream: one worker thread running a FIFO queue. `threads` is the number of
/// OpenMP threads the worker's oneDNN primitives may use (one core per device by default,
/// so N devices on N cores are a fair picture of N GPUs).
class CpuStream final : public Stream {
 public:
  CpuStream(std::string name, int threads);
  ~CpuStream() override;

  void enqueue(absl::AnyInvocable<void() &&> work) override;
  void record(Event& event) override;
  void wait(Event& event) override;
  void synchronize() override;
  std::unique_ptr<Event> createEvent() override;
  const std::string& name() const override { return name_; }

 private:
  void loop(int threads);

  std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<absl::AnyInvocable<void() &&>> queue_;
  uint64_t enqueued_ = 0, done_ = 0;
  bool stop_ = false;
  std::condition_variable idle_;
  std::thread worker_;
};

}  // namespace tandem::runtime
