#include "backend/cuda/cuda_stream.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_status.h"

namespace tandem::backend::cuda {

CudaEvent::~CudaEvent() {
  cudaSetDevice(gpu_);
  cudaEventDestroy(event_);
}

void CudaEvent::synchronize() {
  // An error here is a failure of the work before the record, which the stream's
  // synchronize reports with its context.
  (void)cudaEventSynchronize(event_);
}

absl::StatusOr<std::unique_ptr<CudaStream>> CudaStream::create(const Backend& backend,
                                                               std::string name, int gpu,
                                                               bool high_priority) {
  CUDA_TRY(name, cudaSetDevice(gpu));
  int least = 0, greatest = 0;
  CUDA_TRY(name, cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t s = nullptr;
  CUDA_TRY(name, cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking,
                                              high_priority ? greatest : least));
  return std::unique_ptr<CudaStream>(new CudaStream(backend, std::move(name), gpu, s));
}

CudaStream::~CudaStream() {
  cudaSetDevice(gpu_);
  cudaStreamSynchronize(stream_);
  resolveStamps();
  for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
  cudaStreamDestroy(stream_);
}

void CudaStream::noteError(absl::Status s) {
  if (pending_.ok()) pending_ = std::move(s);
}

void CudaStream::record(Event& event) {
  auto& e = static_cast<CudaEvent&>(event);
  noteError(check(cudaEventRecord(e.handle(), stream_), "cudaEventRecord", name_));
}

void CudaStream::wait(Event& event) {
  auto& e = static_cast<CudaEvent&>(event);
  noteError(check(cudaStreamWaitEvent(stream_, e.handle(), 0), "cudaStreamWaitEvent", name_));
}

std::unique_ptr<Event> CudaStream::createEvent() {
  cudaEvent_t e = nullptr;
  absl::Status s = check(cudaSetDevice(gpu_), "cudaSetDevice", name_);
  if (s.ok())
    s = check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags",
              name_);
  noteError(s);
  return std::make_unique<CudaEvent>(e, gpu_);
}

namespace {

void runHostFunction(void* data) {
  auto* fn = static_cast<absl::AnyInvocable<void() &&>*>(data);
  std::move (*fn)();
  delete fn;
}

}  // namespace

void CudaStream::hostCallback(absl::AnyInvocable<void() &&> fn) {
  auto* heap = new absl::AnyInvocable<void() &&>(std::move(fn));
  absl::Status s = check(cudaLaunchHostFunc(stream_, runHostFunction, heap),
                         "cudaLaunchHostFunc", name_);
  if (!s.ok()) delete heap;
  noteError(std::move(s));
}

void CudaStream::stamp(absl::AnyInvocable<void(int64_t ns) &&> done) {
  cudaEvent_t e = nullptr;
  absl::Status s = check(cudaSetDevice(gpu_), "cudaSetDevice", name_);
  if (s.ok() && !free_events_.empty()) {
    e = free_events_.back();
    free_events_.pop_back();
  } else if (s.ok()) {
    s = check(cudaEventCreate(&e), "cudaEventCreate (timing)", name_);
  }
  if (s.ok()) s = check(cudaEventRecord(e, stream_), "cudaEventRecord (timing)", name_);
  if (!s.ok()) {
    if (e != nullptr) free_events_.push_back(e);
    noteError(std::move(s));
    std::move(done)(steadyNowNs());  // an entry without a time of its own, not a lost one
    return;
  }
  stamps_.push_back({e, std::move(done)});
}

void CudaStream::resolveStamps() {
  if (stamps_.empty()) return;
  cudaEvent_t now = nullptr;
  bool timed = cudaSetDevice(gpu_) == cudaSuccess && cudaEventCreate(&now) == cudaSuccess &&
               cudaEventRecord(now, stream_) == cudaSuccess &&
               cudaEventSynchronize(now) == cudaSuccess;
  const int64_t host_now = steadyNowNs();
  for (Stamp& st : stamps_) {
    float ms = 0;
    const bool read = timed && cudaEventElapsedTime(&ms, st.event, now) == cudaSuccess;
    std::move(st.done)(read ? host_now - static_cast<int64_t>(static_cast<double>(ms) * 1e6)
                            : host_now);
    free_events_.push_back(st.event);
  }
  stamps_.clear();
  if (now != nullptr) cudaEventDestroy(now);
  (void)cudaGetLastError();  // a failed read is the trace's loss, not the next kernel's error
}

absl::Status CudaStream::synchronize() {
  absl::Status s = check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", name_);
  resolveStamps();
  if (!pending_.ok()) s = std::exchange(pending_, absl::OkStatus());
  return s;
}

CudaStream* asCudaStream(Stream& stream) { return dynamic_cast<CudaStream*>(&stream); }

}  // namespace tandem::backend::cuda
