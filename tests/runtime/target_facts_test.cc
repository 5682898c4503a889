// What the compiler and the CLI ask of a device kind's target facts (ir/target.h) instead
// of testing its name: whether its kernels compute in bf16 (--precision bf16), and the
// facts line `tandem devices` prints for every kind.

#include <string>

#include "backend/backend.h"
#include "backend/backends.h"
#include "frontend/zoo/zoo.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/target.h"
#include "tests/device_kinds.h"
#include "train/compile.h"

namespace tandem::testing {
namespace {

using ::testing::HasSubstr;

TEST(TargetFacts, Bf16NeedsKernelsThatComputeInIt) {
  backend::registerBackends();
  ir::registerTarget({.kind = kind("f32only"),
                      .display_name = "F32-only",
                      .alignment = 64,
                      .dtypes = {ir::DType::kF32, ir::DType::kI32, ir::DType::kF64}});
  auto spec = zoo::modelByName("lenet");
  ASSERT_TRUE(spec.ok()) << spec.status();
  training::CompileOptions c;
  c.build.batch = 8;
  c.pipeline.devices = {ir::Device{kind("f32only"), 0}};
  c.pipeline.bf16 = true;
  auto low = training::compileModel(*spec, c);
  ASSERT_FALSE(low.ok());
  EXPECT_EQ(low.status().message(),
            "precision bf16: f32only:0 is a F32-only device, whose kernels do not compute in "
            "bf16");
  c.pipeline.bf16 = false;  // the same model compiles for it in f32
  auto full = training::compileModel(*spec, c);
  EXPECT_TRUE(full.ok()) << full.status();
}

TEST(TargetFacts, DevicesPrintsEachKindsFacts) {
  backend::registerBackends();
  EXPECT_EQ(ir::describeTarget(*ir::findTarget(kind("cpu"))),
            "arenas aligned to 64 B; activations nChw16c between the kernels that take it; "
            "computes in f32, bf16, i32, f64, i64; optimizer updates one kernel per tensor; steps "
            "run kernel by kernel; collectives across processes (mpirun)");
  // The CUDA target's facts are known in every build, with or without its backend.
  EXPECT_THAT(backend::describeBackends(),
              HasSubstr("  compiles for: arenas aligned to 256 B; activations NHWC between the "
                        "kernels that take it; computes in f32, bf16, i32, f64, i64; optimizer "
                        "updates grouped into one launch; steps recorded once and replayed; "
                        "collectives across processes (mpirun); logical devices may share one "
                        "(cuda:0.1)\n"));
}

}  // namespace
}  // namespace tandem::testing
