#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"

namespace tandem::backend {

class Backend;

/// A point in a stream's order that other streams of the same backend (or the host) can
/// wait for. CUDA's semantics: a wait waits for the work before the most recent record
/// that was enqueued before the wait; an event never recorded is complete.
class Event {
 public:
  virtual ~Event() = default;
  /// Blocks the calling host thread until the event completes.
  virtual void synchronize() = 0;
};

/// An ordered queue of work on one device: a CUDA stream, or a worker thread with a FIFO
/// for a CPU device. Work gets onto it through a Kernel's launch, a Communicator call or a
/// Device copy, each of which enqueues and returns; nothing here blocks on the work
/// except synchronize().
class Stream {
 public:
  virtual ~Stream() = default;
  /// The backend that made the stream; streams wait only on events of their own backend.
  virtual const Backend& backend() const = 0;
  virtual const std::string& name() const = 0;

  /// Marks the current end of the queue in `event` (an event of this stream's backend).
  virtual void record(Event& event) = 0;
  /// Work enqueued after this waits until `event`'s latest record completes; `event` may
  /// come from any stream of the same backend.
  virtual void wait(Event& event) = 0;
  virtual std::unique_ptr<Event> createEvent() = 0;

  /// Runs `fn` on a host thread once the work enqueued before it is done, in stream order.
  /// `fn` must not enqueue device work (CUDA forbids CUDA calls in cudaLaunchHostFunc);
  /// the runtime uses it only for bookkeeping: traces and test hooks.
  virtual void hostCallback(absl::AnyInvocable<void() &&> fn) = 0;

  /// Marks the current end of the queue in time: once the work enqueued before it is
  /// done, `done` gets that moment on the host's steady clock (nanoseconds since its
  /// epoch), on some host thread, at the latest when this stream's next synchronize()
  /// returns. Traces and profiles use it. The default is a host callback, right where
  /// the work runs on the host (CPU); a GPU stream times with its own events instead and
  /// reads them after the step, because a host callback per node would make the stream
  /// wait for a round trip through the host at every node.
  virtual void stamp(absl::AnyInvocable<void(int64_t ns) &&> done);

  /// Blocks the host until everything enqueued so far has run, and returns the first
  /// error any of it reported since the last synchronize (asynchronous errors of
  /// kernels and copies land here, as CUDA's do).
  virtual absl::Status synchronize() = 0;
};

/// Now on the host's steady clock, in nanoseconds: what Stream::stamp reports.
int64_t steadyNowNs();

}  // namespace tandem::backend
