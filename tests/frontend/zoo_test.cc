// The model zoo: parameter counts against the published numbers, logits shapes, variable
// names from scopes, and batch norm's mode in the training and evaluation steps.

#include "frontend/zoo/zoo.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "frontend/build_module.h"
#include "frontend/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

/// The logits of a step graph: the first operand of its softmax_cross_entropy node.
const ir::TensorType* logitsType(const ir::Graph& g) {
  for (const auto& n : g.nodes())
    if (n->op() == ir::Op::kSoftmaxCrossEntropy) return &n->operand(0)->type();
  return nullptr;
}

/// Names of the variables a graph reads (through param nodes).
std::set<std::string> varsRead(const ir::Graph& g) {
  std::set<std::string> out;
  for (const auto& n : g.nodes())
    if (n->op() == ir::Op::kParam) out.insert(n->symbolAttr("var"));
  return out;
}

/// The variables batch_norm nodes read (its 4 state operands), and their training flags.
struct BatchNormUse {
  std::set<std::string> vars;
  std::multiset<bool> training;
};
BatchNormUse batchNormUse(const ir::Graph& g) {
  BatchNormUse out;
  for (const auto& n : g.nodes()) {
    if (n->op() != ir::Op::kBatchNorm) continue;
    out.training.insert(n->boolAttr("training"));
    for (size_t i = 1; i < n->numOperands(); ++i)
      out.vars.insert(n->operand(i)->def()->symbolAttr("var"));
  }
  return out;
}

struct CountCase {
  const char* model;
  int64_t params;
};

class ZooParamCountTest : public ::testing::TestWithParam<CountCase> {};

// ResNet-18 is the lessons' small-image variant (convs with biases, no BN on the
// projection); the ImageNet ResNets match torchvision's parameter counts.
TEST_P(ZooParamCountTest, TrainedParametersMatchPublishedCount) {
  auto m = testing::buildZooModel(GetParam().model, 2);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->countElements(ir::VarRole::kParam), GetParam().params);
}

INSTANTIATE_TEST_SUITE_P(
    Zoo, ZooParamCountTest,
    ::testing::Values(CountCase{"lenet", 129'068}, CountCase{"resnet18", 11'175'818},
                      CountCase{"resnet34", 21'797'672}, CountCase{"resnet50", 25'557'032},
                      CountCase{"resnet101", 44'549'160}, CountCase{"resnet152", 60'192'808},
                      // vit: the patch conv 1,088, class token 64, position embedding 3,200, six
                      // blocks of 33,216 (two LayerNorms 256, q/k/v/proj 16,640, MLP 16,576
                      // with biases), final LayerNorm 128, head 650.
                      CountCase{"vit", 205'962}, CountCase{"mlp", 269'322},
                      // gpt: wte 8,320, wpe 16,384, four blocks of 198,272, ln_f 256.
                      CountCase{"gpt", 818'048}),
    [](const auto& info) { return std::string(info.param.model); });

TEST(ZooTest, NamesAndUnknownModel) {
  EXPECT_THAT(zoo::modelNames(),
              ElementsAre("lenet", "lenet_bn", "resnet18", "resnet34", "resnet50", "resnet101",
                          "resnet152", "vit", "mlp", "gpt"));
  auto spec = zoo::modelByName("resnet19");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(),
            "unknown model 'resnet19' (known: lenet, lenet_bn, resnet18, resnet34, resnet50, "
            "resnet101, resnet152, vit, mlp, gpt)");
}

TEST(ZooTest, Resnet18TakesChannelsClassesAndImageSize) {
  // 3 input channels add 64*2*3*3 stem weights; 100 classes add 512*90+90 head weights.
  auto m = buildModule(zoo::resnet18({.image_shape = {3, 32, 32}, .classes = 100}), {.batch = 4});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->countElements(ir::VarRole::kParam), 11'175'818 + 64 * 2 * 9 + 512 * 90 + 90);
  EXPECT_EQ(ir::toString((*m)->findVar("stem.conv.w")->type), "f32[64,3,3,3]");
  EXPECT_EQ(ir::toString(*logitsType(*(*m)->graph(ir::kTrainGraph))), "f32[4,100]");
}

TEST(ZooTest, LogitsHaveBatchTimesClasses) {
  for (auto [name, classes] : {std::pair{"lenet", 10}, {"resnet18", 10}, {"resnet50", 1000}}) {
    SCOPED_TRACE(name);
    auto m = testing::buildZooModel(name, 6);
    ASSERT_NE(m, nullptr);
    for (absl::string_view g : {ir::kTrainGraph, ir::kEvalGraph}) {
      const ir::TensorType* t = logitsType(*m->graph(g));
      ASSERT_NE(t, nullptr) << g;
      EXPECT_EQ(ir::toString(*t), absl::StrCat("f32[6,", classes, "]")) << g;
    }
  }
}

TEST(ZooTest, Resnet18VariablesAreNamedByScope) {
  auto m = testing::buildZooModel("resnet18", 2);
  ASSERT_NE(m, nullptr);
  struct Expected {
    const char* name;
    const char* type;
    ir::VarRole role;
  };
  for (const Expected& e : std::initializer_list<Expected>{
           {"stem.conv.w", "f32[64,1,3,3]", ir::VarRole::kParam},
           {"stem.bn.gamma", "f32[64]", ir::VarRole::kParam},
           {"stem.bn.running_mean", "f32[64]", ir::VarRole::kBuffer},
           {"stem.bn.running_var", "f32[64]", ir::VarRole::kBuffer},
           {"stage1.block1.conv2.w", "f32[64,64,3,3]", ir::VarRole::kParam},
           {"stage2.block0.conv1.w", "f32[128,64,3,3]", ir::VarRole::kParam},
           {"stage2.block0.conv1.b", "f32[128]", ir::VarRole::kParam},
           {"stage2.block0.proj.w", "f32[128,64,1,1]", ir::VarRole::kParam},
           {"stage4.block1.bn2.beta", "f32[512]", ir::VarRole::kParam},
           {"head.fc.w", "f32[10,512]", ir::VarRole::kParam},
       }) {
    const ir::Var* v = m->findVar(e.name);
    ASSERT_NE(v, nullptr) << e.name;
    EXPECT_EQ(ir::toString(v->type), e.type) << e.name;
    EXPECT_EQ(v->role, e.role) << e.name;
  }
  // Only downsampling blocks project their shortcut.
  EXPECT_EQ(m->findVar("stage1.block0.proj.w"), nullptr);
  EXPECT_EQ(m->findVar("stage2.block1.proj.w"), nullptr);
  // 17 batch norms with 2 buffers each; nothing else is a buffer.
  int buffers = 0;
  for (const ir::Var& v : m->vars()) buffers += v.role == ir::VarRole::kBuffer;
  EXPECT_EQ(buffers, 34);
}

TEST(ZooTest, Resnet50VariablesAreNamedByScope) {
  auto m = testing::buildZooModel("resnet50", 1);
  ASSERT_NE(m, nullptr);
  ASSERT_NE(m->findVar("stem.conv.w"), nullptr);
  EXPECT_EQ(ir::toString(m->findVar("stem.conv.w")->type), "f32[64,3,7,7]");
  ASSERT_NE(m->findVar("stage1.block0.conv_proj.w"), nullptr);
  EXPECT_EQ(ir::toString(m->findVar("stage1.block0.conv_proj.w")->type), "f32[256,64,1,1]");
  ASSERT_NE(m->findVar("stage3.block5.bn3.running_var"), nullptr);
  EXPECT_EQ(m->findVar("stage3.block5.bn3.running_var")->role, ir::VarRole::kBuffer);
  EXPECT_EQ(m->findVar("stage3.block6.conv1.w"), nullptr);  // stage 3 has 6 blocks
  EXPECT_EQ(m->findVar("stem.conv.b"), nullptr);            // bias-free convolutions
}

TEST(ZooTest, NodesCarryScopeAndSourceLine) {
  auto m = testing::buildZooModel("resnet18", 2);
  ASSERT_NE(m, nullptr);
  const ir::Node* conv = nullptr;
  const ir::Node* weight = nullptr;
  for (const auto& n : m->graph(ir::kTrainGraph)->nodes()) {
    if (n->op() == ir::Op::kConv2d && n->scope() == "stage2.block0.conv1") conv = n.get();
    if (n->op() == ir::Op::kParam && n->symbolAttr("var") == "stage2.block0.conv1.w")
      weight = n.get();
  }
  ASSERT_NE(conv, nullptr);
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(conv->result()->name(), "stage2.block0.conv1");
  EXPECT_THAT(conv->location(), MatchesRegex("resnet\\.cc:[0-9]+"));
  EXPECT_EQ(conv->operand(1), weight->result());
  EXPECT_EQ(weight->scope(), "stage2.block0");  // the scope the variable was read in
}

TEST(ZooTest, BatchNormTrainsInTrainStepAndUsesRunningStatsInEvalStep) {
  for (const char* name : {"resnet18", "resnet50"}) {
    SCOPED_TRACE(name);
    auto m = testing::buildZooModel(name, 2);
    ASSERT_NE(m, nullptr);
    BatchNormUse train = batchNormUse(*m->graph(ir::kTrainGraph));
    BatchNormUse eval = batchNormUse(*m->graph(ir::kEvalGraph));
    ASSERT_FALSE(train.training.empty());
    EXPECT_EQ(train.training.count(true), train.training.size());
    EXPECT_EQ(eval.training.count(false), eval.training.size());
    EXPECT_EQ(train.training.size(), eval.training.size());
    // Both steps read the same gamma, beta and running statistics.
    EXPECT_EQ(train.vars, eval.vars);
    EXPECT_TRUE(train.vars.contains("stem.bn.running_mean"));
  }
}

TEST(ZooTest, BothStepsReadEveryVariableAndInitWritesEachOnce) {
  auto m = testing::buildZooModel("resnet18", 2);
  ASSERT_NE(m, nullptr);
  std::set<std::string> all;
  for (const ir::Var& v : m->vars()) all.insert(v.name);
  EXPECT_EQ(varsRead(*m->graph(ir::kTrainGraph)), all);
  EXPECT_EQ(varsRead(*m->graph(ir::kEvalGraph)), all);
  std::multiset<std::string> assigned;
  for (const auto& n : m->graph(ir::kInitGraph)->nodes())
    if (n->op() == ir::Op::kAssign) assigned.insert(n->symbolAttr("var"));
  EXPECT_EQ(assigned, std::multiset<std::string>(all.begin(), all.end()));
}

TEST(ZooTest, StepsTakeImagesAndLabelsAndReturnLossAndCorrectCount) {
  auto m = testing::buildZooModel("lenet", 32);
  ASSERT_NE(m, nullptr);
  for (absl::string_view name : {ir::kTrainGraph, ir::kEvalGraph}) {
    const ir::Graph& g = *m->graph(name);
    std::vector<ir::Node*> inputs = g.inputs();
    ASSERT_EQ(inputs.size(), 2u) << name;
    EXPECT_EQ(ir::toString(inputs[0]->result()->type()), "f32[32,1,28,28]");
    EXPECT_EQ(ir::toString(inputs[1]->result()->type()), "i32[32]");
    ASSERT_EQ(g.outputs().size(), 2u) << name;
    EXPECT_EQ(g.outputs()[0]->def()->op(), ir::Op::kSoftmaxCrossEntropy);
    EXPECT_EQ(g.outputs()[1]->def()->op(), ir::Op::kAccuracy);
    // Training averages over the global batch; evaluation sums (devices add up later).
    EXPECT_EQ(g.outputs()[0]->def()->enumAttr("reduction"),
              name == ir::kTrainGraph ? "mean" : "sum");
  }
  EXPECT_THAT(testing::canonical(*m), HasSubstr("graph @train_step(%x: f32[32,1,28,28]"));
}

}  // namespace
}  // namespace tandem
