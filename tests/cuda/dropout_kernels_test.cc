// dropout's CUDA kernel. Without a GPU: the per-thread math the kernel runs
// (activation_math.h's dropoutThread: the mask at the step read from @step's memory, from
// the node's sample_offset on), compiled here, against the CPU kernel of the same node, bit
// for bit, f32 and bf16, at several steps. With a GPU: the kernel made from the node,
// launched again after @step's memory changes (as a replayed recording would be: the
// step is no launch argument), against the CPU kernel at each step.

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cuda/activation_math.h"
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
/// rows 17.. of the whole batch, reading @step.
struct DropoutNode {
  ir::Module module{"dropout"};
  ir::Node* node = nullptr;
  explicit DropoutNode(ir::DType dtype, int64_t rows = 5) {
    const ir::Device cpu{kind("cpu"), 0};
    EXPECT_TRUE(module
                    .addVar({std::string(ir::kStepVar), ir::TensorType{ir::DType::kI32, {1}},
                             ir::VarRole::kFed, {}})
                    .ok());
    ir::Graph* g = *module.addGraph("g");
    auto x = g->create(ir::NodeSpec{.op = ir::Op::kInput,
                                    .device = cpu,
                                    .names = {"x"},
                                    .declared_types = {ir::TensorType{dtype, {rows, 3, 11}}}});
    auto step = g->create(ir::ParamArgs{.var = std::string(ir::kStepVar)}.spec(
        {.device = cpu, .names = {"step"}}));
    EXPECT_TRUE(x.ok() && step.ok());
    auto n = g->create(ir::DropoutArgs{.x = (*x)->result(),
                                       .step = (*step)->result(),
                                       .p = 0.35,
                                       .mask_id = 3,
                                       .sample_offset = 17}
                           .spec({.device = cpu, .names = {"drop"}}));
    EXPECT_TRUE(n.ok()) << n.status();
    node = *n;
  }
};

void fillX(Buffer& x, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  for (int64_t i = 0; i < x.size(); ++i) {
    if (x.type().dtype == ir::DType::kBF16)
      x.bf16()[i] = d(rng);
    else
      x.f32()[i] = d(rng);
  }
}

bool sameBytes(Buffer& a, Buffer& b) {
  return a.type() == b.type() && std::memcmp(a.view().data, b.view().data,
                                             static_cast<size_t>(a.type().bytes())) == 0;
}

TEST(CudaDropoutMath, ThreadsDrawTheCpuKernelsMaskBitForBit) {
  for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16}) {
    SCOPED_TRACE(ir::dtypeName(t));
    DropoutNode d(t);
    std::mt19937 rng(5);
    Buffer x(d.node->operand(0)->type()), step(d.node->operand(1)->type()),
        cpu_y(d.node->result()->type()), gpu_y(d.node->result()->type());
    fillX(x, rng);
    backend::cpu::CpuContext ctx(ir::Device{kind("cpu"), 0}, kSeed);
    auto k = backend::cpu::makeKernel(*d.node, ctx);
    ASSERT_TRUE(k.ok()) << k.status();
    const backend::DropoutMask mask = backend::dropoutMaskOf(*d.node, kSeed);
    const backend::DropoutRows rows = backend::dropoutRowsOf(*d.node);
    ASSERT_EQ(rows.first, 17);
    ASSERT_EQ(rows.per_row, 33);
    const int64_t groups = (rows.per_row + 3) / 4;
    for (int32_t s : {0, 7, 123456}) {
      step.i32()[0] = s;
      ASSERT_TRUE((*k)->runHere({x.view(), step.view()}, {cpu_y.view()}).ok());
      std::memset(gpu_y.view().data, 0xFF, static_cast<size_t>(gpu_y.type().bytes()));
      for (int64_t th = 0; th < rows.rows * groups; ++th) {
        if (t == ir::DType::kBF16)
          cu::dropoutThread(mask, step.i32(), rows.first, rows.per_row, groups, th,
                            reinterpret_cast<const uint16_t*>(x.bf16()),
                            reinterpret_cast<uint16_t*>(gpu_y.bf16()));
        else
          cu::dropoutThread(mask, step.i32(), rows.first, rows.per_row, groups, th, x.f32(),
                            gpu_y.f32());
      }
      EXPECT_TRUE(sameBytes(gpu_y, cpu_y)) << "step " << s;
    }
  }
}

TEST(CudaDropoutKernels, MatchCpuAtTheStepWrittenBetweenLaunches) {
  TANDEM_SKIP_WITHOUT_GPU();
  for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16}) {
    SCOPED_TRACE(ir::dtypeName(t));
    DropoutNode d(t, /*rows=*/4099);  // more threads than one block, a tail per row
    std::mt19937 rng(6);
    Buffer x(d.node->operand(0)->type()), step(d.node->operand(1)->type()),
        cpu_y(d.node->result()->type()), gpu_y(d.node->result()->type());
    fillX(x, rng);
    backend::cpu::CpuContext ctx(ir::Device{kind("cpu"), 0}, kSeed);
    auto cpu_kernel = backend::cpu::makeKernel(*d.node, ctx);
    ASSERT_TRUE(cpu_kernel.ok()) << cpu_kernel.status();
    auto device = backend::cuda::cudaBackend().createDevice(ir::Device{kind("cuda"), 0},
                                                            backend::DeviceOptions{.seed = kSeed});
    ASSERT_TRUE(device.ok()) << device.status();
    backend::Device& dev = **device;
    auto kernel = dev.makeKernel(*d.node);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    auto dx = dev.allocate(x.type().bytes());
    auto dstep = dev.allocate(step.type().bytes());
    auto dy = dev.allocate(gpu_y.type().bytes());
    ASSERT_TRUE(dx.ok() && dstep.ok() && dy.ok());
    const backend::TensorView vx = dx->view(x.type()), vstep = dstep->view(step.type()),
                              vy = dy->view(gpu_y.type());
    backend::Stream& s = dev.computeStream();
    ASSERT_TRUE(dev.copyFromHost(x.view(), vx, s).ok());
    for (int32_t at : {3, 4, 1000}) {
      step.i32()[0] = at;
      ASSERT_TRUE(dev.copyFromHost(step.view(), vstep, s).ok());
      ASSERT_TRUE((*kernel)->launch(s, {vx, vstep}, {vy}).ok());
      ASSERT_TRUE(dev.copyToHost(vy, gpu_y.view(), s).ok());
      ASSERT_TRUE(s.synchronize().ok());
      ASSERT_TRUE((*cpu_kernel)->runHere({x.view(), step.view()}, {cpu_y.view()}).ok());
      EXPECT_TRUE(sameBytes(gpu_y, cpu_y)) << "step " << at;
    }
  }
}

}  // namespace
}  // namespace tandem::testing
