// The cast of a model's i64 ids and labels to i32 (issue 42): the CPU kernel, and the
// per-element math it shares with the CUDA kernel (backend/narrow_ids.h). Values of i32
// pass unchanged; values past it saturate, so that none wraps into an index range.

#include <cstdint>
#include <limits>
#include <vector>

#include "backend/narrow_ids.h"
#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tandem::testing {
namespace {

constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();

const std::vector<int64_t>& narrowCases() {
  static const std::vector<int64_t> v = {0,
                                         5,
                                         -1,
                                         kI32Max,
                                         kI32Min,
                                         kI32Max + 1,
                                         kI32Min - 1,
                                         (int64_t{1} << 32) + 3,  // would wrap to 3
                                         -(int64_t{1} << 40),
                                         std::numeric_limits<int64_t>::max(),
                                         std::numeric_limits<int64_t>::min()};
  return v;
}

int32_t saturated(int64_t v) {
  return static_cast<int32_t>(v < kI32Min ? kI32Min : v > kI32Max ? kI32Max : v);
}

TEST(NarrowIds, TheCpuCastKeepsI32ValuesAndSaturatesTheRest) {
  const std::vector<int64_t>& values = narrowCases();
  const int64_t n = static_cast<int64_t>(values.size());
  SingleOp cast(ir::Op::kCast, {ir::TensorType{ir::DType::kI64, {n}}},
                {{"dtype", ir::EnumWord{"i32"}}});
  for (int64_t i = 0; i < n; ++i)
    reinterpret_cast<int64_t*>(cast.in(0).view().data)[i] = values[static_cast<size_t>(i)];
  cast.run();
  ASSERT_EQ(cast.out().type().dtype, ir::DType::kI32);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = values[static_cast<size_t>(i)];
    EXPECT_EQ(cast.out().i32()[i], saturated(v)) << v;
  }
}

TEST(NarrowIds, TheSharedMathIsTheCpuKernels) {
  for (int64_t v : narrowCases()) EXPECT_EQ(backend::narrowId(v), saturated(v)) << v;
}

}  // namespace
}  // namespace tandem::testing
