// Which steps the CUDA backend records as CUDA graphs (backend/cuda/cuda_graph.h): those
// of one GPU per process, however many logical devices share it. Several GPUs driven by
// one thread run plain steps, after one warning: NCCL's guide warns that capturing their
// collectives may deadlock. The executor's fallback is tested on the recording backend
// (tests/runtime/executor_failures_test.cc); the GPU test with two GPUs is
// CudaTraining.SeveralGpusInOneProcessRunPlainStepsWithOneWarning.

#include <string>

#include "backend/cuda/cuda_graph.h"
#include "gtest/gtest.h"

namespace tandem::testing {
namespace {

namespace cu = backend::cuda;

TEST(CudaStepRecording, OneGpuPerProcessRecords) {
  EXPECT_TRUE(cu::checkRecordable({0}).ok());
  EXPECT_TRUE(cu::checkRecordable({0, 0, 0}).ok());  // logical devices sharing GPU 0
  EXPECT_TRUE(cu::checkRecordable({1, 1}).ok());
}

TEST(CudaStepRecording, SeveralGpusInOneProcessDoNotSayingWhy) {
  const absl::Status s = cu::checkRecordable({0, 1, 0});
  ASSERT_FALSE(s.ok());
  const std::string m(s.message());
  EXPECT_NE(m.find("drives 2 GPUs"), std::string::npos) << m;
  EXPECT_NE(m.find("NCCL"), std::string::npos) << m;
  EXPECT_NE(m.find("one GPU per process"), std::string::npos) << m;
}

}  // namespace
}  // namespace tandem::testing
