#include "gtest/gtest.h"
#include "ir/parser.h"

TEST(ParserFuzz, EmptyInputIsAnError) { EXPECT_FALSE(tandem::ir::parseModule("").ok()); }
