#include "backend/cpu/kernels.h"
#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tandem::testing {
namespace {

// The runtime executes inputs, params and collectives itself; the table says so instead
// of handing out a kernel.
TEST(CpuKernelTable, RuntimeOpsHaveNoKernel) {
  SingleOp op(ir::Op::kAllReduce, {f32({4}), f32({4})},
              {{"op", ir::EnumWord{"sum"}},
               {"bucket", int64_t{0}},
               {"devices", std::vector<ir::Device>{{ir::DeviceKind::kCpu, 0}}}});
  auto k = backend::cpu::makeKernel(op.node(), op.ctx());
  EXPECT_FALSE(k.ok());
}

}  // namespace
}  // namespace tandem::testing
