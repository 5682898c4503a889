// The verifier: one negative test per check with its exact message, built from IR text
// (parseModule does not verify) and, where the parser's shape rules would refuse the
// broken form, by mutating a parsed module; and the zoo models verify at every stage.

#include "ir/verifier.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "tests/ir/zoo_stages.h"

namespace tandem::ir {
namespace {

std::unique_ptr<Module> parse(const std::string& text) {
  auto m = parseModule(text, "verifier_test.tir");
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

/// The verifier's message for a module that must be rejected ("" when it is accepted).
std::string verifyError(const Module& m) {
  absl::Status s = verifyModule(m);
  EXPECT_FALSE(s.ok()) << "the module verified";
  if (!s.ok()) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  }
  return std::string(s.message());
}

Node* definingNode(const Module& m, const std::string& graph, const std::string& value) {
  Value* v = m.graph(graph)->findValue(value);
  EXPECT_NE(v, nullptr) << value;
  return v == nullptr ? nullptr : v->def();
}

// A valid replicated module that the negative tests below break in one place each.
constexpr char kReplicated[] = R"(module @m devices=[cpu:0, cpu:1] {
var @w : f32[3] {role=param, init=zeros}

graph @init() {
  %w.0 = initialize() {var=@w} @cpu:0 : f32[3]
  %w.1 = initialize() {var=@w} @cpu:1 : f32[3]
  assign(%w.0) {var=@w} @cpu:0
  assign(%w.1) {var=@w} @cpu:1
  return
}

graph @train_step(%x: f32[4,3]) {
  %x.0, %x.1 = split(%x) {axis=0, sizes=[2,2], devices=[cpu:0, cpu:1]} : f32[2,3], f32[2,3]
  %p.0 = param() {var=@w} @cpu:0 : f32[3]
  %p.1 = param() {var=@w} @cpu:1 : f32[3]
  %g.0 = relu(%p.0) @cpu:0 : f32[3]
  %g.1 = relu(%p.1) @cpu:1 : f32[3]
  %s.0, %s.1 = all_reduce(%g.0, %g.1) {op=sum, bucket=0, devices=[cpu:0, cpu:1]} : f32[3], f32[3]
  sgd_update(%p.0, %s.0) {lr=0.1, momentum=0, weight_decay=0} @cpu:0
  sgd_update(%p.1, %s.1) {lr=0.1, momentum=0, weight_decay=0} @cpu:1
  return %s.0
}
}
)";

/// kReplicated with one exact, unique piece of text replaced.
std::string replicatedWith(const std::string& from, const std::string& to) {
  std::string s = kReplicated;
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(s.find(from, at + 1), std::string::npos) << from << " is not unique";
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

constexpr char kUnreplicated[] = R"(module @m {
var @w : f32[3] {role=param, init=zeros}

graph @g(%x: f32[2,3]) {
  %a = relu(%x) : f32[2,3] loc("block", "net.cc:7")
  %b = relu(%a) : f32[2,3]
  return %b
}
}
)";

std::string unreplicatedWith(const std::string& from, const std::string& to) {
  std::string s = kUnreplicated;
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

TEST(Verifier, TheBaseModulesVerify) {
  auto replicated = parse(kReplicated);
  ASSERT_NE(replicated, nullptr);
  EXPECT_TRUE(verifyModule(*replicated).ok()) << verifyModule(*replicated);
  auto unreplicated = parse(kUnreplicated);
  ASSERT_NE(unreplicated, nullptr);
  EXPECT_TRUE(verifyModule(*unreplicated).ok()) << verifyModule(*unreplicated);
}

// ---- types ------------------------------------------------------------------------------

TEST(Verifier, ResultTypeDisagreesWithTheShapeRule) {
  auto m = parse(kUnreplicated);
  ASSERT_NE(m, nullptr);
  m->graph("g")->findValue("a")->setType(TensorType{DType::kF32, {2, 4}});
  EXPECT_EQ(verifyError(*m),
            "graph @g: %a (relu, scope block, at net.cc:7): result %a has type f32[2,4], "
            "expected f32[2,3]");
}

TEST(Verifier, DTypeDisagreesWithTheShapeRule) {
  auto m = parse(kReplicated);
  ASSERT_NE(m, nullptr);
  m->graph("train_step")->findValue("g.1")->setType(TensorType{DType::kBF16, {3}});
  EXPECT_EQ(verifyError(*m),
            "graph @train_step: %g.1 (relu @cpu:1): result %g.1 has type bf16[3], expected "
            "f32[3]");
}

TEST(Verifier, ShapeRuleErrorsNameTheNode) {
  // An operand retyped after the fact makes the consumer's shape rule fail.
  auto m = parse(kReplicated);
  ASSERT_NE(m, nullptr);
  m->graph("train_step")->findValue("x")->setType(TensorType{DType::kF32, {5, 3}});
  EXPECT_EQ(verifyError(*m),
            "graph @train_step: %x.0 (split): sizes add up to 4 but axis 0 of x (%x: f32[5,3]) "
            "has 5");
}

// Grouped convolutions: the filter holds C / groups input channels per output channel
// and the output channels split into the groups; groups=1 (the default) is left out of
// the text.
TEST(Verifier, GroupedConvolutionChannels) {
  auto module = [](const std::string& w, int groups) {
    return absl::StrCat("module @m {\ngraph @g(%x: f32[2,8,5,5], %w: f32[", w,
                        "]) {\n  %y = conv2d(%x, %w) {stride=1, pad=1, groups=", groups,
                        "} : f32[2,", w.substr(0, w.find(',')), ",5,5]\n  return %y\n}\n}\n");
  };
  auto ok = parse(module("8,2,3,3", 4));
  ASSERT_NE(ok, nullptr);
  EXPECT_TRUE(verifyModule(*ok).ok()) << verifyModule(*ok);
  EXPECT_TRUE(absl::StrContains(printModule(*ok), "{stride=1, pad=1, groups=4}"));
  auto depthwise = parse(module("8,1,3,3", 8));
  ASSERT_NE(depthwise, nullptr);
  EXPECT_TRUE(verifyModule(*depthwise).ok()) << verifyModule(*depthwise);
  auto one = parse(module("4,8,3,3", 1));
  ASSERT_NE(one, nullptr);
  EXPECT_TRUE(absl::StrContains(printModule(*one), "{stride=1, pad=1}"));

  // The parser runs the shape rules: the broken ones fail there, at the node's line.
  auto wide = parseModule(module("8,4,3,3", 4), "t.tir");
  ASSERT_FALSE(wide.ok());
  EXPECT_EQ(wide.status().message(),
            "t.tir:3:8: %y (conv2d): the input has 8 channels but the filter w (%w: "
            "f32[8,4,3,3]) of 4 groups expects 16 (4 per group)");
  auto uneven = parseModule(module("6,2,3,3", 4), "t.tir");
  ASSERT_FALSE(uneven.ok());
  EXPECT_EQ(uneven.status().message(),
            "t.tir:3:8: %y (conv2d): the filter w (%w: f32[6,2,3,3]) has 6 output channels, "
            "which do not split into 4 groups");
}

// conv2d_relu_avg_pool keeps relu's mask a row of the convolution an i32, and pools 2x2
// windows: the parser names the node and what its shapes break.
TEST(Verifier, FusedConvReluPoolShapes) {
  auto refused = [](const std::string& x, const std::string& types) {
    auto m = parseModule(absl::StrCat("module @m {\ngraph @g(%x: f32[", x,
                                      "], %w: f32[2,1,3,3]) {\n  %y, %m = "
                                      "conv2d_relu_avg_pool(%x, %w) {stride=1, pad=0} : ",
                                      types, "\n  return %y\n}\n}\n"),
                         "t.tir");
    return m.ok() ? std::string("accepted") : std::string(m.status().message());
  };
  EXPECT_EQ(refused("1,1,10,10", "f32[1,2,4,4], i32[1,2,8]"), "accepted");
  EXPECT_EQ(refused("1,1,4,35", "f32[1,2,1,16], i32[1,2,2]"),
            "t.tir:3:12: %y (conv2d_relu_avg_pool): the convolution's rows are 33 wide: relu's "
            "mask keeps a row in an i32 (at most 32)");
  EXPECT_EQ(refused("1,1,3,3", "f32[1,2,0,0], i32[1,2,1]"),
            "t.tir:3:12: %y (conv2d_relu_avg_pool): the convolution's output is 1x1: a 2x2 "
            "pooling window needs at least 2x2");
  auto backward = parseModule(
      "module @m {\ngraph @g(%dy: f32[1,2,4,4], %x: f32[1,1,10,10], %w: f32[2,1,3,3], %m: "
      "i32[1,2,4]) {\n  %dw = conv2d_relu_avg_pool_backward_filter(%dy, %x, %w, %m) {stride=1, "
      "pad=0, bias=false} : f32[2,1,3,3]\n  return %dw\n}\n}\n",
      "t.tir");
  ASSERT_FALSE(backward.ok());
  EXPECT_EQ(backward.status().message(),
            "t.tir:3:9: %dw (conv2d_relu_avg_pool_backward_filter): mask (%m: i32[1,2,4]) must "
            "be i32[1,2,8] (relu's mask, a row an i32)");
}

// Windows whose height and width differ: `hw` attributes are one int for both axes or
// [h,w]; [3,3] is the same window as 3 and prints so; each extent is range-checked and
// the output shape follows each axis' own kernel, stride and padding.
TEST(Verifier, NonSquareWindows) {
  auto module = [](const std::string& attrs, const std::string& y) {
    return absl::StrCat(
        "module @m {\ngraph @g(%x: f32[2,4,7,6], %w: f32[5,4,3,2]) {\n  %y = conv2d(%x, %w) {",
        attrs, "} : f32[", y, "]\n  return %y\n}\n}\n");
  };
  auto ok = parse(module("stride=[2,1], pad=[1,0]", "2,5,4,5"));
  ASSERT_NE(ok, nullptr);
  EXPECT_TRUE(verifyModule(*ok).ok()) << verifyModule(*ok);
  EXPECT_TRUE(absl::StrContains(printModule(*ok), "{stride=[2,1], pad=[1,0]}"));
  const Node& conv = *ok->graph("g")->findValue("y")->def();
  EXPECT_EQ(Conv2dView(conv).stride(), Hw(2, 1));
  EXPECT_EQ(Conv2dView(conv).pad(), Hw(1, 0));
  auto square = parse(module("stride=[1,1], pad=[1,1]", "2,5,7,7"));
  ASSERT_NE(square, nullptr);
  EXPECT_TRUE(absl::StrContains(printModule(*square), "{stride=1, pad=1}"));

  auto zero = parseModule(module("stride=[1,0], pad=0", "2,5,5,5"), "t.tir");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().message(), "t.tir:3:8: %y (conv2d): stride must be >= 1");
  auto one_number = parseModule(module("stride=[2], pad=0", "2,5,5,5"), "t.tir");
  ASSERT_FALSE(one_number.ok());
  EXPECT_TRUE(absl::StrContains(one_number.status().message(), "expected ','"))
      << one_number.status();

  auto pool = parseModule(
      "module @m {\ngraph @g(%x: f32[1,2,7,6]) {\n  %y = max_pool2d(%x) {kernel=[3,2], "
      "stride=[2,1], pad=[1,2]} : f32[1,2,4,9]\n  return %y\n}\n}\n",
      "p.tir");
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().message(),
            "p.tir:3:8: %y (max_pool2d): padding [1,2] must be at most half the kernel [3,2] "
            "along each axis");
}

// ---- mixed precision ----------------------------------------------------------------------

// bf16 activations beside f32 variables, as the mixed-precision pass writes them.
constexpr char kMixed[] = R"(module @m {
var @w : f32[4,3,3,3] {role=param, init=kaiming}
var @gamma : f32[4] {role=param, init=ones}
var @beta : f32[4] {role=param, init=zeros}
var @mean : f32[4] {role=buffer, init=zeros}
var @var : f32[4] {role=buffer, init=ones}

graph @g(%x: f32[2,3,5,5], %r: bf16[2,4,3,3], %labels: i32[2]) {
  %x.bf16 = cast(%x) {dtype=bf16} : bf16[2,3,5,5]
  %w = param() {var=@w} : f32[4,3,3,3]
  %y = conv2d(%x.bf16, %w) {stride=1, pad=0} : bf16[2,4,3,3]
  %gamma = param() {var=@gamma} : f32[4]
  %beta = param() {var=@beta} : f32[4]
  %mean = param() {var=@mean} : f32[4]
  %var = param() {var=@var} : f32[4]
  %n, %save_mean, %save_invstd = batch_norm(%y, %gamma, %beta, %mean, %var) {training=true, momentum=0.1, eps=1e-05} : bf16[2,4,3,3], f32[4], f32[4]
  %s = add(%n, %r) : bf16[2,4,3,3]
  %flat = flatten(%s) : bf16[2,36]
  %logits = cast(%flat) {dtype=f32} : f32[2,36]
  %loss = softmax_cross_entropy(%logits, %labels) {reduction=mean, divisor=2} : f32[]
  return %loss
}
}
)";

TEST(Verifier, MixedPrecisionModuleVerifies) {
  auto m = parse(kMixed);
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(verifyModule(*m).ok()) << verifyModule(*m);
}

TEST(Verifier, AddOfBf16AndF32Activations) {
  auto m = parse(kMixed);
  ASSERT_NE(m, nullptr);
  m->graph("g")->findValue("r")->setType(TensorType{DType::kF32, {2, 4, 3, 3}});
  EXPECT_EQ(verifyError(*m),
            "graph @g: %s (add): a (%n: bf16[2,4,3,3]) and b (%r: f32[2,4,3,3]) must have the "
            "same type");
}

TEST(Verifier, LossOfBf16Logits) {
  auto m = parse(kMixed);
  ASSERT_NE(m, nullptr);
  Node* loss = definingNode(*m, "g", "loss");
  ASSERT_NE(loss, nullptr);
  loss->setOperand(0, m->graph("g")->findValue("flat"));  // the logits before their cast
  EXPECT_EQ(verifyError(*m),
            "graph @g: %loss (softmax_cross_entropy): logits (%flat: bf16[2,36]) must be f32");
}

// ---- operand dtypes (ir/ops.td's `labels: i32`, checked before the shape rule) ------------

TEST(Verifier, OperandDTypeFromTheSpec) {
  auto m = parse(kMixed);
  ASSERT_NE(m, nullptr);
  m->graph("g")->findValue("labels")->setType(TensorType{DType::kF32, {2}});
  EXPECT_EQ(verifyError(*m),
            "graph @g: %loss (softmax_cross_entropy): labels (%labels: f32[2]) must be i32");
}

TEST(Verifier, OperandDTypeOfAFloatOperand) {
  auto m = parse(kMixed);
  ASSERT_NE(m, nullptr);
  Node* flat = definingNode(*m, "g", "flat");
  ASSERT_NE(flat, nullptr);
  Node* conv = definingNode(*m, "g", "y");
  ASSERT_NE(conv, nullptr);
  conv->setOperand(0, m->graph("g")->findValue("labels"));
  // Checked before the shape rule, which would have named the rank first.
  EXPECT_EQ(verifyError(*m), "graph @g: %y (conv2d): x (%labels: i32[2]) must be f32 or bf16");
}

// IR text whose operand has a dtype its slot does not take is refused as it is read, by
// the same check (Graph::create runs it), naming node, operand and dtypes.
std::string textError(const std::string& text) {
  auto m = parseModule(text, "dtypes.tir");
  EXPECT_FALSE(m.ok()) << "parsed";
  return m.ok() ? std::string() : std::string(m.status().message());
}

TEST(Verifier, OperandDTypeInIrText) {
  EXPECT_EQ(textError(R"(module @m {
var @table : f32[5,3] {role=param, init=zeros}

graph @g(%ids: f32[4]) {
  %table = param() {var=@table} : f32[5,3]
  %y = embedding(%ids, %table) : f32[4,3]
  return %y
}
}
)"),
            "dtypes.tir:6:8: %y (embedding): ids (%ids: f32[4]) must be i32");
}

// An operand after an absent optional one is named and checked as its own slot:
// fold_batch_norm without b reads gamma second, sgd_update without momentum its lr_scale
// third.
TEST(Verifier, OperandDTypeAfterAnAbsentOptionalOne) {
  EXPECT_EQ(textError(R"(module @m {
graph @g(%w: f32[4,3,3,3], %gamma: bf16[4], %beta: f32[4], %mean: f32[4], %var: f32[4]) {
  %wf, %bf = fold_batch_norm(%w, %gamma, %beta, %mean, %var) {eps=1e-05} : f32[4,3,3,3], f32[4]
  return %wf
}
}
)"),
            "dtypes.tir:3:14: %wf (fold_batch_norm): gamma (%gamma: bf16[4]) must be f32");
  EXPECT_EQ(textError(R"(module @m {
var @w : f32[3] {role=param, init=zeros}
var @s : i32[1] {role=fed, init=zeros}

graph @g(%g: f32[3]) {
  %w = param() {var=@w} : f32[3]
  %s = param() {var=@s} : i32[1]
  sgd_update(%w, %g, %s) {lr=0.1, momentum=0, weight_decay=0}
  return
}
}
)"),
            "dtypes.tir:8:3: sgd_update: lr_scale (%s: i32[1]) must be f32");
}

TEST(Verifier, CastToTheSameDType) {
  auto m = parse(kMixed);
  ASSERT_NE(m, nullptr);
  Node* cast = definingNode(*m, "g", "logits");
  ASSERT_NE(cast, nullptr);
  cast->setOperand(0, m->graph("g")->findValue("s"));
  cast->setAttr("dtype", EnumWord{"bf16"});
  EXPECT_EQ(verifyError(*m),
            "graph @g: %logits (cast): x (%s: bf16[2,4,3,3]) is already bf16; a cast must change "
            "the dtype");
}

// ---- dataflow ---------------------------------------------------------------------------

TEST(Verifier, OperandUsedBeforeItIsDefined) {
  auto m = parse(kUnreplicated);
  ASSERT_NE(m, nullptr);
  Graph* g = m->graph("g");
  g->findValue("a")->def()->setOperand(0, g->findValue("b"));  // a cycle: a <- b <- a
  EXPECT_EQ(verifyError(*m),
            "graph @g: %a (relu, scope block, at net.cc:7): operand 0 %b is not defined before "
            "this node (operands must come from earlier nodes of the same graph)");
}

TEST(Verifier, OperandFromAnotherGraph) {
  auto m = parse(kReplicated);
  ASSERT_NE(m, nullptr);
  Node* relu = definingNode(*m, "train_step", "g.0");
  ASSERT_NE(relu, nullptr);
  relu->setOperand(0, m->graph("init")->findValue("w.0"));
  EXPECT_EQ(verifyError(*m),
            "graph @train_step: %g.0 (relu @cpu:0): operand 0 %w.0 is not defined before this "
            "node (operands must come from earlier nodes of the same graph)");
}

TEST(Verifier, ReturnsAValueTheGraphDoesNotDefine) {
  auto m = parse(kReplicated);
  ASSERT_NE(m, nullptr);
  m->graph("train_step")->setOutputs({m->graph("init")->findValue("w.1")});
  EXPECT_EQ(verifyError(*m), "graph @train_step: returns %w.1, which no node of the graph defines");
}

TEST(Verifier, UnknownVariable) {
  auto m = parse(kReplicated);
  ASSERT_NE(m, nullptr);
  Node* param = definingNode(*m, "train_step", "p.1");
  ASSERT_NE(param, nullptr);
  param->setAttr("var", Symbol{"nope"});
  EXPECT_EQ(verifyError(*m),
            "graph @train_step: %p.1 (param @cpu:1): refers to unknown variable @nope");
}

// ---- placement --------------------------------------------------------------------------

TEST(Verifier, OperandOnAnotherDevice) {
  auto m = parse(replicatedWith("%g.1 = relu(%p.1) @cpu:1", "%g.1 = relu(%p.0) @cpu:1"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(verifyError(*m),
            "graph @train_step: %g.1 (relu @cpu:1): operand 0 %p.0 is on cpu:0, expected cpu:1 "
            "(only collectives move values between devices)");
}

TEST(Verifier, HostValueConsumedByANonCollectiveNode) {
  auto m =
      parse(replicatedWith("%g.0 = relu(%p.0) @cpu:0 : f32[3]",
                           "%g.0 = relu(%p.0) @cpu:0 : f32[3]\n  %h = relu(%x) @cpu:0 : f32[4,3]"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(verifyError(*m),
            "graph @train_step: %h (relu @cpu:0): operand 0 %x is on the host, expected cpu:0 "
            "(only collectives move values between devices)");
}

TEST(Verifier, UnplacedNodeInAReplicatedModule) {
  auto m = parse(replicatedWith("%g.0 = relu(%p.0) @cpu:0 : f32[3]",
                                "%g.0 = relu(%p.0) @cpu:0 : f32[3]\n  %h = relu(%x) : f32[4,3]"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(verifyError(*m),
            "graph @train_step: %h (relu): is not placed; every node of a replicated module "
            "needs a device from [cpu:0, cpu:1]");
}

TEST(Verifier, NodePlacedButModuleNotReplicated) {
  auto m = parse(unreplicatedWith("%b = relu(%a) : f32[2,3]", "%b = relu(%a) @cpu:0 : f32[2,3]"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(verifyError(*m),
            "graph @g: %b (relu @cpu:0): is placed on a device but the module is not replicated");
}

TEST(Verifier, InputPlacedButModuleNotReplicated) {
  auto m = parse(unreplicatedWith("(%x: f32[2,3])", "(%x: f32[2,3] @cpu:0)"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(verifyError(*m),
            "graph @g: %x (input @cpu:0): is placed on a device but the module is not "
            "replicated");
}

TEST(Verifier, CollectiveInAnUnreplicatedModule) {
  auto m = parse(unreplicatedWith(
      "%b = relu(%a) : f32[2,3]",
      "%b = relu(%a) : f32[2,3]\n  %c, %d = split(%b) {axis=0, sizes=[1,1], devices=[cpu:0, "
      "cpu:1]} : f32[1,3], f32[1,3]"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(verifyError(*m),
            "graph @g: %c (split): collectives need a replicated module (run replicate first)");
}

TEST(Verifier, NodeOnADeviceNotInTheModule) {
  auto m = parse(replicatedWith("%g.1 = relu(%p.1) @cpu:1 : f32[3]",
                                "%g.1 = relu(%p.1) @cpu:1 : f32[3]\n  %h = constant() {value=0} "
                                "@cuda:0 : f32[]"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(verifyError(*m),
            "graph @train_step: %h (constant @cuda:0): is placed on cuda:0, which is not a "
            "module device [cpu:0, cpu:1]");
}

TEST(Verifier, CollectiveListsADeviceNotInTheModule) {
  auto m = parse(
      replicatedWith("sizes=[2,2], devices=[cpu:0, cpu:1]", "sizes=[2,2], devices=[cpu:0, cpu:2]"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(verifyError(*m),
            "graph @train_step: %x.0 (split): lists cpu:2, which is not a module device [cpu:0, "
            "cpu:1]");
}

// A collective may span a subset of the devices, but a gradient reduced over fewer than
// all of them is not a data-parallel gradient.
TEST(Verifier, GradientReducedOverTooFewDevices) {
  auto m = parse(replicatedWith(
      "%s.0, %s.1 = all_reduce(%g.0, %g.1) {op=sum, bucket=0, devices=[cpu:0, cpu:1]} : f32[3], "
      "f32[3]",
      "%s.0 = all_reduce(%g.0) {op=sum, bucket=0, devices=[cpu:0]} : f32[3]\n  %s.1 = "
      "all_reduce(%g.1) {op=sum, bucket=0, devices=[cpu:1]} : f32[3]"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(verifyError(*m),
            "graph @train_step: sgd_update(%p.0) (sgd_update @cpu:0): its gradient %s.0 is "
            "reduced over 1 of the 2 devices; every device's gradient must reach it");
}

// The devices list may come in any order: it orders the operands, the results and the
// groups, not the module.
TEST(Verifier, AllReduceDevicesInAnotherOrder) {
  auto m = parse(replicatedWith(
      "%s.0, %s.1 = all_reduce(%g.0, %g.1) {op=sum, bucket=0, devices=[cpu:0, cpu:1]}",
      "%s.1, %s.0 = all_reduce(%g.1, %g.0) {op=sum, bucket=0, devices=[cpu:1, cpu:0]}"));
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(verifyModule(*m).ok()) << verifyModule(*m);
}

TEST(Verifier, AllReduceOperandOnTheWrongDeviceGroup) {
  auto m = parse(replicatedWith("all_reduce(%g.0, %g.1)", "all_reduce(%g.1, %g.0)"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(verifyError(*m),
            "graph @train_step: %s.0 (all_reduce): operand 0 %g.1 is on cpu:1, expected cpu:0 "
            "(operands are grouped by device)");
}

TEST(Verifier, BroadcastFromTheHost) {
  auto m = parse(
      replicatedWith("%p.0 = param() {var=@w} @cpu:0 : f32[3]",
                     "%b.0, %b.1 = broadcast(%x) {devices=[cpu:0, cpu:1]} : f32[4,3], f32[4,3]\n"
                     "  %p.0 = param() {var=@w} @cpu:0 : f32[3]"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(verifyError(*m),
            "graph @train_step: %b.0 (broadcast): operand 0 %x is on the host, expected a device "
            "of the broadcast [cpu:0, cpu:1] (its source)");
}

// ---- gradients --------------------------------------------------------------------------

TEST(Verifier, ValueAllReducedTwice) {
  auto m = parse(replicatedWith(
      "  sgd_update(%p.0, %s.0)",
      "  %t.0, %t.1 = all_reduce(%g.0, %g.1) {op=sum, bucket=1, devices=[cpu:0, cpu:1]} : "
      "f32[3], f32[3]\n  sgd_update(%p.0, %s.0)"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(verifyError(*m),
            "graph @train_step: %t.0 (all_reduce): %g.0 is all-reduced twice (also by %s.0 "
            "(all_reduce)); expected exactly one");
}

TEST(Verifier, SgdUpdateWithALocalGradient) {
  auto m = parse(replicatedWith("sgd_update(%p.1, %s.1)", "sgd_update(%p.1, %g.1)"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(verifyError(*m),
            "graph @train_step: sgd_update(%p.1) (sgd_update @cpu:1): its gradient %g.1 is not "
            "all-reduced across devices; expected it to come from exactly one all_reduce");
}

TEST(Verifier, SgdUpdateWithALocalGradientIsFineBeforeCollectivesExist) {
  // Between replicate and insert-collectives there is no all_reduce yet.
  auto m = parse(replicatedWith(
      "  %s.0, %s.1 = all_reduce(%g.0, %g.1) {op=sum, bucket=0, devices=[cpu:0, cpu:1]} : "
      "f32[3], f32[3]\n  sgd_update(%p.0, %s.0) {lr=0.1, momentum=0, weight_decay=0} @cpu:0\n  "
      "sgd_update(%p.1, %s.1) {lr=0.1, momentum=0, weight_decay=0} @cpu:1\n  return %s.0",
      "  sgd_update(%p.0, %g.0) {lr=0.1, momentum=0, weight_decay=0} @cpu:0\n  sgd_update(%p.1, "
      "%g.1) {lr=0.1, momentum=0, weight_decay=0} @cpu:1\n  return %g.0"));
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(verifyModule(*m).ok()) << verifyModule(*m);
}

// ---- state ------------------------------------------------------------------------------

TEST(Verifier, ParamReadAfterTheVariableWasWrittenOnTheSameDevice) {
  auto m = parse(replicatedWith("  return %s.0",
                                "  %late.0 = param() {var=@w} @cpu:0 : f32[3]\n  return %s.0"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(verifyError(*m),
            "graph @train_step: %late.0 (param @cpu:0): reads @w after sgd_update(%p.0) "
            "(sgd_update @cpu:0) wrote it; reads must come before the write");
}

TEST(Verifier, ReadOnAnotherDeviceAfterAWriteIsFine) {
  // The replica on cpu:1 is only written by the later sgd_update on cpu:1.
  auto m =
      parse(replicatedWith("  sgd_update(%p.1, %s.1)",
                           "  %q.1 = param() {var=@w} @cpu:1 : f32[3]\n  sgd_update(%p.1, %s.1)"));
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(verifyModule(*m).ok()) << verifyModule(*m);
}

TEST(Verifier, VariableWrittenTwice) {
  auto m = parse(replicatedWith("  assign(%w.1) {var=@w} @cpu:1",
                                "  assign(%w.1) {var=@w} @cpu:1\n  assign(%w.0) {var=@w} @cpu:0"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(verifyError(*m),
            "graph @init: assign(%w.0) (assign @cpu:0): writes @w again; assign(%w.0) (assign "
            "@cpu:0) already wrote it in this graph");
}

TEST(Verifier, VariableWrittenTwiceInAnUnreplicatedModule) {
  auto m = parse(unreplicatedWith(
      "  return %b",
      "  %w = param() {var=@w} : f32[3]\n  %g = relu(%w) : f32[3]\n  sgd_update(%w, %g) {lr=0.1, "
      "momentum=0, weight_decay=0}\n  assign(%g) {var=@w}\n  return %b"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(verifyError(*m),
            "graph @g: assign(%g) (assign): writes @w again; sgd_update(%w) (sgd_update) already "
            "wrote it in this graph");
}

// ---- the zoo at every stage -------------------------------------------------------------

using CaseStage = std::pair<testing::ZooCase, size_t>;
class VerifierZooTest : public ::testing::TestWithParam<CaseStage> {};

TEST_P(VerifierZooTest, Verifies) {
  const auto& [zoo_case, stage] = GetParam();
  auto m = testing::buildAtStage(zoo_case, stage);
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(verifyModule(*m).ok()) << verifyModule(*m);
  const auto names = testing::stageNames(zoo_case.bf16);
  const size_t replicate = std::find(names.begin(), names.end(), "replicate") - names.begin();
  EXPECT_EQ(m->isReplicated(), stage >= replicate);
}

INSTANTIATE_TEST_SUITE_P(Zoo, VerifierZooTest, ::testing::ValuesIn(testing::allCaseStages()),
                         [](const ::testing::TestParamInfo<CaseStage>& info) {
                           return testing::caseName(info.param.first, info.param.second);
                         });

}  // namespace
}  // namespace tandem::ir

namespace tandem::ir {
namespace {

TEST(Verifier, ConcatGathersOneSliceFromEachDeviceInOrder) {
  const std::string good = "  return %s.0\n";
  const std::string gather =
      "  %all = concat(%g.0, %g.1) {axis=0, devices=[cpu:0]} : f32[6]\n  return %s.0\n";
  auto ok = parse(replicatedWith(good, gather));
  ASSERT_NE(ok, nullptr);
  EXPECT_TRUE(verifyModule(*ok).ok()) << verifyModule(*ok);

  auto swapped = parse(replicatedWith(
      good, "  %all = concat(%g.1, %g.0) {axis=0, devices=[cpu:0]} : f32[6]\n  return %s.0\n"));
  ASSERT_NE(swapped, nullptr);
  EXPECT_EQ(verifyError(*swapped),
            "graph @train_step: %all (concat): operand 0 %g.1 is on cpu:1, expected cpu:0");

  auto short_by_one = parse(replicatedWith(
      good, "  %all = concat(%g.0) {axis=0, devices=[cpu:0]} : f32[3]\n  return %s.0\n"));
  ASSERT_NE(short_by_one, nullptr);
  EXPECT_EQ(verifyError(*short_by_one),
            "graph @train_step: %all (concat): gathers 1 slices, expected one from each of "
            "[cpu:0, cpu:1]");
}

}  // namespace
}  // namespace tandem::ir
