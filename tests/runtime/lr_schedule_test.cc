// The learning-rate schedules of `tandem train --schedule/--warmup` against an outside
// oracle: PyTorch 1.13's schedulers stepped once per update
// (tests/data/gen_lr_schedule_ref.py wrote the lrs), and the flags' errors.

#include <cmath>
#include <string>

#include "gtest/gtest.h"
#include "runtime/lr_schedule.h"
#include "tests/cores/ref_case.h"

namespace tandem::testing {
namespace {

class LrScheduleRef : public ::testing::TestWithParam<const char*> {};

// Tolerance: the file holds PyTorch's lrs rounded to f32 (%.9g of a float, 6e-8
// relative), and PyTorch's chainable cosine is a recurrence that drifts from the closed
// form by a few 1e-16; 1e-7 relative (plus 1e-9 near the cosine's end at 0) is above
// both and far below a factor off by one update (at least 1e-3 here).
TEST_P(LrScheduleRef, FactorsArePyTorchsLrs) {
  absl::StatusOr<RefCase> ref = RefCase::load(GetParam());
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto schedule = runtime::LrSchedule::parse(ref->text("schedule"), ref->integer("warmup"),
                                             ref->integer("steps_per_epoch"),
                                             ref->integer("epochs"));
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  const RefTensor& lr = ref->tensor("lr");
  ASSERT_EQ(static_cast<int64_t>(lr.values.size()),
            ref->integer("steps_per_epoch") * ref->integer("epochs"));
  for (size_t s = 0; s < lr.values.size(); ++s)
    EXPECT_NEAR(schedule->factor(static_cast<int64_t>(s)), lr.values[s],
                1e-7 * std::abs(lr.values[s]) + 1e-9)
        << GetParam() << ", update " << s;
}

INSTANTIATE_TEST_SUITE_P(PyTorch, LrScheduleRef,
                         ::testing::Values("lr_schedule_cosine", "lr_schedule_cosine_warmup",
                                           "lr_schedule_step", "lr_schedule_step_warmup",
                                           "lr_schedule_constant_warmup"));

TEST(LrSchedule, ConstantWithoutWarmupIsOne) {
  auto s = runtime::LrSchedule::parse("constant", 0, 10, 3);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->isConstant());
  for (int64_t step : {0, 7, 29, 1000}) EXPECT_EQ(s->factor(step), 1.0);
  EXPECT_FALSE(runtime::LrSchedule::parse("constant", 1, 10, 3)->isConstant());
}

TEST(LrSchedule, BadTextNamesTheFlagAndWhatItTakes) {
  struct Row {
    const char* text;
    int64_t warmup;
    const char* says;
  };
  for (const Row& r : std::vector<Row>{
           {"linear", 0, "schedule 'linear': unknown schedule"},
           {"step", 0, "step needs EPOCHS and GAMMA"},
           {"step:0:0.5", 0, "EPOCHS must be a whole number of epochs >= 1"},
           {"step:2:1.5", 0, "GAMMA must be a number in (0, 1]"},
           {"step:2:nan", 0, "GAMMA must be a number in (0, 1]"},
           {"cosine:3", 0, "FLOOR, the last factor, must be a number in [0, 1)"},
           {"cosine:0.1:2", 0, "unknown schedule"},
           {"cosine", -1, "warmup -1: must be a number of steps >= 0"},
           {"cosine", 30, "warmup 30: the run has 30 steps"},
       }) {
    auto s = runtime::LrSchedule::parse(r.text, r.warmup, 10, 3);
    ASSERT_FALSE(s.ok()) << r.text;
    EXPECT_NE(std::string(s.status().message()).find(r.says), std::string::npos)
        << s.status().message();
  }
}

}  // namespace
}  // namespace tandem::testing
