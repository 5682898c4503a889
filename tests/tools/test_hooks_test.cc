// The shipped tandem reads no test-only setting: its hooks for tests (a signal at a chosen
// step, a digest of the variables) live in a separate build, tandem_with_test_hooks
// (tools/tandem/train_hooks.h). The shipped binary holds none of their names.

#include <string>

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

TEST(TestHooks, TheShippedBinaryHoldsNoTestOnlySetting) {
  const std::string shipped = readFile(TANDEM_CLI_PATH);
  ASSERT_GT(shipped.size(), 1000u);
  EXPECT_EQ(shipped.find("TANDEM_TEST_"), std::string::npos)
      << TANDEM_CLI_PATH << " names a TANDEM_TEST_ setting";
  // The search finds them where they are.
  const std::string hooked = readFile(hookedCliPath());
  EXPECT_NE(hooked.find("TANDEM_TEST_SIGNAL_AFTER"), std::string::npos);
  EXPECT_NE(hooked.find("TANDEM_TEST_DIGEST"), std::string::npos);
  EXPECT_NE(hooked.find("TANDEM_TEST_DEVICE_SPEEDS"), std::string::npos);
  EXPECT_NE(hooked.find("TANDEM_TEST_CHILD_DEADLINE_S"), std::string::npos);
}

}  // namespace
}  // namespace tandem::testing
