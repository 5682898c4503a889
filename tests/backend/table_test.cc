#include "backend/cpu/kernels.h"
#include "backend/kernel_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tandem::testing {
namespace {

using ::testing::HasSubstr;

// The runtime executes inputs, params and collectives itself (the spec's `runtime`
// trait); the table says so instead of handing out a kernel.
TEST(CpuKernelTable, RuntimeOpsHaveNoKernel) {
  SingleOp op(ir::Op::kAllReduce, {f32({4}), f32({4})},
              {{"op", ir::EnumWord{"sum"}},
               {"bucket", int64_t{0}},
               {"devices", std::vector<ir::Device>{*ir::parseDevice("cpu:0")}}});
  auto k = backend::cpu::makeKernel(op.node(), op.ctx());
  ASSERT_FALSE(k.ok());
  EXPECT_THAT(k.status().message(), HasSubstr("has no CPU kernel: the runtime executes it itself"));
}

// Exactly the ops the CPU backend has no kernel for: none.
TEST(CpuKernelTable, LacksNoOp) {
  EXPECT_EQ(backend::cpu::kernelTable().lacking(), std::vector<ir::Op>{});
  for (const ir::OpInfo& info : ir::allOps())
    EXPECT_EQ(backend::cpu::kernelTable().has(info.op), !info.has(ir::kRuntime)) << info.name;
}

// An op a backend lacks is an error naming the node, its device and the backend, made
// when the kernel is asked for (at load), never a crash.
TEST(KernelTable, AnOpTheBackendLacksIsAnErrorNamingNodeDeviceAndBackend) {
  using Table =
      backend::KernelTable<backend::cpu::KernelInit, std::unique_ptr<backend::cpu::CpuKernel>>;
  Table table("TEST");  // no factory at all
  SingleOp op(ir::Op::kRelu, {f32({4})});
  backend::cpu::KernelInit init{op.node(), op.ctx()};
  auto k = table.make(op.node(), init);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(k.status().message(), HasSubstr("(relu @cpu:0)"));
  EXPECT_THAT(k.status().message(), HasSubstr("the TEST backend has no kernel for relu"));
  EXPECT_THAT(table.lacking(), ::testing::Contains(ir::Op::kRelu));
}

}  // namespace
}  // namespace tandem::testing
