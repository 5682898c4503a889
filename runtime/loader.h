#pragma once

// What loading a module makes, and the function that makes it: per device a backend
// Device (streams, memory), per graph a Program (arenas, kernels, the shares of every
// node with their views, the events between streams), variable storage and the
// communicators of every device group. The executor (executor.cc) only runs Programs.

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "ir/ir.h"
#include "runtime/label_check.h"

namespace tandem::runtime {

struct ExecutorOptions;

/// What a split's share reads in one input slot: the slot's host staging of the whole
/// batch (its rows from Share::offset on), or, where `prefetched`, the device's own buffer
/// holding just its slice, filled by the slot's prefetch copy.
struct SplitSource {
  backend::TensorView in;
  bool prefetched = false;
};

/// One device's share of a node: the views it reads and writes, the events of other
/// streams it waits for, and the event it records when another stream waits for it.
struct Share {
  size_t device = 0;  // index into Module::devices()
  std::vector<backend::TensorView> in, out;
  std::vector<backend::Event*> waits;
  std::unique_ptr<backend::Event> done;
  int64_t offset = 0;                     // split: where this device's slice starts
  int root = 0;                           // broadcast: the source's rank in the group
  std::vector<int64_t> shard_sizes;       // reduce_scatter, all_gather: each rank's shard
  backend::Communicator* comm = nullptr;  // collectives: this device's communicator
  backend::CommunicatorGroup* group = nullptr;
  /// A collective across processes: what it is, for the line a rank that waits in it too
  /// long prints ("all_reduce %g.sum.0 (bucket 2)"); empty otherwise.
  std::string label;
  /// split: what the share reads in each of its Program's input slots.
  std::array<SplitSource, 2> sources;
};

/// A node as the executor runs it: one share for compute work, one per device for a
/// collective (grouped by device group, each group's shares together).
struct Instr {
  const ir::Node* node = nullptr;
  bool comm = false;  // runs on the comm streams
  std::vector<Share> shares;
  std::unique_ptr<backend::Kernel> kernel;  // compute work
};

/// A graph output: copied from its device to host memory, after the step, on the stream
/// that wrote it.
struct OutputCopy {
  size_t device = 0;
  bool comm = false;
  backend::TensorView src;
  backend::DeviceBuffer host;
};

/// The copy of a device's slice of a graph input, from an input slot's host staging into
/// the device's buffer of that slot, on the device's prefetch stream (Executor::prefetch).
struct PrefetchCopy {
  const ir::Node* split = nullptr;
  size_t device = 0;          // index into Module::devices()
  backend::TensorView whole;  // the slot's staging of the input
  backend::TensorView slice;  // the device's buffer, the split's result type
  int axis = 0;
  int64_t offset = 0;
};

/// One of a Program's two input slots. While a step reads one, the next inputs go into
/// the other, so their copies never touch what the step in flight reads.
struct InputSlot {
  std::vector<backend::DeviceBuffer> staging;  // host memory, one per graph input
  std::vector<backend::DeviceBuffer> slices;   // on devices with a prefetch stream
  std::vector<PrefetchCopy> copies;
  /// By device: recorded on its prefetch stream after the slot's copies; the step's
  /// comm stream waits for it. Null for a device without copies.
  std::vector<std::unique_ptr<backend::Event>> copied;
  /// The step recorded on this slot's addresses (record_steps).
  std::unique_ptr<backend::StepRecorder> recorded;
};

/// A graph ready to run.
struct Program {
  const ir::Graph* graph = nullptr;
  std::vector<backend::DeviceBuffer> arenas;  // by device
  std::vector<ir::TensorType> input_types;
  /// The inputs that are a loss's labels, checked as each batch is handed over.
  std::vector<LabelCheck> label_checks;
  std::array<InputSlot, 2> slots;
  std::vector<OutputCopy> outputs;
  std::vector<std::unique_ptr<Instr>> instrs;
  /// Plain runs so far (Executor::runStep).
  int runs = 0;
  /// The slot the last launched step read, and whether inputs wait in the other.
  int last_read = 1;
  bool pending = false;
  /// The slot the next inputs go into and the next step reads: the one the last step did
  /// not read (always 0 for a graph without inputs: one recording does).
  int nextSlot() const { return input_types.empty() ? 0 : 1 - last_read; }
};

/// A module loaded on its devices.
struct LoadedModule {
  std::unique_ptr<ir::Module> module;
  /// Like Module::devices(); null for another process's device (a module spanning
  /// processes: each loads only the devices of its own rank).
  std::vector<std::unique_ptr<backend::Device>> devices;
  absl::flat_hash_map<std::string, std::vector<backend::DeviceBuffer>> vars;  // by device
  std::vector<std::unique_ptr<backend::CommunicatorGroup>> groups;
  absl::flat_hash_map<std::string, std::unique_ptr<Program>> programs;

  /// Waits for every stream, then destroys what was made on the devices (programs,
  /// communicators, variables) before the devices themselves.
  ~LoadedModule();
};

/// Loads `module` (compiled: replicated, collectives inserted, scheduled, memory planned)
/// on the backends of its devices: those of this process's rank (backend/processes.h),
/// every device in a one-process run. Work on other ranks' devices is left to them, and
/// a collective that spans processes gets its backend's communicators across processes. Errors name the device, graph or node at fault: a
/// device kind this build lacks, a missing or stale memory plan, a kernel that cannot be
/// made.
absl::StatusOr<std::unique_ptr<LoadedModule>> loadModule(std::unique_ptr<ir::Module> module,
                                                         const ExecutorOptions& options);

}  // namespace tandem::runtime
