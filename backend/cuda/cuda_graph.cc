#include "backend/cuda/cuda_graph.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_status.h"

namespace tandem::backend::cuda {
namespace {

constexpr char kWhere[] = "CUDA graph of a step";

class CudaStepRecorder final : public StepRecorder {
 public:
  ~CudaStepRecorder() override {
    if (exec_ != nullptr) {
      cudaSetDevice(origin()->gpu());
      cudaGraphExecDestroy(exec_);
    }
    for (size_t i = 0; i < events_.size(); ++i) {
      cudaSetDevice(event_gpus_[i]);
      cudaEventDestroy(events_[i]);
      cudaEventDestroy(joins_[i]);
    }
  }

  /// The streams, the first device's compute stream first (the capture's origin), one
  /// event per stream for the fork (on the origin's GPU) and each join, and one per
  /// stream for the joins before each replay.
  static absl::StatusOr<std::unique_ptr<CudaStepRecorder>> create(
      absl::Span<Device* const> devices) {
    auto r = std::unique_ptr<CudaStepRecorder>(new CudaStepRecorder());
    std::vector<int> gpus;
    for (Device* d : devices) {
      auto* cd = dynamic_cast<CudaDevice*>(d);
      if (cd == nullptr)
        return absl::InternalError(
            absl::StrCat(ir::toString(d->id()), " is not a CUDA device: no CUDA graph"));
      r->devices_.push_back(cd);
      r->streams_.push_back(&cd->cudaCompute());
      r->streams_.push_back(&cd->cudaComm());
      gpus.push_back(cd->gpu());
    }
    if (r->streams_.empty()) return absl::InternalError("a CUDA graph of no devices");
    RETURN_IF_ERROR(checkRecordable(gpus));
    for (CudaStream* s : r->streams_) {
      cudaEvent_t e = nullptr, join = nullptr;
      CUDA_TRY(kWhere, cudaSetDevice(s->gpu()));
      CUDA_TRY(kWhere, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      r->events_.push_back(e);
      r->event_gpus_.push_back(s->gpu());
      absl::Status made = check(cudaEventCreateWithFlags(&join, cudaEventDisableTiming),
                                "cudaEventCreateWithFlags", kWhere);
      r->joins_.push_back(join);  // null after a failure: destroying it is a harmless error
      RETURN_IF_ERROR(made);
    }
    return r;
  }

  absl::Status begin() override {
    // The workspaces stay where they are from now on: the recording points into them.
    for (CudaDevice* d : devices_) d->context().freezeWorkspace();
    CudaStream* o = origin();
    CUDA_TRY(kWhere, cudaSetDevice(o->gpu()));
    // Thread-local mode: this thread may not make calls that are unsafe during capture
    // (cudaMalloc, synchronizations), while NCCL's own threads are not held to it.
    CUDA_TRY(kWhere, cudaStreamBeginCapture(o->handle(), cudaStreamCaptureModeThreadLocal));
    CUDA_TRY(kWhere, cudaEventRecord(events_[0], o->handle()));
    for (size_t i = 1; i < streams_.size(); ++i)
      CUDA_TRY(kWhere, cudaStreamWaitEvent(streams_[i]->handle(), events_[0], 0));
    return absl::OkStatus();
  }

  absl::Status end() override {
    CudaStream* o = origin();
    // Every stream rejoins the origin, each whatever happened to the others; then the
    // capture ends, even after a failure, so that no stream stays in capture mode.
    absl::Status joined = absl::OkStatus();
    for (size_t i = 1; i < streams_.size(); ++i) {
      absl::Status j = check(cudaSetDevice(streams_[i]->gpu()), "cudaSetDevice", kWhere);
      if (j.ok())
        j = check(cudaEventRecord(events_[i], streams_[i]->handle()), "cudaEventRecord", kWhere);
      if (j.ok())
        j = check(cudaStreamWaitEvent(o->handle(), events_[i], 0), "cudaStreamWaitEvent", kWhere);
      if (joined.ok()) joined = j;
    }
    CUDA_TRY(kWhere, cudaSetDevice(o->gpu()));
    cudaGraph_t graph = nullptr;
    absl::Status ended =
        check(cudaStreamEndCapture(o->handle(), &graph), "cudaStreamEndCapture", kWhere);
    if (ended.ok() && joined.ok())
      ended = check(cudaGraphInstantiate(&exec_, graph, 0), "cudaGraphInstantiate", kWhere);
    if (graph != nullptr) cudaGraphDestroy(graph);  // the executable graph keeps its own copy
    // What the streams noted while capturing belongs to the recording: a failed one is
    // reported here (the executor then runs the step plainly), not by the plain step's
    // synchronize. A capture error is not sticky, but it is this thread's last error.
    absl::Status noted = absl::OkStatus();
    for (CudaStream* s : streams_) {
      absl::Status n = s->takeNotedError();
      if (noted.ok()) noted = n;
    }
    if (!joined.ok() || !ended.ok() || !noted.ok()) {
      (void)cudaGetLastError();
      if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
      exec_ = nullptr;
    }
    RETURN_IF_ERROR(joined);
    RETURN_IF_ERROR(ended);
    return noted;
  }

  absl::Status replay() override {
    if (exec_ == nullptr) return absl::InternalError("replay of a step that was not recorded");
    // The graph launches on the origin alone: it waits for what the other streams were
    // given before (the comm streams' waits for the input pipeline's copies), as the
    // plain step would.
    for (size_t i = 1; i < streams_.size(); ++i) {
      CUDA_TRY(kWhere, cudaSetDevice(streams_[i]->gpu()));
      CUDA_TRY(kWhere, cudaEventRecord(joins_[i], streams_[i]->handle()));
      CUDA_TRY(kWhere, cudaStreamWaitEvent(origin()->handle(), joins_[i], 0));
    }
    CUDA_TRY(kWhere, cudaSetDevice(origin()->gpu()));
    CUDA_TRY(kWhere, cudaGraphLaunch(exec_, origin()->handle()));
    return absl::OkStatus();
  }

 private:
  CudaStepRecorder() = default;
  CudaStream* origin() const { return streams_[0]; }

  std::vector<CudaDevice*> devices_;
  std::vector<CudaStream*> streams_;
  std::vector<cudaEvent_t> events_;
  std::vector<cudaEvent_t> joins_;  // per stream, recorded before each replay
  std::vector<int> event_gpus_;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace

absl::Status checkRecordable(absl::Span<const int> gpus) {
  std::vector<int> distinct(gpus.begin(), gpus.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (distinct.size() <= 1) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      "this process drives ", distinct.size(),
      " GPUs, and NCCL's guide warns that capturing several GPUs' collectives into CUDA graphs "
      "from one thread may deadlock (cudaGraphLaunch can block); one GPU per process "
      "(mpirun) records its steps"));
}

absl::StatusOr<std::unique_ptr<StepRecorder>> makeCudaStepRecorder(
    absl::Span<Device* const> devices) {
  ASSIGN_OR_RETURN(std::unique_ptr<CudaStepRecorder> r, CudaStepRecorder::create(devices));
  return std::unique_ptr<StepRecorder>(std::move(r));
}

}  // namespace tandem::backend::cuda
