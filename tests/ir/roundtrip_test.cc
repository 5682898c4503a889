// print -> parse -> print round trip of every zoo model at every stage of the default
// pipeline, in both printing modes (with source locations and canonical).

#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "tests/ir/zoo_stages.h"

namespace tandem::testing {
namespace {

using CaseStage = std::pair<ZooCase, size_t>;

class RoundTripTest : public ::testing::TestWithParam<CaseStage> {};

/// Parses `text`, verifies the result and prints it back in the same mode.
void expectRoundTrip(const std::string& text, bool locations, const std::string& what) {
  SCOPED_TRACE(what);
  auto parsed = ir::parseModule(text, what);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(ir::verifyModule(**parsed).ok()) << ir::verifyModule(**parsed);
  std::string again = ir::printModule(**parsed, {.locations = locations});
  // EXPECT_EQ on megabytes of text prints both; find the first differing line instead.
  if (again != text) {
    size_t at = 0;
    while (at < text.size() && at < again.size() && text[at] == again[at]) ++at;
    size_t line_start = text.rfind('\n', at == 0 ? 0 : at - 1);
    line_start = line_start == std::string::npos ? 0 : line_start + 1;
    ADD_FAILURE() << "the reprinted text differs at byte " << at
                  << "\n  printed:   " << text.substr(line_start, text.find('\n', at) - line_start)
                  << "\n  reprinted: "
                  << again.substr(line_start, again.find('\n', at) - line_start);
  }
}

TEST_P(RoundTripTest, PrintParsePrintIsIdentical) {
  const auto& [zoo_case, stage] = GetParam();
  auto m = buildAtStage(zoo_case, stage);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(ir::verifyModule(*m).ok()) << ir::verifyModule(*m);

  std::string with_locations = ir::printModule(*m);
  std::string canonical_text = ir::printModule(*m, {.locations = false});
  // The two modes differ exactly by the loc(...) suffixes, which the models do carry.
  EXPECT_NE(with_locations.find(" loc(\""), std::string::npos);
  EXPECT_EQ(canonical_text.find(" loc("), std::string::npos);

  expectRoundTrip(with_locations, /*locations=*/true, "with-locations.tir");
  expectRoundTrip(canonical_text, /*locations=*/false, "canonical.tir");
  // Locations survive the trip: the located text, printed canonically, is the canonical one.
  auto parsed = ir::parseModule(with_locations);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(ir::printModule(**parsed, {.locations = false}), canonical_text);
}

TEST(RoundTrip, ThreeDevicesSplitTheLessonsBatchUnevenly) {
  ZooCase three{"lenet", 256, 3, 0.9};
  auto m = buildAtStage(three, stageNames().size() - 1);
  ASSERT_NE(m, nullptr);
  int splits = 0;
  for (const auto& n : m->graph(ir::kTrainGraph)->nodes()) {
    if (n->op() != ir::Op::kSplit) continue;
    ++splits;
    EXPECT_EQ(n->attrAs<std::vector<int64_t>>("sizes"), (std::vector<int64_t>{86, 85, 85}));
  }
  EXPECT_EQ(splits, 2);  // images and labels
}

INSTANTIATE_TEST_SUITE_P(Zoo, RoundTripTest, ::testing::ValuesIn(allCaseStages()),
                         [](const ::testing::TestParamInfo<CaseStage>& info) {
                           return caseName(info.param.first, info.param.second);
                         });

}  // namespace
}  // namespace tandem::testing
