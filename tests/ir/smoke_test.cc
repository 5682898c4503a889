#include "gtest/gtest.h"
#include "ir/op_info.h"

TEST(OpTable, EveryOpHasAShapeRule) {
  for (const auto& info : tandem::ir::allOps()) EXPECT_NE(info.rules->infer, nullptr) << info.name;
}
