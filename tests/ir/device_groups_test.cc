// Collectives over device groups (XLA's replica_groups): a collective may span any set of
// the module's devices, cut into `groups` consecutive groups that reduce or broadcast on
// their own, so "within each group, across the groups, back" is IR a pass can write and
// the verifier can check.

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/interfaces.h"
#include "ir/parser.h"
#include "ir/placement.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "tests/device_kinds.h"

namespace tandem::ir {
namespace {

// A hierarchical all_reduce of one gradient over 4 devices in 2 groups, written by hand.
constexpr char kHierarchical[] = R"(module @m devices=[cpu:0, cpu:1, cpu:2, cpu:3] {
var @w : f32[3] {role=param, init=zeros}

graph @train_step() {
  %p.0 = param() {var=@w} @cpu:0 : f32[3]
  %p.1 = param() {var=@w} @cpu:1 : f32[3]
  %p.2 = param() {var=@w} @cpu:2 : f32[3]
  %p.3 = param() {var=@w} @cpu:3 : f32[3]
  %g.0 = relu(%p.0) @cpu:0 : f32[3]
  %g.1 = relu(%p.1) @cpu:1 : f32[3]
  %g.2 = relu(%p.2) @cpu:2 : f32[3]
  %g.3 = relu(%p.3) @cpu:3 : f32[3]
  %s.0, %s.1, %s.2, %s.3 = all_reduce(%g.0, %g.1, %g.2, %g.3) {op=sum, bucket=0, devices=[cpu:0, cpu:1, cpu:2, cpu:3], groups=2} : f32[3], f32[3], f32[3], f32[3]
  %t.0, %t.2 = all_reduce(%s.0, %s.2) {op=sum, bucket=0, devices=[cpu:0, cpu:2]} : f32[3], f32[3]
  %u.0, %u.1, %u.2, %u.3 = broadcast(%t.0, %t.2) {devices=[cpu:0, cpu:1, cpu:2, cpu:3], groups=2} : f32[3], f32[3], f32[3], f32[3]
  sgd_update(%p.0, %u.0) {lr=0.1, momentum=0, weight_decay=0} @cpu:0
  sgd_update(%p.1, %u.1) {lr=0.1, momentum=0, weight_decay=0} @cpu:1
  sgd_update(%p.2, %u.2) {lr=0.1, momentum=0, weight_decay=0} @cpu:2
  sgd_update(%p.3, %u.3) {lr=0.1, momentum=0, weight_decay=0} @cpu:3
  return %u.0
}
}
)";

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

std::string with(const std::string& from, const std::string& to, const char* base = kHierarchical) {
  std::string s = base;
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(s.find(from, at + 1), std::string::npos) << from << " is not unique";
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

// The message of the first error, parsing or verifying ("" when the module is fine).
std::string problem(const std::string& text) {
  auto m = parseModule(text, "groups.tir");
  if (!m.ok()) return std::string(m.status().message());
  absl::Status s = verifyModule(**m);
  return std::string(s.message());
}

TEST(DeviceGroups, HierarchicalFormVerifiesAndRoundTrips) {
  auto m = parseModule(kHierarchical, "groups.tir");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(verifyModule(**m).ok()) << verifyModule(**m);
  EXPECT_EQ(printModule(**m, {.locations = false}), kHierarchical);
  const Node& local = *(*m)->graph("train_step")->findValue("s.0")->def();
  EXPECT_EQ(numGroups(local), 2);
  EXPECT_EQ(collectiveGroups(local), (std::vector<std::vector<size_t>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(groupOfPosition(local, 3), 1u);
}

// groups=1 is the default and is not printed: the flat text of before stays as it was.
TEST(DeviceGroups, OneGroupIsTheDefaultAndNotPrinted) {
  std::string text = with(
      "%t.0, %t.2 = all_reduce(%s.0, %s.2) {op=sum, bucket=0, devices=[cpu:0, cpu:2]}",
      "%t.0, %t.2 = all_reduce(%s.0, %s.2) {op=sum, bucket=0, devices=[cpu:0, cpu:2], groups=1}");
  auto m = parseModule(text, "groups.tir");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(printModule(**m, {.locations = false}), kHierarchical);
}

// The other way to go across groups: every device all-reduces with its counterparts
// (devices listed so that the groups are {cpu:0, cpu:2} and {cpu:1, cpu:3}).
TEST(DeviceGroups, CrossGroupsByCounterpartsVerifies) {
  std::string text = with(
      "%t.0, %t.2 = all_reduce(%s.0, %s.2) {op=sum, bucket=0, devices=[cpu:0, cpu:2]} : f32[3], "
      "f32[3]\n"
      "  %u.0, %u.1, %u.2, %u.3 = broadcast(%t.0, %t.2) {devices=[cpu:0, cpu:1, cpu:2, cpu:3], "
      "groups=2}",
      "%u.0, %u.2, %u.1, %u.3 = all_reduce(%s.0, %s.2, %s.1, %s.3) {op=sum, bucket=0, "
      "devices=[cpu:0, cpu:2, cpu:1, cpu:3], groups=2}");
  EXPECT_EQ(problem(text), "");
}

// In text the parser refuses a repeated device; a pass that builds one is stopped by the
// verifier.
TEST(DeviceGroups, OverlappingGroupsAreRejected) {
  EXPECT_EQ(problem(with("all_reduce(%g.0, %g.1, %g.2, %g.3) {op=sum, bucket=0, devices=[cpu:0, "
                         "cpu:1, cpu:2, cpu:3]",
                         "all_reduce(%g.0, %g.1, %g.2, %g.3) {op=sum, bucket=0, devices=[cpu:0, "
                         "cpu:1, cpu:1, cpu:3]")),
            "groups.tir:13:105: device cpu:1 is listed twice");
  auto m = parseModule(kHierarchical, "groups.tir");
  ASSERT_TRUE(m.ok()) << m.status();
  Node& local = *(*m)->graph("train_step")->findValue("s.0")->def();
  local.setAttr("devices", std::vector<Device>{{::tandem::testing::kind("cpu"), 0},
                                               {::tandem::testing::kind("cpu"), 1},
                                               {::tandem::testing::kind("cpu"), 1},
                                               {::tandem::testing::kind("cpu"), 3}});
  EXPECT_EQ(verifyModule(**m).message(),
            "graph @train_step: %s.0 (all_reduce): lists cpu:1 twice; a device takes one part "
            "in a collective (device groups may not overlap)");
}

TEST(DeviceGroups, GroupsThatDoNotCoverTheDevicesEvenlyAreRejected) {
  EXPECT_EQ(problem(with("bucket=0, devices=[cpu:0, cpu:1, cpu:2, cpu:3], groups=2",
                         "bucket=0, devices=[cpu:0, cpu:1, cpu:2, cpu:3], groups=3")),
            "groups.tir:13:28: %s.0 (all_reduce): groups=3 does not cut the 4 devices into "
            "equal groups");
  EXPECT_EQ(problem(with("bucket=0, devices=[cpu:0, cpu:1, cpu:2, cpu:3], groups=2",
                         "bucket=0, devices=[cpu:0, cpu:1, cpu:2, cpu:3], groups=0")),
            "groups.tir:13:28: %s.0 (all_reduce): groups=0 does not cut the 4 devices into "
            "equal groups");
}

TEST(DeviceGroups, MismatchedBroadcastSourcesAreRejected) {
  EXPECT_EQ(problem(with("broadcast(%t.0, %t.2)", "broadcast(%t.0)")),
            "groups.tir:15:28: %u.0 (broadcast): 1 operands do not give the same number of "
            "tensors to each of the 2 groups");
  EXPECT_EQ(problem(with("broadcast(%t.0, %t.2)", "broadcast(%t.2, %t.0)")),
            "graph @train_step: %u.0 (broadcast): operand 0 %t.2 is on cpu:2, expected a device "
            "of group 0 [cpu:0, cpu:1] (its source)");
}

// A gradient that skipped the step across the groups reached only its own group.
TEST(DeviceGroups, AGradientReducedWithinGroupsOnlyIsRejected) {
  EXPECT_EQ(problem(with("broadcast(%t.0, %t.2)", "broadcast(%s.0, %s.2)")),
            "graph @train_step: sgd_update(%p.0) (sgd_update @cpu:0): its gradient %u.0 is "
            "reduced over 2 of the 4 devices; every device's gradient must reach it");
}

// ---- reduce_scatter and all_gather: one flat buffer per device, each rank's shard size
// stated by `sizes` (uneven where the buffer does not divide), cut the same way in every
// group.

TEST(ShardCollectives, UnevenShardsVerifyAndRoundTrip) {
  auto m = parseModule(kSharded, "groups.tir");
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
  auto m = parseModule(kGrouped, "groups.tir");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(verifyModule(**m).ok()) << verifyModule(**m);
  EXPECT_EQ(printModule(**m, {.locations = false}), kGrouped);
  const Node& rs = *(*m)->graph("train_step")->findValue("s.0")->def();
  EXPECT_EQ(collectiveGroups(rs), (std::vector<std::vector<size_t>>{{0, 1}, {2, 3}}));
}

TEST(ShardCollectives, SizesThatDoNotFitTheGroupAreRejected) {
  EXPECT_EQ(problem(with("sizes=[2,2,1]", "sizes=[3,2]", kSharded)),
            "groups.tir:11:22: %s.0 (reduce_scatter): sizes has 2 entries but a group has 3 "
            "ranks; expected one shard size per rank");
  EXPECT_EQ(problem(with("sizes=[3,2]", "sizes=[2,2,1]", kGrouped)),
            "groups.tir:9:28: %s.0 (reduce_scatter): sizes has 3 entries but a group has 2 "
            "ranks; expected one shard size per rank");
  EXPECT_EQ(problem(with("sizes=[2,2,1]", "sizes=[2,2,2]", kSharded)),
            "groups.tir:11:22: %s.0 (reduce_scatter): sizes add up to 6 but xs (%g.0: f32[5]) "
            "has 5 elements");
  EXPECT_EQ(problem(with("sizes=[2,2,1]", "sizes=[3,2,0]", kSharded)),
            "groups.tir:11:22: %s.0 (reduce_scatter): sizes[2] is 0; every rank's shard must "
            "hold at least one element");
}

TEST(ShardCollectives, DeclaredShardTypesMustMatchSizes) {
  EXPECT_EQ(problem(with(": f32[2], f32[2], f32[1]", ": f32[2], f32[1], f32[2]", kSharded)),
            "groups.tir:11:9: %s.1 is declared f32[1] but reduce_scatter gives f32[2]");
}

TEST(ShardCollectives, OneFlatBufferPerDevice) {
  EXPECT_EQ(
      problem(with("reduce_scatter(%g.0, %g.1, %g.2)", "reduce_scatter(%g.0, %g.1)", kSharded)),
      "groups.tir:11:22: %s.0 (reduce_scatter): 2 operands for 3 devices; expected one "
      "flat buffer per device");
  const std::string two_d = with("%g.0 = relu(%p.0) @cpu:0 : f32[5]",
                                 "%g.0 = reshape(%p.0) {shape=[5,1]} @cpu:0 : f32[5,1]", kSharded);
  EXPECT_EQ(problem(two_d),
            "groups.tir:11:22: %s.0 (reduce_scatter): xs (%g.0: f32[5,1]) must have rank 1 (a "
            "flat buffer: reshape it first)");
  EXPECT_EQ(problem(with("all_gather(%s.0, %s.1, %s.2)", "all_gather(%s.0, %s.1)", kSharded)),
            "groups.tir:12:22: %a.0 (all_gather): 2 operands for 3 devices; expected one flat "
            "buffer per device");
}

// Rank r's shard has one size in every group: the groups gather the same buffer.
TEST(ShardCollectives, GroupsMustGatherShardsOfOneSize) {
  EXPECT_EQ(problem(with("all_gather(%s.0, %s.1, %s.2, %s.3) {bucket=1, devices=[cpu:0, cpu:1, "
                         "cpu:2, cpu:3], groups=2} : f32[5], f32[5], f32[5], f32[5]",
                         "all_gather(%s.0, %s.1, %s.3, %s.2) {bucket=1, devices=[cpu:0, cpu:1, "
                         "cpu:3, cpu:2], groups=2} : f32[5], f32[5], f32[5], f32[5]",
                         kGrouped)),
            "groups.tir:10:28: %a.0 (all_gather): xs (%s.0: f32[3]) and xs (%s.3: f32[2]) must "
            "have the same type");
}

// A gradient goes into one reduction: reduce_scatter counts as one, as all_reduce does.
TEST(ShardCollectives, AGradientReducedTwiceIsRejected) {
  const std::string twice =
      with("  return %a.0",
           "  %r.0, %r.1, %r.2 = all_reduce(%g.0, %g.1, %g.2) {op=sum, bucket=1, devices=[cpu:0, "
           "cpu:1, cpu:2]} : f32[5], f32[5], f32[5]\n  return %a.0",
           kSharded);
  EXPECT_NE(problem(twice).find("is all-reduced twice"), std::string::npos) << problem(twice);
}

// A shard that skipped the gather is no gradient of the whole weight.
TEST(ShardCollectives, AGradientGatheredFromOneGroupOnlyIsRejected) {
  const std::string text = with("  return %a.0",
                                "  sgd_update(%p.0, %a.0) {lr=0.1, momentum=0, weight_decay=0} "
                                "@cpu:0\n  return %a.0",
                                kGrouped);
  EXPECT_EQ(problem(text),
            "graph @train_step: sgd_update(%p.0) (sgd_update @cpu:0): its gradient %a.0 is "
            "reduced over 2 of the 4 devices; every device's gradient must reach it");
}

// ---- the sharded weight update (issue 27, part 2) ------------------------------------------

// shard-weight-update's form by hand: a sharded momentum (2 + 1 of 3 elements) that
// packs @w.momentum, the flat-shard update over a slice of the weights, the all_gather
// assigned back.
constexpr char kShardedUpdate[] = R"(module @m devices=[cpu:0, cpu:1] {
var @w : f32[3] {role=param, init=zeros}
var @b0.momentum : f32[3] {role=optimizer, init=zeros, shards=[2, 1], packs=[@w.momentum : f32[3]]}

graph @train_step() {
  %w.0 = param() {var=@w} @cpu:0 : f32[3]
  %w.1 = param() {var=@w} @cpu:1 : f32[3]
  %g.0 = relu(%w.0) @cpu:0 : f32[3]
  %g.1 = relu(%w.1) @cpu:1 : f32[3]
  %s.0, %s.1 = reduce_scatter(%g.0, %g.1) {op=sum, bucket=0, sizes=[2,1], devices=[cpu:0, cpu:1]} : f32[2], f32[1]
  %p.0 = slice_axis(%w.0) {axis=0, start=0, end=2} @cpu:0 : f32[2]
  %m.0 = param() {var=@b0.momentum} @cpu:0 : f32[2]
  %y.0 = sgd_update_shard(%p.0, %s.0, %m.0) {lr=0.1, momentum=0.9, weight_decay=0} @cpu:0 : f32[2]
  %p.1 = slice_axis(%w.1) {axis=0, start=2, end=3} @cpu:1 : f32[1]
  %m.1 = param() {var=@b0.momentum} @cpu:1 : f32[1]
  %y.1 = sgd_update_shard(%p.1, %s.1, %m.1) {lr=0.1, momentum=0.9, weight_decay=0} @cpu:1 : f32[1]
  %a.0, %a.1 = all_gather(%y.0, %y.1) {bucket=0, devices=[cpu:0, cpu:1]} : f32[3], f32[3]
  assign(%a.0) {var=@w} @cpu:0
  assign(%a.1) {var=@w} @cpu:1
  return
}
}
)";

TEST(ShardedUpdate, ShardedStateVerifiesAndRoundTrips) {
  auto m = parseModule(kShardedUpdate, "sharded.tir");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(verifyModule(**m).ok()) << verifyModule(**m);
  EXPECT_EQ(printModule(**m, {.locations = false}), kShardedUpdate);
  const Var& v = *(*m)->findVar("b0.momentum");
  EXPECT_TRUE(v.sharded());
  EXPECT_EQ(toString(v.replicaType(1)), "f32[1]");
  EXPECT_EQ(v.shardOffset(1), 2);
  const Node& step = *(*m)->graph("train_step")->findValue("y.0")->def();
  const std::optional<UpdateView> u = UpdateView::of(step);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->info().sharded_of, Op::kSgdUpdate);
  EXPECT_EQ(opInfo(Op::kSgdUpdate).optimizer->sharded, Op::kSgdUpdateShard);
  EXPECT_EQ(opInfo(Op::kAdamwUpdate).optimizer->sharded, Op::kAdamwUpdateShard);
}

std::string shardedProblem(const std::string& from, const std::string& to) {
  auto m = parseModule(with(from, to, kShardedUpdate), "sharded.tir");
  if (!m.ok()) return std::string(m.status().message());
  return std::string(verifyModule(**m).message());
}

// A sharded variable alone (no node reads it), so that the variable's own checks speak.
std::string varProblem(const std::string& attrs) {
  return problem(absl::StrCat(
      "module @v devices=[cpu:0, cpu:1] {\nvar @s : f32[3] {role=optimizer, ", attrs, "}\n}\n"));
}

TEST(ShardedUpdate, BadShardsArePointedAt) {
  EXPECT_EQ(varProblem("init=zeros, shards=[2, 1]"), "");
  EXPECT_EQ(varProblem("init=zeros, shards=[1, 1, 1]"),
            "variable @s: has 3 shards for 2 module devices; expected one per device");
  EXPECT_EQ(varProblem("init=zeros, shards=[2, 2]"),
            "variable @s: shards add up to 4 but f32[3] has 3 elements");
  EXPECT_EQ(varProblem("init=zeros, shards=[3, 0]"),
            "variable @s: shards[1] is 0; every device's shard holds at least one element");
  EXPECT_EQ(varProblem("init=kaiming, shards=[2, 1]"),
            "variable @s: is sharded, so its initializer must be zeros or ones (each device "
            "fills its shard alone), not kaiming");
  EXPECT_EQ(varProblem("init=zeros, shards=[2, 1], packs=[@a : f32[2]]"),
            "variable @s: packs variables of 2 elements into f32[3]");
  EXPECT_EQ(varProblem("init=zeros, shards=[], packs=[@a : f32[2]]"),
            "variable @s: packs @a as f32[2]; unsharded, each variable it packs has its type "
            "f32[3]");
  // Sharded within groups: every group holds the whole variable, cut the same way.
  EXPECT_EQ(problem("module @v devices=[cpu:0, cpu:1, cpu:2, cpu:3] {\nvar @s : f32[3] "
                    "{role=optimizer, init=zeros, shards=[2, 1, 2, 1], shard_groups=2}\n}\n"),
            "");
  EXPECT_EQ(problem("module @v devices=[cpu:0, cpu:1, cpu:2, cpu:3] {\nvar @s : f32[3] "
                    "{role=optimizer, init=zeros, shards=[2, 1, 1, 2], shard_groups=2}\n}\n"),
            "variable @s: shards[2] is 1 but shards[0] is 2; every shard group is cut the same "
            "way");
  EXPECT_EQ(problem("module @v devices=[cpu:0, cpu:1, cpu:2, cpu:3] {\nvar @s : f32[3] "
                    "{role=optimizer, init=zeros, shards=[1, 1, 1, 1], shard_groups=2}\n}\n"),
            "variable @s: shards add up to 2 in a shard group but f32[3] has 3 elements");
  EXPECT_EQ(varProblem("init=zeros, shards=[2, 1], shard_groups=3"),
            "variable @s: has shard_groups=3, which does not cut its 2 shards into equal groups");
  EXPECT_EQ(varProblem("init=zeros, shards=[], shard_groups=2"),
            "variable @s: has shard_groups=2 but no shards");
  // A node reading a shard declares the device's shard.
  EXPECT_EQ(problem(with("%m.1 = param() {var=@b0.momentum} @cpu:1 : f32[1]",
                         "%m.1 = param() {var=@b0.momentum} @cpu:1 : f32[2]", kShardedUpdate)),
            "groups.tir:15:3: %m.1 is declared f32[2] but param gives f32[1]");
}

TEST(ShardedUpdate, AShardGroupHoldsTheWholeVariable) {
  const std::string text =
      "module @v devices=[cpu:0, cpu:1, cpu:2, cpu:3] {\nvar @s : f32[3] {role=optimizer, "
      "init=zeros, shards=[2, 1, 2, 1], shard_groups=2, packs=[@a : f32[3]]}\n}\n";
  auto m = parseModule(text, "groups.tir");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(printModule(**m, {.locations = false}), text);
  const Var& v = *(*m)->findVar("s");
  EXPECT_EQ(v.shardGroupSize(), 2u);
  EXPECT_EQ(v.shardOffset(1), 2);
  EXPECT_EQ(v.shardOffset(2), 0);  // the second group's first device
  EXPECT_EQ(v.shardOffset(3), 2);
  EXPECT_EQ(toString(v.replicaType(3)), "f32[1]");
}

TEST(ShardedUpdate, BadShardUpdatesAreRejected) {
  EXPECT_EQ(shardedProblem("%p.0 = slice_axis(%w.0) {axis=0, start=0, end=2} @cpu:0 : f32[2]",
                           "%p.0 = reshape(%w.0) {shape=[3,1]} @cpu:0 : f32[3,1]"),
            "sharded.tir:13:10: %y.0 (sgd_update_shard): w (%p.0: f32[3,1]) must be a flat f32 "
            "shard (rank 1: the bucket's weights packed)");
  EXPECT_EQ(shardedProblem("%y.0 = sgd_update_shard(%p.0, %s.0, %m.0)",
                           "%y.0 = sgd_update_shard(%p.0, %s.0, %p.0)"),
            "sharded.tir:13:10: %y.0 (sgd_update_shard): m (%p.0: f32[2]) must be read straight "
            "from a variable (a param node)");
  EXPECT_EQ(shardedProblem("%y.1 = sgd_update_shard(%p.1, %s.1, %m.1)",
                           "%y.1 = sgd_update_shard(%p.1, %s.1)"),
            "sharded.tir:16:10: %y.1 (sgd_update_shard): 2 operands; expected w, g, the 1 "
            "optimizer states its attributes ask for, and an optional lr_scale");
}

}  // namespace
}  // namespace tandem::ir
