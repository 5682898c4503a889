#pragma once

// The seam between the runtime and a kind of device. A Backend makes Devices (streams,
// memory, copies, kernels) and the Communicators that join them; the executor speaks
// only these interfaces and never names a device kind. Backends register here
// (registerBackend, registry.cc); backend/backends.cc, linked by programs and not by the
// runtime, is the one place that knows which kinds this build has.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "backend/communicator.h"
#include "backend/kernel.h"
#include "backend/processes.h"
#include "backend/settings.h"
#include "backend/stream.h"
#include "backend/tensor_view.h"
#include "ir/ir.h"
#include "ir/target.h"

namespace tandem::backend {

/// Memory from a device's allocator (or host staging memory), returned to it when the
/// buffer goes away.
class DeviceBuffer {
 public:
  /// Gives memory back: std::free, cudaFree, cudaFreeHost.
  using Release = void (*)(void*);

  DeviceBuffer() = default;
  DeviceBuffer(void* data, int64_t bytes, MemoryLocation where, Release release)
      : data_(data), bytes_(bytes), where_(where), release_(release) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  ~DeviceBuffer();

  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  const MemoryLocation& where() const { return where_; }
  /// A view of `type` at byte `offset`.
  TensorView view(const ir::TensorType& type, int64_t offset = 0) const {
    return {static_cast<char*>(data_) + offset, type, where_};
  }

 private:
  void* data_ = nullptr;
  int64_t bytes_ = 0;
  MemoryLocation where_;
  Release release_ = nullptr;
  void release();
};

/// How the executor wants a device set up: what every backend takes, and the run's
/// backend settings (settings.h), of which a backend reads those it registered into its
/// own options struct (cpu::cpuOptions().read(settings)).
struct DeviceOptions {
  /// The device's index in Module::devices(): views of its memory say "device <index>".
  int index = 0;
  /// Seed of the run (`initialize` derives each variable's values from it and the name).
  uint64_t seed = 0;
  /// The run's backend settings, valid only while the device is made; null: defaults.
  const Settings* settings = nullptr;
};

/// One logical device of a module: its two streams, its memory and its kernels.
class Device {
 public:
  virtual ~Device() = default;
  virtual const ir::Device& id() const = 0;
  /// Where its allocations live: device `DeviceOptions::index`.
  virtual MemoryLocation location() const = 0;
  /// Kernels run on the compute stream; collectives, and copies of the batch in, on the
  /// comm stream.
  virtual Stream& computeStream() = 0;
  virtual Stream& commStream() = 0;
  /// The input pipeline's stream, or null (the default) where overlapping the batch's copy
  /// with the step before buys nothing. With one, the executor gives the device two
  /// buffers per split of a graph input, which no step value aliases, and copies the next
  /// batch's slice into one of them on this stream (copySliceFromHost, from pinned
  /// staging) while the step in flight reads the other; the step's split then copies the
  /// slice from that buffer into the arena (copyIntoSlice on the comm stream, device to
  /// device, from a fixed address that a recorded step keeps). Without one, the split
  /// copies from host staging itself, within its step (CPU: that copy is a memcpy on the
  /// cores the step uses, so a second one ahead of it would only cost).
  virtual Stream* prefetchStream() { return nullptr; }

  /// `bytes` of zero-filled device memory, aligned to Backend::alignment().
  virtual absl::StatusOr<DeviceBuffer> allocate(int64_t bytes) = 0;
  /// Host memory this device copies to and from fastest (pinned on a GPU).
  virtual absl::StatusOr<DeviceBuffer> allocateHost(int64_t bytes) = 0;

  /// Enqueues on `stream` the copy of slice [offset, offset + part's size along `axis`)
  /// of the host tensor `whole` into the device tensor `part` (split_and_load).
  virtual absl::Status copySliceFromHost(const TensorView& whole, const TensorView& part, int axis,
                                         int64_t offset, Stream& stream) = 0;
  /// Enqueues on `stream` the copy of `part` (in this device's memory or a peer's of the
  /// same backend) into slice [offset, offset + part's size along `axis`) of `whole`, in
  /// this device's memory (concat: a gather by peer copies).
  virtual absl::Status copyIntoSlice(const TensorView& part, const TensorView& whole, int axis,
                                     int64_t offset, Stream& stream) = 0;
  /// Enqueues on `stream` the copy of host tensor `src` into device tensor `dst`.
  virtual absl::Status copyFromHost(const TensorView& src, const TensorView& dst,
                                    Stream& stream) = 0;
  /// Enqueues on `stream` the copy of device tensor `src` into host tensor `dst`.
  virtual absl::Status copyToHost(const TensorView& src, const TensorView& dst, Stream& stream) = 0;

  /// Called before the kernels of graph `g` are made: the device may plan, for the whole
  /// graph, how its kernels hand tensors to each other (the CPU device picks which
  /// activations stay channel-blocked). The graph must outlive its kernels.
  virtual absl::Status prepareGraph(const ir::Graph& g) {
    (void)g;
    return absl::OkStatus();
  }
  /// The kernel of `node` (placed on this device) for this device, made now, after
  /// prepareGraph of its graph.
  virtual absl::StatusOr<std::unique_ptr<Kernel>> makeKernel(const ir::Node& node) = 0;
};

/// A whole step of a set of devices recorded once and replayed with one launch (CUDA
/// graphs): after begin(), the work enqueued on the devices' compute and comm streams is
/// recorded, not run; end() makes it replayable; replay() enqueues all of it again, on the
/// same memory, after the work enqueued before it on any of those streams (as a plain
/// step would be: the input pipeline's waits on the comm streams come before it).
class StepRecorder {
 public:
  virtual ~StepRecorder() = default;
  virtual absl::Status begin() = 0;
  /// Ends recording, also after a failed enqueue (then returns that failure's status
  /// unchanged and keeps nothing).
  virtual absl::Status end() = 0;
  virtual absl::Status replay() = 0;
};

/// A kind of device, registered under its kind's name (registry.cc) with the facts the
/// compiler may know about it (ir/target.h: alignment, multi-tensor updates, preferred
/// layout, step recording, processes, dtypes, shared devices).
class Backend {
 public:
  virtual ~Backend() = default;
  /// What the compiler may know about this kind (registered with the backend).
  virtual const ir::TargetInfo& target() const = 0;
  ir::DeviceKind kind() const { return target().kind; }
  /// Alignment, in bytes, of every buffer a memory plan carves out of an arena (what the
  /// kernels' vector loads, oneDNN or cuDNN want): the target's.
  int64_t alignment() const { return target().alignment; }
  virtual absl::StatusOr<std::unique_ptr<Device>> createDevice(
      const ir::Device& device, const DeviceOptions& options) const = 0;
  /// The communicators of a group of this backend's devices, in the group's order.
  virtual absl::StatusOr<std::unique_ptr<CommunicatorGroup>> createCommunicators(
      absl::Span<Device* const> group) const = 0;
  /// The communicators of this process's members of a group that spans processes
  /// (processes.h): `members` is every device of the group in its order, with the rank
  /// that owns it; `local` this process's members, in that order; `processes` joins the
  /// processes that own members (ascending ranks). The group's rank(i) is local[i].
  virtual absl::StatusOr<std::unique_ptr<CommunicatorGroup>> createProcessCommunicators(
      absl::Span<Device* const> local, absl::Span<const ir::Device> members,
      std::shared_ptr<ProcessComm> processes) const {
    (void)local;
    (void)processes;
    return absl::UnimplementedError(
        absl::StrCat("a collective joins ", ir::toString(members[0]), " and devices of other "
                     "processes: this device kind has no communicator across processes yet"));
  }
  /// One paragraph for `tandem devices`: what there is to run on, with threads and memory.
  virtual std::string describe() const = 0;
  /// One line for `tandem --version`: the libraries it was built with.
  virtual std::string version() const = 0;
  /// Whether this machine can run `device` (CUDA: a GPU with that index), checked before
  /// any data loads; the error names the device and what is missing.
  virtual absl::Status checkDevice(const ir::Device& device) const {
    (void)device;
    return absl::OkStatus();
  }
  /// A recorder of whole steps on `devices` (all of this backend), or null where the
  /// backend has none (CPU: enqueueing a step costs microseconds, there is nothing to save).
  virtual absl::StatusOr<std::unique_ptr<StepRecorder>> makeStepRecorder(
      absl::Span<Device* const> devices) const {
    (void)devices;
    return nullptr;
  }
};

/// Registers `backend` under its kind's name (replacing one registered before): what
/// registerBackends (backend/backends.h) does for each backend of the build.
void registerBackend(const Backend& backend);

/// The backend of a device kind, or an error naming the kind when this build has none
/// (registerBackends must have run: programs call it before they compile).
absl::StatusOr<const Backend*> backendFor(ir::DeviceKind kind);

/// The backends this build has, in registration order.
std::vector<const Backend*> registeredBackends();

/// What `tandem devices` prints: each registered kind's describe(), and the kinds this
/// build knows but has no backend for.
std::string describeBackends();

/// What `tandem --version` prints of the backends: "<kind> backend: <version()>" a line.
std::string backendVersions();

/// While alive, `backend` stands in for its kind (tests: a backend that records what the
/// executor asks of it).
class ScopedBackendOverride {
 public:
  explicit ScopedBackendOverride(const Backend& backend);
  ~ScopedBackendOverride();
  ScopedBackendOverride(const ScopedBackendOverride&) = delete;
  ScopedBackendOverride& operator=(const ScopedBackendOverride&) = delete;

 private:
  ir::DeviceKind kind_;
  const Backend* previous_;
};

}  // namespace tandem::backend
