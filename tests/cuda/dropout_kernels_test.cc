// dropout's CUDA kernel. Without a GPU: the per-thread math the kernel runs
// (dropout_math.h's dropoutThread: the mask at the step read from @step's memory, from
// the node's sample_offset on), compiled here, against the CPU kernel of the same node, bit
// for bit, f32 and bf16, at several steps. With a GPU: the kernel made from the node,
// launched again after @step's memory changes (as a replayed recording would be: the
// step is no launch argument), against the CPU kernel at each step.

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cuda/dropout_math.h"
#include "backend/dropout_node.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/device_kinds.h"

namespace tandem::testing {
namespace {

namespace cu = backend::cuda;
constexpr uint64_t kSeed = 1234;

/// A dropout node on x (rows of 3 x 11 = 33 elements: not a multiple of 4) whose rows are
/// rows 17.. of the whole batch, reading @step; its buffers (x random) and its CPU kernel.
struct DropoutNode {
  ir::Module module{"dropout"};
  ir::Node* node = nullptr;
  std::unique_ptr<Buffer> x, step, cpu_y, gpu_y;
  backend::cpu::CpuContext ctx{ir::Device{kind("cpu"), 0}, kSeed};
  std::unique_ptr<backend::cpu::CpuKernel> cpu_kernel;

  DropoutNode(ir::DType dtype, int64_t rows, uint32_t fill_seed) {
    const ir::Device cpu{kind("cpu"), 0};
    EXPECT_TRUE(module
                    .addVar({std::string(ir::kStepVar),
                             ir::TensorType{ir::DType::kI32, {1}},
                             ir::VarRole::kFed,
                             {}})
                    .ok());
    ir::Graph* g = *module.addGraph("g");
    auto in = g->create(ir::NodeSpec{.op = ir::Op::kInput,
                                     .device = cpu,
                                     .names = {"x"},
                                     .declared_types = {ir::TensorType{dtype, {rows, 3, 11}}}});
    auto read = g->create(
        ir::ParamArgs{.var = std::string(ir::kStepVar)}.spec({.device = cpu, .names = {"step"}}));
    EXPECT_TRUE(in.ok() && read.ok());
    auto n = g->create(ir::DropoutArgs{.x = (*in)->result(),
                                       .step = (*read)->result(),
                                       .p = 0.35,
                                       .mask_id = 3,
                                       .sample_offset = 17}
                           .spec({.device = cpu, .names = {"drop"}}));
    EXPECT_TRUE(n.ok()) << n.status();
    node = *n;
    x = std::make_unique<Buffer>(node->operand(0)->type());
    step = std::make_unique<Buffer>(node->operand(1)->type());
    cpu_y = std::make_unique<Buffer>(node->result()->type());
    gpu_y = std::make_unique<Buffer>(node->result()->type());
    std::mt19937 rng(fill_seed);
    std::uniform_real_distribution<float> d(-3.0f, 3.0f);
    for (int64_t i = 0; i < x->size(); ++i) {
      if (dtype == ir::DType::kBF16)
        x->bf16()[i] = d(rng);
      else
        x->f32()[i] = d(rng);
    }
    auto k = backend::cpu::makeKernel(*node, ctx);
    EXPECT_TRUE(k.ok()) << k.status();
    if (k.ok()) cpu_kernel = std::move(*k);
  }

  /// The CPU kernel's y at the step in `step`.
  void runCpu() {
    ASSERT_NE(cpu_kernel, nullptr);
    ASSERT_TRUE(cpu_kernel->runHere({x->view(), step->view()}, {cpu_y->view()}).ok());
  }
  /// Whether the two y buffers hold the same bytes.
  bool same() const {
    return std::memcmp(cpu_y->view().data, gpu_y->view().data,
                       static_cast<size_t>(cpu_y->type().bytes())) == 0;
  }
};

TEST(CudaDropoutMath, ThreadsDrawTheCpuKernelsMaskBitForBit) {
  for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16}) {
    SCOPED_TRACE(ir::dtypeName(t));
    DropoutNode d(t, /*rows=*/5, /*fill_seed=*/5);
    const backend::DropoutMask mask = backend::dropoutMaskOf(*d.node, kSeed);
    const backend::DropoutRows rows = backend::dropoutRowsOf(*d.node);
    ASSERT_EQ(rows.first, 17);
    ASSERT_EQ(rows.per_row, 33);
    const int64_t groups = (rows.per_row + 7) / 8;
    for (int32_t s : {0, 7, 123456}) {
      d.step->i32()[0] = s;
      d.runCpu();
      std::memset(d.gpu_y->view().data, 0xFF, static_cast<size_t>(d.gpu_y->type().bytes()));
      for (int64_t th = 0; th < rows.rows * groups; ++th) {
        if (t == ir::DType::kBF16)
          cu::dropoutThread(mask, d.step->i32(), rows.first, rows.per_row, groups, th,
                            reinterpret_cast<const uint16_t*>(d.x->bf16()),
                            reinterpret_cast<uint16_t*>(d.gpu_y->bf16()));
        else
          cu::dropoutThread(mask, d.step->i32(), rows.first, rows.per_row, groups, th, d.x->f32(),
                            d.gpu_y->f32());
      }
      EXPECT_TRUE(d.same()) << "step " << s;
    }
  }
}

TEST(CudaDropoutKernels, MatchCpuAtTheStepWrittenBetweenLaunches) {
  TANDEM_SKIP_WITHOUT_GPU();
  for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16}) {
    SCOPED_TRACE(ir::dtypeName(t));
    DropoutNode d(t, /*rows=*/4099, /*fill_seed=*/6);  // more threads than a block
    auto device = backend::cuda::cudaBackend().createDevice(ir::Device{kind("cuda"), 0},
                                                            backend::DeviceOptions{.seed = kSeed});
    ASSERT_TRUE(device.ok()) << device.status();
    backend::Device& dev = **device;
    auto kernel = dev.makeKernel(*d.node);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    auto dx = dev.allocate(d.x->type().bytes());
    auto dstep = dev.allocate(d.step->type().bytes());
    auto dy = dev.allocate(d.gpu_y->type().bytes());
    ASSERT_TRUE(dx.ok() && dstep.ok() && dy.ok());
    const backend::TensorView vx = dx->view(d.x->type()), vstep = dstep->view(d.step->type()),
                              vy = dy->view(d.gpu_y->type());
    backend::Stream& s = dev.computeStream();
    ASSERT_TRUE(dev.copyFromHost(d.x->view(), vx, s).ok());
    for (int32_t at : {3, 4, 1000}) {
      d.step->i32()[0] = at;
      ASSERT_TRUE(dev.copyFromHost(d.step->view(), vstep, s).ok());
      ASSERT_TRUE((*kernel)->launch(s, {vx, vstep}, {vy}).ok());
      ASSERT_TRUE(dev.copyToHost(vy, d.gpu_y->view(), s).ok());
      ASSERT_TRUE(s.synchronize().ok());
      d.runCpu();
      EXPECT_TRUE(d.same()) << "step " << at;
    }
  }
}

}  // namespace
}  // namespace tandem::testing
