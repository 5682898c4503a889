// reduce_scatter and all_gather in the IR: one flat buffer per device, each rank's shard
// size stated by `sizes` (uneven where the buffer does not divide), cut the same way in
// every group; text that round-trips, and errors that name the node and the operand.

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ir/interfaces.h"
#include "ir/parser.h"
#include "ir/placement.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace tandem::ir {
namespace {

// A gradient reduce-scattered over 3 devices in uneven shards (5 = 2 + 2 + 1), gathered
// back, and the gathered sum updating the weight: every device's gradient reaches it.
constexpr char kSharded[] = R"(module @m devices=[cpu:0, cpu:1, cpu:2] {
var @w : f32[5] {role=param, init=zeros}

graph @train_step() {
  %p.0 = param() {var=@w} @cpu:0 : f32[5]
  %p.1 = param() {var=@w} @cpu:1 : f32[5]
  %p.2 = param() {var=@w} @cpu:2 : f32[5]
  %g.0 = relu(%p.0) @cpu:0 : f32[5]
  %g.1 = relu(%p.1) @cpu:1 : f32[5]
  %g.2 = relu(%p.2) @cpu:2 : f32[5]
  %s.0, %s.1, %s.2 = reduce_scatter(%g.0, %g.1, %g.2) {op=sum, bucket=0, sizes=[2,2,1], devices=[cpu:0, cpu:1, cpu:2]} : f32[2], f32[2], f32[1]
  %a.0, %a.1, %a.2 = all_gather(%s.0, %s.1, %s.2) {bucket=0, devices=[cpu:0, cpu:1, cpu:2]} : f32[5], f32[5], f32[5]
  sgd_update(%p.0, %a.0) {lr=0.1, momentum=0, weight_decay=0} @cpu:0
  sgd_update(%p.1, %a.1) {lr=0.1, momentum=0, weight_decay=0} @cpu:1
  sgd_update(%p.2, %a.2) {lr=0.1, momentum=0, weight_decay=0} @cpu:2
  return %a.0
}
}
)";

// Two groups of two devices, each cutting the same buffer into shards of 3 and 2.
constexpr char kGrouped[] = R"(module @m devices=[cpu:0, cpu:1, cpu:2, cpu:3] {
var @w : f32[5] {role=param, init=zeros}

graph @train_step() {
  %p.0 = param() {var=@w} @cpu:0 : f32[5]
  %p.1 = param() {var=@w} @cpu:1 : f32[5]
  %p.2 = param() {var=@w} @cpu:2 : f32[5]
  %p.3 = param() {var=@w} @cpu:3 : f32[5]
  %s.0, %s.1, %s.2, %s.3 = reduce_scatter(%p.0, %p.1, %p.2, %p.3) {op=mean, bucket=1, sizes=[3,2], devices=[cpu:0, cpu:1, cpu:2, cpu:3], groups=2} : f32[3], f32[2], f32[3], f32[2]
  %a.0, %a.1, %a.2, %a.3 = all_gather(%s.0, %s.1, %s.2, %s.3) {bucket=1, devices=[cpu:0, cpu:1, cpu:2, cpu:3], groups=2} : f32[5], f32[5], f32[5], f32[5]
  return %a.0
}
}
)";

std::string with(const char* base, const std::string& from, const std::string& to) {
  std::string s = base;
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(s.find(from, at + 1), std::string::npos) << from << " is not unique";
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

// The message of the first error, parsing or verifying ("" when the module is fine).
std::string problem(const std::string& text) {
  auto m = parseModule(text, "shards.tir");
  if (!m.ok()) return std::string(m.status().message());
  return std::string(verifyModule(**m).message());
}

TEST(ShardCollectives, UnevenShardsVerifyAndRoundTrip) {
  auto m = parseModule(kSharded, "shards.tir");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(verifyModule(**m).ok()) << verifyModule(**m);
  EXPECT_EQ(printModule(**m, {.locations = false}), kSharded);
  const Node& rs = *(*m)->graph("train_step")->findValue("s.0")->def();
  const CollectiveView c(rs);
  EXPECT_EQ(c.kind(), CollectiveKind::kReduceScatter);
  EXPECT_EQ(c.call(), CollectiveCall::kReduceScatter);
  EXPECT_EQ(c.bucket(), 0);
  // Each device reads its own buffer and writes its own shard.
  EXPECT_EQ(c.readsAt(1).begin, 1u);
  EXPECT_EQ(c.writesAt(2).begin, 2u);
  EXPECT_EQ(toString(deviceOfValue(*rs.result(2))), "cpu:2");
  const Node& ag = *(*m)->graph("train_step")->findValue("a.0")->def();
  EXPECT_EQ(CollectiveView(ag).kind(), CollectiveKind::kAllGather);
  EXPECT_EQ(streamOf(ag), StreamKind::kComm);
}

TEST(ShardCollectives, EachGroupIsCutBySizes) {
  auto m = parseModule(kGrouped, "shards.tir");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(verifyModule(**m).ok()) << verifyModule(**m);
  EXPECT_EQ(printModule(**m, {.locations = false}), kGrouped);
  const Node& rs = *(*m)->graph("train_step")->findValue("s.0")->def();
  EXPECT_EQ(collectiveGroups(rs), (std::vector<std::vector<size_t>>{{0, 1}, {2, 3}}));
}

TEST(ShardCollectives, SizesThatDoNotFitTheGroupAreRejected) {
  EXPECT_EQ(problem(with(kSharded, "sizes=[2,2,1]", "sizes=[3,2]")),
            "shards.tir:11:22: %s.0 (reduce_scatter): sizes has 2 entries but a group has 3 "
            "ranks; expected one shard size per rank");
  EXPECT_EQ(problem(with(kGrouped, "sizes=[3,2]", "sizes=[2,2,1]")),
            "shards.tir:9:28: %s.0 (reduce_scatter): sizes has 3 entries but a group has 2 "
            "ranks; expected one shard size per rank");
  EXPECT_EQ(problem(with(kSharded, "sizes=[2,2,1]", "sizes=[2,2,2]")),
            "shards.tir:11:22: %s.0 (reduce_scatter): sizes add up to 6 but xs (%g.0: f32[5]) "
            "has 5 elements");
  EXPECT_EQ(problem(with(kSharded, "sizes=[2,2,1]", "sizes=[3,2,0]")),
            "shards.tir:11:22: %s.0 (reduce_scatter): sizes[2] is 0; every rank's shard must "
            "hold at least one element");
}

TEST(ShardCollectives, DeclaredShardTypesMustMatchSizes) {
  EXPECT_EQ(problem(with(kSharded, ": f32[2], f32[2], f32[1]", ": f32[2], f32[1], f32[2]")),
            "shards.tir:11:9: %s.1 is declared f32[1] but reduce_scatter gives f32[2]");
}

TEST(ShardCollectives, OneFlatBufferPerDevice) {
  EXPECT_EQ(
      problem(with(kSharded, "reduce_scatter(%g.0, %g.1, %g.2)", "reduce_scatter(%g.0, %g.1)")),
      "shards.tir:11:22: %s.0 (reduce_scatter): 2 operands for 3 devices; expected one "
      "flat buffer per device");
  const std::string two_d = with(kSharded, "%g.0 = relu(%p.0) @cpu:0 : f32[5]",
                                 "%g.0 = reshape(%p.0) {shape=[5,1]} @cpu:0 : f32[5,1]");
  EXPECT_EQ(problem(two_d),
            "shards.tir:11:22: %s.0 (reduce_scatter): xs (%g.0: f32[5,1]) must have rank 1 (a "
            "flat buffer: reshape it first)");
  EXPECT_EQ(problem(with(kSharded, "all_gather(%s.0, %s.1, %s.2)", "all_gather(%s.0, %s.1)")),
            "shards.tir:12:22: %a.0 (all_gather): 2 operands for 3 devices; expected one flat "
            "buffer per device");
}

// Rank r's shard has one size in every group: the groups gather the same buffer.
TEST(ShardCollectives, GroupsMustGatherShardsOfOneSize) {
  EXPECT_EQ(problem(with(kGrouped,
                         "all_gather(%s.0, %s.1, %s.2, %s.3) {bucket=1, devices=[cpu:0, cpu:1, "
                         "cpu:2, cpu:3], groups=2} : f32[5], f32[5], f32[5], f32[5]",
                         "all_gather(%s.0, %s.1, %s.3, %s.2) {bucket=1, devices=[cpu:0, cpu:1, "
                         "cpu:3, cpu:2], groups=2} : f32[5], f32[5], f32[5], f32[5]")),
            "shards.tir:10:28: %a.0 (all_gather): xs (%s.0: f32[3]) and xs (%s.3: f32[2]) must "
            "have the same type");
}

// A gradient goes into one reduction: reduce_scatter counts as one, as all_reduce does.
TEST(ShardCollectives, AGradientReducedTwiceIsRejected) {
  const std::string twice =
      with(kSharded, "  return %a.0",
           "  %r.0, %r.1, %r.2 = all_reduce(%g.0, %g.1, %g.2) {op=sum, bucket=1, devices=[cpu:0, "
           "cpu:1, cpu:2]} : f32[5], f32[5], f32[5]\n  return %a.0");
  EXPECT_NE(problem(twice).find("is all-reduced twice"), std::string::npos) << problem(twice);
}

// A shard that skipped the gather is no gradient of the whole weight.
TEST(ShardCollectives, AGradientGatheredFromOneGroupOnlyIsRejected) {
  const std::string text = with(kGrouped, "  return %a.0",
                                "  sgd_update(%p.0, %a.0) {lr=0.1, momentum=0, weight_decay=0} "
                                "@cpu:0\n  return %a.0");
  EXPECT_EQ(problem(text),
            "graph @train_step: sgd_update(%p.0) (sgd_update @cpu:0): its gradient %a.0 is "
            "reduced over 2 of the 4 devices; every device's gradient must reach it");
}

}  // namespace
}  // namespace tandem::ir
