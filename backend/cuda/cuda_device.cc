#include "backend/cuda/cuda_device.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backend/cuda/cuda_communicator.h"
#include "backend/cuda/cuda_graph.h"
#include "backend/cuda/cuda_kernel.h"
#include "backend/cuda/cuda_status.h"
#include "backend/cuda/layout_plan.h"
#include "backend/cuda/target_info.h"

namespace tandem::backend::cuda {
namespace {

// cudaMalloc returns 256-byte aligned memory; the memory plan keeps every tensor of an
// arena at that alignment too, which cuDNN's and cuBLAS's vectorized paths want.

void freeDevice(void* p) { cudaFree(p); }
void freePinned(void* p) { cudaFreeHost(p); }

/// A slice along `axis` as a 2-D copy: `height` rows (the dimensions before the axis) of
/// `width` bytes, `whole_pitch` apart in the whole tensor, contiguous in the part.
struct SliceCopy {
  size_t width, whole_pitch, height, offset_bytes;
};

absl::StatusOr<SliceCopy> sliceCopy(const TensorView& whole, const TensorView& part, int axis,
                                    int64_t offset) {
  const ir::Shape& ws = whole.type.shape;
  const ir::Shape& ps = part.type.shape;
  if (ws.size() != ps.size() || axis < 0 || axis >= static_cast<int>(ws.size()) ||
      whole.type.dtype != part.type.dtype || offset < 0 || offset + ps[axis] > ws[axis])
    return absl::InternalError(absl::StrCat("slice [", offset, ", +", ps.empty() ? 0 : ps[axis],
                                            ") along axis ", axis, " does not fit ",
                                            ir::toString(whole.type), " / ", ir::toString(part.type)));
  int64_t outer = 1, inner = ir::dtypeBytes(whole.type.dtype);
  for (int i = 0; i < axis; ++i) outer *= ws[i];
  for (size_t i = static_cast<size_t>(axis) + 1; i < ws.size(); ++i) inner *= ws[i];
  return SliceCopy{static_cast<size_t>(ps[axis] * inner), static_cast<size_t>(ws[axis] * inner),
                   static_cast<size_t>(outer), static_cast<size_t>(offset * inner)};
}

class CudaBackend final : public Backend {
 public:
  const ir::TargetInfo& target() const override { return target_; }

  absl::StatusOr<std::unique_ptr<Device>> createDevice(const ir::Device& device,
                                                       const DeviceOptions& o) const override {
    ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> d, CudaDevice::create(*this, device, o));
    return std::unique_ptr<Device>(std::move(d));
  }

  absl::StatusOr<std::unique_ptr<CommunicatorGroup>> createCommunicators(
      absl::Span<Device* const> group) const override {
    for (Device* d : group)
      if (d->id().kind != kind())
        return absl::InvalidArgumentError(absl::StrCat(
            ir::toString(d->id()), " is not a CUDA device: NCCL joins CUDA devices only"));
    return makeCommunicators(group);
  }

  absl::StatusOr<std::unique_ptr<CommunicatorGroup>> createProcessCommunicators(
      absl::Span<Device* const> local, absl::Span<const ir::Device> members,
      std::shared_ptr<ProcessComm> processes) const override {
    return makeProcessCommunicators(local, members, std::move(processes));
  }

  absl::Status checkDevice(const ir::Device& device) const override {
    return checkGpu(device);
  }

  absl::StatusOr<std::unique_ptr<StepRecorder>> makeStepRecorder(
      absl::Span<Device* const> devices) const override {
    return makeCudaStepRecorder(devices);
  }

  std::string describe() const override {
    absl::StatusOr<int> count = gpuCount();
    if (!count.ok()) return std::string(count.status().message());
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    std::string out = absl::StrFormat("%d GPU(s); CUDA runtime %d.%d, driver %d.%d, cuDNN %d",
                                      *count, runtime / 1000, runtime % 1000 / 10, driver / 1000,
                                      driver % 1000 / 10, static_cast<int>(cudnnGetVersion()));
    for (int g = 0; g < *count; ++g) {
      cudaDeviceProp p{};
      if (cudaGetDeviceProperties(&p, g) != cudaSuccess) continue;
      absl::StrAppendFormat(&out, "\n  cuda:%d  %s, sm_%d%d, %d SMs, %.1f GiB", g, p.name, p.major,
                            p.minor, p.multiProcessorCount, p.totalGlobalMem / 1073741824.0);
    }
    absl::StrAppend(&out,
                    "\n  several logical devices may share one GPU (--devices cuda:0,cuda:0)");
    return out;
  }

  std::string version() const override {
    return absl::StrFormat("CUDA %d.%d, cuDNN %d, NCCL %d.%d.%d", CUDART_VERSION / 1000,
                           CUDART_VERSION % 1000 / 10, CUDNN_VERSION, NCCL_MAJOR, NCCL_MINOR,
                           NCCL_PATCH);
  }

 private:
  const ir::TargetInfo target_ = targetInfo();
};

}  // namespace

absl::StatusOr<int> gpuCount() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0)
    return absl::FailedPreconditionError(absl::StrCat(
        "no CUDA GPU on this machine: cudaGetDeviceCount: ",
        e != cudaSuccess ? absl::StrCat(cudaGetErrorName(e), " (", cudaGetErrorString(e), ")")
                         : "0 devices"));
  return count;
}

absl::Status checkGpu(const ir::Device& device) {
  const std::string name = ir::toString(device);
  absl::StatusOr<int> count = gpuCount();
  if (!count.ok())
    return absl::FailedPreconditionError(absl::StrCat(name, ": ", count.status().message()));
  if (device.index < 0 || device.index >= *count)
    return absl::InvalidArgumentError(absl::StrCat(name, ": this machine has ", *count,
                                                   " CUDA GPU(s), cuda:0 to cuda:", *count - 1));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::create(const Backend& backend,
                                                               const ir::Device& device,
                                                               const DeviceOptions& options) {
  const std::string name = ir::toString(device);
  RETURN_IF_ERROR(checkGpu(device));
  const int gpu = device.index;
  ASSIGN_OR_RETURN(auto ctx, CudaContext::create(device, gpu, options));
  ASSIGN_OR_RETURN(auto compute, CudaStream::create(backend, absl::StrCat(name, "/compute"), gpu,
                                                    /*high_priority=*/false));
  ASSIGN_OR_RETURN(auto comm, CudaStream::create(backend, absl::StrCat(name, "/comm"), gpu,
                                                 /*high_priority=*/true));
  // Low priority: the copy engine does the work, and the step's kernels come first.
  ASSIGN_OR_RETURN(auto prefetch, CudaStream::create(backend, absl::StrCat(name, "/prefetch"), gpu,
                                                     /*high_priority=*/false));
  return std::unique_ptr<CudaDevice>(new CudaDevice(
      options.index, std::move(ctx), std::move(compute), std::move(comm), std::move(prefetch)));
}

absl::StatusOr<DeviceBuffer> CudaDevice::allocate(int64_t bytes) {
  const std::string& where = ctx_->name();
  CUDA_TRY(where, cudaSetDevice(gpu()));
  void* p = nullptr;
  if (bytes > 0) {
    absl::Status s = check(cudaMalloc(&p, static_cast<size_t>(bytes)), "cudaMalloc", where);
    if (!s.ok())
      return absl::ResourceExhaustedError(absl::StrCat(s.message(), " (", bytes, " bytes)"));
    DeviceBuffer buffer(p, bytes, location(), freeDevice);  // freed on any error below
    // Zeroed on the compute stream and waited for, so that every stream sees zeros: a
    // plain cudaMemset runs on the legacy default stream, which Tandem's non-blocking
    // streams do not wait for, and may return before it has run. (Buffers are allocated
    // while a module loads, when nothing runs: the wait costs nothing.)
    CUDA_TRY(where, cudaMemsetAsync(p, 0, static_cast<size_t>(bytes), compute_->handle()));
    CUDA_TRY(where, cudaStreamSynchronize(compute_->handle()));
    return buffer;
  }
  return DeviceBuffer(p, bytes, location(), freeDevice);
}

absl::StatusOr<DeviceBuffer> CudaDevice::allocateHost(int64_t bytes) {
  const std::string& where = ctx_->name();
  CUDA_TRY(where, cudaSetDevice(gpu()));
  void* p = nullptr;
  if (bytes > 0) {
    CUDA_TRY(where, cudaMallocHost(&p, static_cast<size_t>(bytes)));
    std::memset(p, 0, static_cast<size_t>(bytes));
  }
  return DeviceBuffer(p, bytes, MemoryLocation::pinnedHost(), freePinned);
}

absl::Status CudaDevice::copySliceFromHost(const TensorView& whole, const TensorView& part,
                                           int axis, int64_t offset, Stream& stream) {
  ASSIGN_OR_RETURN(SliceCopy c, sliceCopy(whole, part, axis, offset));
  CUDA_TRY(ctx_->name(), cudaSetDevice(gpu()));
  CUDA_TRY(ctx_->name(),
           cudaMemcpy2DAsync(part.data, c.width, static_cast<const char*>(whole.data) + c.offset_bytes,
                             c.whole_pitch, c.width, c.height, cudaMemcpyDefault,
                             streamHandle(stream)));
  return absl::OkStatus();
}

absl::Status CudaDevice::copyIntoSlice(const TensorView& part, const TensorView& whole, int axis,
                                       int64_t offset, Stream& stream) {
  ASSIGN_OR_RETURN(SliceCopy c, sliceCopy(whole, part, axis, offset));
  CUDA_TRY(ctx_->name(), cudaSetDevice(gpu()));
  // cudaMemcpyDefault: a peer GPU's memory is read through unified addressing (over
  // NVLink/PCIe with peer access, staged by the driver without).
  CUDA_TRY(ctx_->name(),
           cudaMemcpy2DAsync(static_cast<char*>(whole.data) + c.offset_bytes, c.whole_pitch,
                             part.data, c.width, c.width, c.height, cudaMemcpyDefault,
                             streamHandle(stream)));
  return absl::OkStatus();
}

absl::Status CudaDevice::copyFromHost(const TensorView& src, const TensorView& dst,
                                      Stream& stream) {
  CUDA_TRY(ctx_->name(), cudaSetDevice(gpu()));
  CUDA_TRY(ctx_->name(), cudaMemcpyAsync(dst.data, src.data, static_cast<size_t>(src.bytes()),
                                         cudaMemcpyDefault, streamHandle(stream)));
  return absl::OkStatus();
}

absl::Status CudaDevice::copyToHost(const TensorView& src, const TensorView& dst, Stream& stream) {
  return copyFromHost(src, dst, stream);  // cudaMemcpyDefault finds the direction
}

absl::Status CudaDevice::prepareGraph(const ir::Graph& g) {
  nhwc_ = nhwcValues(g);  // the plan's (assign-layouts)
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Kernel>> CudaDevice::makeKernel(const ir::Node& node) {
  CUDA_TRY(ctx_->name(), cudaSetDevice(gpu()));
  ASSIGN_OR_RETURN(std::unique_ptr<CudaKernel> k, cuda::makeKernel(node, *ctx_, &nhwc_));
  return std::unique_ptr<Kernel>(std::move(k));
}

const Backend& cudaBackend() {
  static const CudaBackend* backend = new CudaBackend();  // lives as long as the process
  return *backend;
}

}  // namespace tandem::backend::cuda
