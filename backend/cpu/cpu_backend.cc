#include "backend/cpu/cpu_backend.h"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backend/cpu/copy_slice.h"
#include "backend/cpu/cpu_context.h"
#include "backend/cpu/cpu_info.h"
#include "backend/cpu/cpu_stream.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/layout_plan.h"
#include "backend/cpu/local_communicator.h"
#include "backend/cpu/process_communicator.h"

namespace tandem::backend::cpu {
namespace {

absl::StatusOr<DeviceBuffer> hostBuffer(int64_t bytes, MemoryLocation where) {
  const size_t n =
      static_cast<size_t>((std::max<int64_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment);
  // Large buffers (arenas, variables) straight from mmap: the kernel hands out zeroed pages
  // when they are first touched, so nothing is written twice. A memset here was 40 % of
  // loading LeNet on 512 devices (every device's arenas and variables, page by page).
  // The mapping's length is kept in a page of its own in front (a release gets only the
  // pointer), which leaves the data page-aligned.
  constexpr size_t kMmapBytes = size_t{1} << 16, kPage = 4096;
  if (n >= kMmapBytes) {
    const size_t length = n + kPage;
    void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return absl::ResourceExhaustedError(
          absl::StrFormat("out of host memory for %d bytes", bytes));
    *static_cast<size_t*>(p) = length;
    return DeviceBuffer(static_cast<char*>(p) + kPage, bytes, where, [](void* q) {
      void* mapping = static_cast<char*>(q) - kPage;
      ::munmap(mapping, *static_cast<size_t*>(mapping));
    });
  }
  void* p = std::aligned_alloc(kAlignment, n);
  if (p == nullptr)
    return absl::ResourceExhaustedError(absl::StrFormat("out of host memory for %d bytes", bytes));
  std::memset(p, 0, n);
  return DeviceBuffer(p, bytes, where, [](void* q) { std::free(q); });
}

// The blocked values of graph `g`'s plan, read once for all the devices that load it: the
// plan covers the whole graph (every device's nodes), so reading it per device made loading
// quadratic in devices (40 s of 64 at 512 LeNet devices). Keyed by the graph's serial and
// its plan, which together change whenever the graph does; the last graph's set is kept
// (the loader prepares every device for one graph, then the next).
std::shared_ptr<const absl::flat_hash_set<const ir::Value*>> sharedBlockedValues(
    const ir::Graph& g) {
  struct Cached {
    uint64_t serial = 0;
    const ir::GraphPlan* plan = nullptr;
    size_t nodes = 0;
    std::shared_ptr<const absl::flat_hash_set<const ir::Value*>> blocked;
  };
  static std::mutex mu;
  static Cached cached;
  std::lock_guard<std::mutex> l(mu);
  if (!cached.blocked || cached.serial != g.serial() || cached.plan != g.plan() ||
      cached.nodes != g.numNodes())
    cached = {g.serial(), g.plan(), g.numNodes(),
              std::make_shared<const absl::flat_hash_set<const ir::Value*>>(
                  cpu::channelBlockedValues(g))};
  return cached.blocked;
}

class CpuDevice final : public Device {
 public:
  CpuDevice(const ir::Device& id, const DeviceOptions& o, const CpuOptions& own)
      : id_(id),
        options_(o),
        own_(own),
        ctx_(id, o.seed, /*winograd=*/own.conv_algorithm != ConvAlgorithm::kDirect),
        compute_(absl::StrCat(ir::toString(id), "/compute"), own.threads_per_device),
        comm_(absl::StrCat(ir::toString(id), "/comm"), 1) {
    options_.settings = nullptr;  // the caller's, valid only during creation: own_ has it
  }

  const ir::Device& id() const override { return id_; }
  MemoryLocation location() const override { return MemoryLocation::onDevice(options_.index); }
  Stream& computeStream() override { return compute_; }
  Stream& commStream() override { return comm_; }

  absl::StatusOr<DeviceBuffer> allocate(int64_t bytes) override {
    return hostBuffer(bytes, location());
  }
  absl::StatusOr<DeviceBuffer> allocateHost(int64_t bytes) override {
    return hostBuffer(bytes, MemoryLocation::host());
  }

  absl::Status copySliceFromHost(const TensorView& whole, const TensorView& part, int axis,
                                 int64_t offset, Stream& stream) override {
    return CpuStream::enqueueOn(stream, [whole, part, axis, offset] {
      copySlice(whole, part, axis, offset, /*into_whole=*/false);
      return absl::OkStatus();
    });
  }

  absl::Status copyIntoSlice(const TensorView& part, const TensorView& whole, int axis,
                             int64_t offset, Stream& stream) override {
    return CpuStream::enqueueOn(stream, [part, whole, axis, offset] {
      copySlice(whole, part, axis, offset, /*into_whole=*/true);
      return absl::OkStatus();
    });
  }

  absl::Status copyFromHost(const TensorView& src, const TensorView& dst,
                            Stream& stream) override {
    return copyToHost(src, dst, stream);  // both host memory on a CPU device
  }

  absl::Status copyToHost(const TensorView& src, const TensorView& dst, Stream& stream) override {
    return CpuStream::enqueueOn(stream, [src, dst] {
      std::memcpy(dst.data, src.data, static_cast<size_t>(src.bytes()));
      return absl::OkStatus();
    });
  }

  absl::Status prepareGraph(const ir::Graph& g) override {
    // The plan's layouts (assign-layouts; nChw16c only on AVX-512 hosts, backend/targets.cc).
    blocked_ = sharedBlockedValues(g);
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<Kernel>> makeKernel(const ir::Node& node) override {
    // oneDNN fixes a primitive's thread count when it is made, from the making thread's
    // OpenMP setting: make it with the count this device's kernels run with.
    const int previous = omp_get_max_threads();
    omp_set_num_threads(own_.threads_per_device);
    static const absl::flat_hash_set<const ir::Value*> kNone;
    auto kernel = cpu::makeKernel(node, ctx_, blocked_ ? blocked_.get() : &kNone);
    omp_set_num_threads(previous);
    return kernel;
  }

 private:
  ir::Device id_;
  DeviceOptions options_;
  CpuOptions own_;
  CpuContext ctx_;
  CpuStream compute_, comm_;
  // Of the graph being loaded, shared with the other devices that load it.
  std::shared_ptr<const absl::flat_hash_set<const ir::Value*>> blocked_;
};

class CpuBackend final : public Backend {
 public:
  const ir::TargetInfo& target() const override { return target_; }

  absl::StatusOr<std::unique_ptr<Device>> createDevice(const ir::Device& device,
                                                       const DeviceOptions& o) const override {
    absl::StatusOr<CpuOptions> own = cpuOptions().read(o.settings);
    if (!own.ok())
      return absl::InvalidArgumentError(
          absl::StrCat(ir::toString(device), ": ", own.status().message()));
    // A device starts two worker threads: a process or memory limit (ulimit -u, -v) makes
    // std::thread throw, which is the device's error, not a crash.
    try {
      return std::make_unique<CpuDevice>(device, o, *own);
    } catch (const std::system_error& e) {
      return absl::ResourceExhaustedError(
          absl::StrCat(ir::toString(device), ": cannot start its stream threads: ", e.what(),
                       " (a limit on threads or memory: ulimit -u, ulimit -v)"));
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError(
          absl::StrCat(ir::toString(device), ": out of memory starting the device"));
    }
  }

  absl::StatusOr<std::unique_ptr<CommunicatorGroup>> createCommunicators(
      absl::Span<Device* const> group) const override {
    for (Device* d : group)
      if (d->id().kind != kind())
        return absl::InvalidArgumentError(
            absl::StrCat(ir::toString(d->id()),
                         " is not a CPU device: the local communicator joins CPU devices"));
    return makeLocalCommunicators(static_cast<int>(group.size()));
  }

  absl::StatusOr<std::unique_ptr<CommunicatorGroup>> createProcessCommunicators(
      absl::Span<Device* const> local, absl::Span<const ir::Device> members,
      std::shared_ptr<ProcessComm> processes) const override {
    std::vector<int> ranks;  // the processes that own members, ascending
    for (const ir::Device& d : members) {
      if (d.kind != kind())
        return absl::InvalidArgumentError(absl::StrCat(
            ir::toString(d), " is not a CPU device: the CPU communicator joins CPU devices"));
      ranks.push_back(d.rank);
    }
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    std::vector<int> owner, positions;
    std::vector<std::string> names;
    for (size_t p = 0; p < members.size(); ++p) {
      owner.push_back(static_cast<int>(
          std::lower_bound(ranks.begin(), ranks.end(), members[p].rank) - ranks.begin()));
      for (Device* d : local)
        if (d->id() == members[p]) {
          positions.push_back(static_cast<int>(p));
          names.push_back(ir::toString(d->id()));
        }
    }
    if (positions.size() != local.size() || local.empty())
      return absl::InvalidArgumentError("the local members of a group are not in it");
    return makeProcessCommunicators(std::move(owner), std::move(positions), std::move(names),
                                    std::move(processes));
  }

  std::string describe() const override {
    CpuInfo cpu = hostCpuInfo();
    return absl::StrFormat(
        "%s, %d cores, %.1f GiB memory, oneDNN %s on %s%s\n  devices cpu:0 ... cpu:%d are "
        "logical: each gets a compute and a comm stream thread and --threads-per-device kernel "
        "threads (default 1), all sharing these %d cores",
        cpu.model, cpu.cores, cpu.memory_bytes / 1073741824.0, cpu.onednn, cpu.isa,
        cpu.bf16 ? " (bf16 instructions)" : "", static_cast<int>(ir::kMaxDevices) - 1, cpu.cores);
  }

  std::string version() const override {
    const CpuInfo cpu = hostCpuInfo();
    return absl::StrCat("oneDNN ", cpu.onednn, ", ", cpu.isa);
  }

 private:
  const ir::TargetInfo target_ = targetInfo();
};

}  // namespace

const Backend& cpuBackend() {
  static const CpuBackend* backend = new CpuBackend();  // never destroyed, like the registry
  return *backend;
}

}  // namespace tandem::backend::cpu
