#include "backend/cuda/nccl_watch.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_status.h"

namespace tandem::backend::cuda {

NcclWatch::NcclWatch(std::string group, std::vector<Rank> ranks, std::unique_ptr<Probe> probe)
    : group_(std::move(group)), ranks_(std::move(ranks)), probe_(std::move(probe)) {}

NcclWatch::~NcclWatch() {
  for (Collective& c : collectives_) {
    const int gpu = ranks_[c.rank].gpu;
    if (c.start != nullptr) probe_->destroyEvent(gpu, c.start);
    if (c.end != nullptr) probe_->destroyEvent(gpu, c.end);
  }
}

absl::StatusOr<size_t> NcclWatch::begin(size_t i, const std::string& label, cudaStream_t stream) {
  std::lock_guard<std::mutex> l(mu_);
  size_t at = 0;
  while (at < collectives_.size() &&
         (collectives_[at].rank != i || collectives_[at].label != label))
    ++at;
  const int gpu = ranks_[i].gpu;
  if (at == collectives_.size()) {
    Collective c{i, label};
    RETURN_IF_ERROR(probe_->createEvent(gpu, &c.start));
    absl::Status made = probe_->createEvent(gpu, &c.end);
    if (!made.ok()) {
      probe_->destroyEvent(gpu, c.start);
      return made;
    }
    collectives_.push_back(std::move(c));
  }
  RETURN_IF_ERROR(probe_->record(gpu, collectives_[at].start, stream));
  return at;
}

absl::Status NcclWatch::end(size_t collective, cudaStream_t stream) {
  std::lock_guard<std::mutex> l(mu_);
  Collective& c = collectives_[collective];
  return probe_->record(ranks_[c.rank].gpu, c.end, stream);
}

AsyncWaits::State NcclWatch::poll() {
  std::lock_guard<std::mutex> l(mu_);
  State state;
  if (aborted_) return state;
  const double now = probe_->now();
  std::vector<const Collective*> waiting_on(ranks_.size(), nullptr);  // by local rank
  for (Collective& c : collectives_) {
    const int gpu = ranks_[c.rank].gpu;
    if (!probe_->done(gpu, c.start) || probe_->done(gpu, c.end)) {
      c.since = -1;
      continue;
    }
    if (c.since < 0) c.since = now;
    const double waited = now - c.since;
    if (waiting_on[c.rank] == nullptr || waiting_on[c.rank]->since > c.since)
      waiting_on[c.rank] = &c;
    if (state.seconds == 0 || waited > state.seconds) {
      state.seconds = waited;
      state.label = {c.label, ranks_[c.rank].device};
    }
  }
  // A communicator's asynchronous error stops the run whatever waits.
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const ncclResult_t e = probe_->asyncError(ranks_[i].comm);
    if (e == ncclSuccess || e == ncclInProgress) continue;
    const std::string last = probe_->lastError(ranks_[i].comm);
    state.error = absl::StrCat(
        "NCCL reported ", ncclGetErrorString(e), last.empty() ? "" : absl::StrCat(" (", last, ")"),
        " on ", ranks_[i].device, " (rank ", ranks_[i].rank, " of ", group_, ")",
        waiting_on[i] != nullptr ? absl::StrCat(" in ", waiting_on[i]->label) : "");
    break;
  }
  return state;
}

void NcclWatch::abort() {
  std::lock_guard<std::mutex> l(mu_);
  if (aborted_) return;
  aborted_ = true;
  for (const Rank& r : ranks_) probe_->abort(r.comm);
}

namespace {

class RealProbe final : public NcclWatch::Probe {
 public:
  absl::Status createEvent(int gpu, cudaEvent_t* event) override {
    CUDA_TRY("the NCCL watchdog's events", cudaSetDevice(gpu));
    CUDA_TRY("the NCCL watchdog's events", cudaEventCreateWithFlags(event, cudaEventDisableTiming));
    return absl::OkStatus();
  }
  void destroyEvent(int gpu, cudaEvent_t event) override {
    cudaSetDevice(gpu);
    cudaEventDestroy(event);
  }
  absl::Status record(int gpu, cudaEvent_t event, cudaStream_t stream) override {
    CUDA_TRY("the NCCL watchdog's events", cudaSetDevice(gpu));
    // External only while the stream is being captured (so that the recorded step's replay
    // records the event too): outside capture CUDA refuses the flag (cudaErrorIllegalState,
    // seen on the first GPU run).
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CUDA_TRY("the NCCL watchdog's events", cudaStreamIsCapturing(stream, &capture));
    CUDA_TRY("the NCCL watchdog's events",
             cudaEventRecordWithFlags(event, stream,
                                      capture == cudaStreamCaptureStatusActive
                                          ? cudaEventRecordExternal
                                          : cudaEventRecordDefault));
    return absl::OkStatus();
  }
  bool done(int gpu, cudaEvent_t event) override {
    // The watchdog thread's own current device; a query that is not ready is no error.
    if (cudaSetDevice(gpu) != cudaSuccess) return false;
    return cudaEventQuery(event) == cudaSuccess;
  }
  ncclResult_t asyncError(ncclComm_t comm) override {
    ncclResult_t e = ncclSuccess;
    const ncclResult_t asked = ncclCommGetAsyncError(comm, &e);
    return asked != ncclSuccess ? asked : e;
  }
  std::string lastError(ncclComm_t comm) override {
    const char* text = ncclGetLastError(comm);
    return text != nullptr ? text : "";
  }
  void abort(ncclComm_t comm) override { ncclCommAbort(comm); }
  double now() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace

std::unique_ptr<NcclWatch::Probe> realNcclProbe() { return std::make_unique<RealProbe>(); }

}  // namespace tandem::backend::cuda
