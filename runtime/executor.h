#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backend/backend.h"
#include "backend/tensor_view.h"
#include "ir/ir.h"
#include "runtime/host_tensor.h"

namespace tandem::runtime {

struct LoadedModule;

/// Plain runs of a graph before its step is recorded (ExecutorOptions::record_steps): the
/// first runs find convolution algorithms, size workspaces and set up communicators,
/// none of which may happen while a CUDA graph records.
inline constexpr int kStepsBeforeRecording = 2;

struct ExecutorOptions {
  /// Seed of `initialize` (parameter initial values).
  uint64_t seed = 0;
  /// The backends' settings by name ("threads_per_device": 4, backend/settings.h): each
  /// backend reads those it registered into its own options; a setting not given is the
  /// backend's default. create() refuses an unknown name or an ill-typed value, naming it.
  backend::Settings backend_options;
  /// Record when each node starts and ends on which stream (see takeTrace()).
  bool trace = false;
  /// Record each graph's step once per input slot, after kStepsBeforeRecording plain
  /// runs, and replay it (CUDA graphs) where the devices' backend can; never while tracing.
  /// Where recording fails or the backend declines (on any rank: the ranks agree), every
  /// later step runs plainly after one warning.
  bool record_steps = true;
  /// Copy each batch's slices in on the prefetch streams of the devices that have one
  /// (Device::prefetchStream), so that the copy of the next batch overlaps the step in
  /// flight; false: every split copies from host staging within its step, as on a CPU.
  bool prefetch_inputs = true;
  /// Where the executor's warnings go (one line each, without "tandem: warning: "); unset:
  /// standard error, as "tandem: [rank R: ]warning: LINE".
  std::function<void(const std::string&)> warn;
};

/// One node's run on one stream, for tests and profiles.
struct TraceEntry {
  const ir::Node* node;
  size_t device;  // index into Module::devices()
  bool comm;      // ran on the comm stream
  int64_t start_ns, end_ns;
  /// A split's copy of the next batch's slice in, on the device's prefetch stream (comm
  /// is false): input pipeline work, issued while the step before runs, not the step's.
  bool prefetch = false;
};

/// Runs a compiled module (after the default pipeline: replicated, collectives inserted,
/// scheduled, memory planned) on the backends of its devices. Loading (loader.h) makes per
/// device its streams and memory, the kernels of every node, the arenas of every graph and
/// the variables' storage. A step is enqueued whole: per share of a node, the waits on
/// events of other streams, the launch, and the event other streams wait for; so a
/// bucket's all_reduce starts as soon as its last gradient is computed while the rest of
/// backward still runs. The host then waits once, for the step's end. The executor names
/// no device kind: everything goes through backend::Device and backend::Communicator.
///
/// The input pipeline: a graph's inputs go through one of its two input slots (host
/// staging, and on devices with a prefetch stream a buffer per split slice). prefetch()
/// fills the slot the last step did not read; launch() runs a step on it; wait() waits.
/// Handing the next batch over between launch() and wait() overlaps its copies with the
/// step in flight; run() is the three in a row.
class Executor {
 public:
  /// Takes the module. Errors name the device kind this build lacks, the graph whose
  /// memory plan is missing or stale, or the node whose kernel could not be made.
  static absl::StatusOr<std::unique_ptr<Executor>> create(std::unique_ptr<ir::Module> module,
                                                          ExecutorOptions options = {});
  ~Executor();

  const ir::Module& module() const;

  /// Runs graph `name` once. `inputs` are the graph's inputs in order (host memory, copied
  /// in before the step); returns the graph's outputs copied to the host.
  absl::StatusOr<std::vector<HostTensor>> run(absl::string_view name,
                                              absl::Span<const backend::TensorView> inputs);

  /// Hands `inputs` (host memory, free to reuse once this returns) to graph `name`'s next
  /// launch: copies them into the staging of its free input slot and, on each device with
  /// a prefetch stream, enqueues there the copy of the device's slice into its buffer of
  /// that slot. Inputs handed over before and not launched yet are replaced. Allowed while
  /// a step is in flight (that is the point: the copies overlap it).
  absl::Status prefetch(absl::string_view name, absl::Span<const backend::TensorView> inputs);
  /// Whether inputs handed over by prefetch wait for graph `name`'s next launch.
  bool prefetched(absl::string_view name) const;
  /// Enqueues one step of graph `name` on the inputs handed over last (a graph without
  /// inputs needs none) and returns without waiting for it. One step at a time: the step
  /// in flight must be waited for first. On an error the streams are drained and nothing
  /// is left in flight.
  absl::Status launch(absl::string_view name);
  /// Waits for the step in flight, and for copies handed over meanwhile (the host's one
  /// wait per step), and returns its outputs copied to the host.
  absl::StatusOr<std::vector<HostTensor>> wait();

  /// A copy of a variable's replica on device `device` (an index into Module::devices()).
  absl::StatusOr<HostTensor> readVariable(absl::string_view name, size_t device) const;
  /// Overwrites a variable's replica on device `device` (carrying state into a recompiled
  /// module); the type must be the variable's.
  absl::Status writeVariable(absl::string_view name, size_t device, const HostTensor& value);

  /// Bytes of graph `name`'s arena on each device.
  std::vector<int64_t> arenaBytes(absl::string_view name) const;

  /// Called on the stream's host thread as each node's share starts, inside its traced
  /// time (tests use it to hold a stream at a chosen point, or to slow a device down). Set
  /// before a run.
  void setBeforeNodeHook(std::function<void(const ir::Node&, size_t device)> hook);
  /// The trace of every step since the last call (ExecutorOptions::trace).
  std::vector<TraceEntry> takeTrace();
  /// Turns the trace on or off from the next step on.
  void setTrace(bool on) { options_.trace = on; }
  bool tracing() const { return options_.trace; }

 private:
  Executor(std::unique_ptr<LoadedModule> loaded, ExecutorOptions options);
  absl::StatusOr<struct Program*> program(absl::string_view name) const;
  absl::Status enqueueStep(struct Program& p, int slot);
  /// Enqueues one step of `p` reading input slot `slot`: plainly, or by replaying its
  /// recording (record_steps).
  absl::Status runStep(struct Program& p, int slot);
  /// Records one step of `p` on `recorder` (begin, the step's enqueue, end).
  absl::Status record(backend::StepRecorder& recorder, struct Program& p, int slot);
  /// Turns recording off for the rest of the run (every recording dropped) and warns once,
  /// saying `why`.
  void stopRecording(const std::string& why);
  /// Waits for every stream of this process's devices; returns `status` if it is an error,
  /// else the first error a stream reports.
  absl::Status drain(absl::Status status);
  /// Adds `entry` to the trace and stamps its start on `stream`; returns its index.
  size_t traceStart(backend::Stream& stream, TraceEntry entry);
  void traceEnd(backend::Stream& stream, size_t at);

  std::unique_ptr<LoadedModule> loaded_;
  ExecutorOptions options_;
  std::function<void(const ir::Node&, size_t)> hook_;
  std::mutex trace_mu_;
  std::vector<TraceEntry> trace_;
  struct Program* in_flight_ = nullptr;  // the step launched and not yet waited for
};

}  // namespace tandem::runtime
