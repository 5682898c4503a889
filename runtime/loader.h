#pragma once

// What loading a module makes, and the function that makes it: per device a backend
// Device (streams, memory), per graph a Program (arenas, kernels, the shares of every
// node with their views, the events between streams), variable storage and the
// communicators of every device group. The executor (executor.cc) only runs Programs.

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "ir/ir.h"

namespace tandem::runtime {

struct ExecutorOptions;

/// One device's share of a node: the views it reads and writes, the events of other
/// streams it waits for, and the event it records when another stream waits for it.
struct Share {
  size_t device = 0;  // index into Module::devices()
  std::vector<backend::TensorView> in, out;
  std::vector<backend::Event*> waits;
  std::unique_ptr<backend::Event> done;
  int64_t offset = 0;                     // split: where this device's slice starts
  int root = 0;                           // broadcast: the source's rank in the group
  backend::Communicator* comm = nullptr;  // collectives: this device's communicator
  backend::CommunicatorGroup* group = nullptr;
  /// A collective across processes: what it is, for the line a rank that waits in it too
  /// long prints ("all_reduce %g.sum.0 (bucket 2)"); empty otherwise.
  std::string label;
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

/// A graph ready to run.
struct Program {
  const ir::Graph* graph = nullptr;
  std::vector<backend::DeviceBuffer> arenas;  // by device
  std::vector<backend::DeviceBuffer> inputs;  // host staging, one per graph input
  std::vector<ir::TensorType> input_types;
  std::vector<OutputCopy> outputs;
  std::vector<std::unique_ptr<Instr>> instrs;
  /// Plain runs so far, and the recorded step once there is one (Executor::run).
  int runs = 0;
  std::unique_ptr<backend::StepRecorder> recorded;
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

  /// Streams wind down before the memory their work points at: devices go first.
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
