#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ir/ir.h"
#include "runtime/host_tensor.h"

namespace tandem::runtime {

struct ExecutorOptions {
  /// Seed of `initialize` (parameter initial values).
  uint64_t seed = 0;
  /// OpenMP threads each device's kernels may use (1: one core per device).
  int threads_per_device = 1;
  /// Record when each node starts and ends on which stream (see trace()).
  bool trace = false;
};

/// One node's run on one stream, for tests and profiles.
struct TraceEntry {
  const ir::Node* node;
  size_t device;  // index into Module::devices()
  bool comm;      // ran on the comm stream
  int64_t start_ns, end_ns;
};

/// Runs a compiled module (after the default pipeline: replicated, collectives inserted,
/// scheduled, memory planned). Loading creates per device a compute stream and a comm
/// stream, the kernels of every node, the arenas of every graph and the variables'
/// storage. A step is enqueued whole: per node, the waits on events of the other stream,
/// the work, and the event other streams wait for; so a bucket's all_reduce starts as soon
/// as its last gradient is computed while the rest of backward still runs. The host then
/// waits once, for the step's end.
class Executor {
 public:
  /// Takes the module (it plans memory for graphs that have no plan yet). Errors name the
  /// node whose kernel could not be made, or the device that is not supported.
  static absl::StatusOr<std::unique_ptr<Executor>> create(std::unique_ptr<ir::Module> module,
                                                          ExecutorOptions options = {});
  ~Executor();

  const ir::Module& module() const { return *module_; }

  /// Runs graph `name` once. `inputs` are the graph's inputs in order (host memory, copied
  /// in before the step); returns the graph's outputs copied to the host.
  absl::StatusOr<std::vector<HostTensor>> run(absl::string_view name,
                                              absl::Span<const backend::TensorView> inputs);

  /// A copy of a variable's replica on device `device` (an index into Module::devices()).
  absl::StatusOr<HostTensor> readVariable(absl::string_view name, size_t device) const;

  /// Bytes of graph `name`'s arena on each device.
  std::vector<int64_t> arenaBytes(absl::string_view name) const;

  /// Called on the stream thread right before each node runs (tests use it to hold a
  /// stream at a chosen point).
  void setBeforeNodeHook(std::function<void(const ir::Node&, size_t device)> hook);
  /// The trace of every step since the last call (ExecutorOptions::trace).
  std::vector<TraceEntry> takeTrace();

  struct Impl;

 private:
  explicit Executor(std::unique_ptr<ir::Module> module);
  std::unique_ptr<ir::Module> module_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::runtime
