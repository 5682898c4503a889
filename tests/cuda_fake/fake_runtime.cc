#include "tests/cuda_fake/fake_runtime.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace tandem::testing::fake_cuda {
namespace {

std::mutex mu;
std::map<const void*, int> stream_ids;   // cudaStream_t -> its number
std::map<const void*, double> recorded;  // cudaEvent_t -> the GPU time of its record
int next_stream = 1;
double clock_ms = 0;

std::string streamName(cudaStream_t s) {
  if (s == nullptr) return "s0";
  auto it = stream_ids.find(s);
  return it == stream_ids.end() ? "s?" : absl::StrCat("s", it->second);
}

void log(std::string line) { calls().push_back(std::move(line)); }

// Handles are distinct heap addresses, freed when destroyed.
void* newHandle() { return std::malloc(16); }

}  // namespace

std::vector<std::string>& calls() {
  static auto* c = new std::vector<std::string>;
  return *c;
}
double& gpuMilliseconds() { return clock_ms; }
void reset() {
  std::lock_guard<std::mutex> l(mu);
  calls().clear();
}

}  // namespace tandem::testing::fake_cuda

using namespace tandem::testing::fake_cuda;

// ---- CUDA runtime --------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int) { return cudaSuccess; }
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaGetLastError() { return cudaSuccess; }
cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  *least = 0;
  *greatest = -5;
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned int, int) {
  std::lock_guard<std::mutex> l(mu);
  *s = static_cast<cudaStream_t>(newHandle());
  stream_ids[*s] = next_stream++;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  std::lock_guard<std::mutex> l(mu);
  log("cudaStreamSynchronize " + streamName(s));
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  std::lock_guard<std::mutex> l(mu);
  stream_ids.erase(s);
  std::free(s);
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  std::lock_guard<std::mutex> l(mu);
  log("cudaDeviceSynchronize");
  return cudaSuccess;
}
cudaError_t cudaMalloc(void** p, size_t bytes) {
  std::lock_guard<std::mutex> l(mu);
  *p = std::malloc(bytes);
  log(absl::StrCat("cudaMalloc ", bytes));
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  std::lock_guard<std::mutex> l(mu);
  std::memset(p, value, bytes);
  log("cudaMemset");  // the legacy default stream
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s) {
  std::lock_guard<std::mutex> l(mu);
  std::memset(p, value, bytes);
  log("cudaMemsetAsync " + streamName(s));
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = static_cast<cudaEvent_t>(newHandle());
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int) { return cudaEventCreate(e); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  std::lock_guard<std::mutex> l(mu);
  recorded.erase(e);
  std::free(e);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  std::lock_guard<std::mutex> l(mu);
  recorded[e] = clock_ms;
  log("cudaEventRecord " + streamName(s));
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  std::lock_guard<std::mutex> l(mu);
  *ms = static_cast<float>(recorded.at(end) - recorded.at(start));
  return cudaSuccess;
}
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* data) {
  {
    std::lock_guard<std::mutex> l(mu);
    log("cudaLaunchHostFunc " + streamName(s));
  }
  fn(data);
  return cudaSuccess;
}

// ---- cuDNN, cuBLAS, cuBLASLt: handles only --------------------------------------------

cudnnStatus_t cudnnCreate(cudnnHandle_t* h) {
  *h = static_cast<cudnnHandle_t>(newHandle());
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t h) {
  std::free(h);
  return CUDNN_STATUS_SUCCESS;
}
cublasStatus_t cublasCreate_v2(cublasHandle_t* h) {
  *h = static_cast<cublasHandle_t>(newHandle());
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
  std::free(h);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
  *h = static_cast<cublasLtHandle_t>(newHandle());
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  std::free(h);
  return CUBLAS_STATUS_SUCCESS;
}
