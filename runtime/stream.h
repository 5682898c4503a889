#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"

namespace tandem::runtime {

/// A point in a stream's order that other streams (or the host) can wait for. The
/// semantics are CUDA's: `wait` waits for the work before the most recent `record` that
/// was enqueued before the wait was enqueued; an event never recorded is complete.
class Event {
 public:
  virtual ~Event() = default;
  /// Blocks the calling host thread until the event completes.
  virtual void synchronize() = 0;
};

/// An ordered queue of work on one device: a CUDA stream, or a worker thread with a FIFO
/// queue for a CPU device. Enqueueing never blocks on the work itself.
class Stream {
 public:
  virtual ~Stream() = default;
  /// Appends host-visible work (a kernel launch, a collective) to the queue.
  virtual void enqueue(absl::AnyInvocable<void() &&> work) = 0;
  /// Marks the current end of the queue in `event`.
  virtual void record(Event& event) = 0;
  /// Work enqueued after this waits until `event`'s latest record completes.
  virtual void wait(Event& event) = 0;
  /// Blocks the host until everything enqueued so far has run.
  virtual void synchronize() = 0;
  virtual std::unique_ptr<Event> createEvent() = 0;
  virtual const std::string& name() const = 0;
};

}  // namespace tandem::runtime
