#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backend/stream.h"

namespace tandem::backend::cpu {

/// A CPU device's stream: one worker thread running a FIFO queue. `threads` is the number
/// of OpenMP threads the worker's oneDNN primitives may use (one core per device by
/// default, so N devices on N cores are a fair picture of N GPUs).
class CpuStream final : public Stream {
 public:
  CpuStream(std::string name, int threads);
  ~CpuStream() override;

  const Backend& backend() const override;
  const std::string& name() const override { return name_; }
  void record(Event& event) override;
  void wait(Event& event) override;
  std::unique_ptr<Event> createEvent() override;
  void hostCallback(absl::AnyInvocable<void() &&> fn) override;
  absl::Status synchronize() override;

  /// Appends work for the worker thread: what a CPU kernel's launch, a local collective
  /// or a copy enqueues. The first error it returns is kept for synchronize(); later work
  /// still runs (a collective must meet its peers even after a kernel failed).
  void enqueue(absl::AnyInvocable<absl::Status() &&> work);

  /// The CPU stream behind `stream`, or an error when it belongs to another backend.
  static absl::StatusOr<CpuStream*> of(Stream& stream);

  /// Enqueues `work` on `stream` if it is a CPU stream: how every CPU kernel, copy and
  /// local collective reaches its stream.
  static absl::Status enqueueOn(Stream& stream, absl::AnyInvocable<absl::Status() &&> work);

 private:
  void loop(int threads);

  std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<absl::AnyInvocable<absl::Status() &&>> queue_;
  uint64_t enqueued_ = 0, done_ = 0;
  bool stop_ = false;
  absl::Status error_;
  std::condition_variable idle_;
  std::thread worker_;
};

}  // namespace tandem::backend::cpu
