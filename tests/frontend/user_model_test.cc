// A model a user writes with the public DSL: blocks as functions, scopes, unnamed layers.
// Default names must be unique and identical in train_step and eval_step, so that both
// steps share one set of variables.

#include <string>
#include <vector>

#include "frontend/build_module.h"
#include "frontend/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

/// conv-bn-relu twice, every layer left unnamed.
Tensor block(Builder& b, Tensor x, int64_t channels) {
  auto s = b.scope("block");
  for (int i = 0; i < 2; ++i)
    x = b.relu(b.batchNorm(b.conv2d(x, {.out_channels = channels, .pad = 1})));
  return x;
}

ModelSpec userModel() {
  return classifierModel("user", {3, 16, 16}, 5, [](Builder& b, Tensor x) {
    x = b.conv2d(x, {.out_channels = 8, .kernel = 1});  // top level: "conv"
    {
      auto s = b.scope("features");
      x = block(b, x, 8);  // the same scope twice: numbering goes on
      x = block(b, x, 8);
      x = b.maxPool2d(x, {.kernel = 2});
    }
    return b.linear(b.flatten(b.globalAvgPool(x)), {.out_features = 5});
  });
}

std::vector<std::string> varNames(const ir::Module& m) {
  std::vector<std::string> out;
  for (const ir::Var& v : m.vars()) out.push_back(v.name);
  return out;
}

/// Result names of the nodes the model's layers made (not inputs, params, loss).
std::vector<std::string> layerNames(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const auto& n : g.nodes()) {
    if (ir::isSource(n->op())) continue;
    out.push_back(n->result()->name() + " " + std::string(n->opName()) + " " + n->scope());
  }
  return out;
}

TEST(UserModelTest, UnnamedLayersGetUniqueDefaultNamesPerScope) {
  auto m = buildModule(userModel(), {.batch = 4});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(varNames(**m), ElementsAreArray<std::string>({
                                 "conv.w",
                                 "conv.b",  //
                                 "features.block.conv.w",
                                 "features.block.conv.b",
                                 "features.block.bn.gamma",
                                 "features.block.bn.beta",
                                 "features.block.bn.running_mean",
                                 "features.block.bn.running_var",  //
                                 "features.block.conv_1.w",
                                 "features.block.conv_1.b",
                                 "features.block.bn_1.gamma",
                                 "features.block.bn_1.beta",
                                 "features.block.bn_1.running_mean",
                                 "features.block.bn_1.running_var",  //
                                 "features.block.conv_2.w",
                                 "features.block.conv_2.b",
                                 "features.block.bn_2.gamma",
                                 "features.block.bn_2.beta",
                                 "features.block.bn_2.running_mean",
                                 "features.block.bn_2.running_var",  //
                                 "features.block.conv_3.w",
                                 "features.block.conv_3.b",
                                 "features.block.bn_3.gamma",
                                 "features.block.bn_3.beta",
                                 "features.block.bn_3.running_mean",
                                 "features.block.bn_3.running_var",  //
                                 "fc.w",
                                 "fc.b",
                             }));
  EXPECT_EQ(ir::toString((*m)->findVar("fc.w")->type), "f32[5,8]");
  // 8*3+8 + 4 * (8*8*9+8 + 16) + 5*8+5
  EXPECT_EQ((*m)->countElements(ir::VarRole::kParam), 32 + 4 * (584 + 16) + 45);
}

TEST(UserModelTest, TrainAndEvalStepsNameEveryLayerTheSame) {
  auto m = buildModule(userModel(), {.batch = 4});
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<std::string> train = layerNames(*(*m)->graph(ir::kTrainGraph));
  std::vector<std::string> eval = layerNames(*(*m)->graph(ir::kEvalGraph));
  EXPECT_EQ(train, eval);
  ASSERT_GE(train.size(), 4u);
  EXPECT_THAT(std::vector<std::string>(train.begin(), train.begin() + 4),
              ElementsAre("conv conv2d conv", "features.block.conv conv2d features.block.conv",
                          "features.block.bn batch_norm features.block.bn",
                          "features.block.relu relu features.block.relu"));
  EXPECT_EQ(train[train.size() - 3], "fc linear fc");
  EXPECT_EQ(train[train.size() - 6], "features.maxpool max_pool2d features.maxpool");
}

TEST(UserModelTest, MlpWithGeluAndTanhNamesItsActivations) {
  // The activations of an MLP since 2020: exact GELU, its tanh form, tanh.
  ModelSpec spec = classifierModel("mlp", {1, 4, 4}, 3, [](Builder& b, Tensor x) {
    auto s = b.scope("mlp");
    x = b.gelu(b.linear(b.flatten(x), {.out_features = 8}));
    x = b.gelu(b.linear(x, {.out_features = 8}), Builder::Gelu::kTanh);
    return b.linear(b.tanh(x), {.out_features = 3});
  });
  auto m = buildModule(spec, {.batch = 2});
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<std::string> train = layerNames(*(*m)->graph(ir::kTrainGraph));
  EXPECT_EQ(train, layerNames(*(*m)->graph(ir::kEvalGraph)));
  EXPECT_THAT(train,
              ::testing::IsSupersetOf({"mlp.gelu gelu mlp.gelu", "mlp.gelu_1 gelu_tanh mlp.gelu_1",
                                       "mlp.tanh tanh mlp.tanh"}));
}

TEST(UserModelTest, RowsAttendingToRowsUseMatmulReshapeAndTranspose) {
  // Each image's 4 rows of 4 pixels as tokens: scores = rows rows^T, then the scores
  // transposed and flattened into a linear head.
  ModelSpec spec = classifierModel("rows", {1, 4, 4}, 3, [](Builder& b, Tensor x) {
    Tensor rows = b.reshape(x, {-1, 4, 4});
    Tensor scores = b.matmul(rows, rows, {.trans_b = true});
    Tensor t = b.transpose(scores, {0, 2, 1});
    return b.linear(b.reshape(t, {-1, 16}), {.out_features = 3});
  });
  auto m = buildModule(spec, {.batch = 2});
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<std::string> train = layerNames(*(*m)->graph(ir::kTrainGraph));
  EXPECT_EQ(train, layerNames(*(*m)->graph(ir::kEvalGraph)));
  EXPECT_THAT(train, ::testing::IsSupersetOf({"reshape reshape reshape", "matmul matmul matmul",
                                              "transpose transpose transpose",
                                              "reshape_1 reshape reshape_1"}));
}

TEST(UserModelTest, DropoutReadsStepInTrainingAndIsTheIdentityInEvaluation) {
  ModelSpec spec = classifierModel("dropped", {1, 4, 4}, 3, [](Builder& b, Tensor x) {
    auto s = b.scope("mlp");
    x = b.dropout(b.linear(b.flatten(x), {.out_features = 8}), 0.1);
    return b.linear(b.dropout(x, 0.3), {.out_features = 3});
  });
  auto m = buildModule(spec, {.batch = 2});
  ASSERT_TRUE(m.ok()) << m.status();
  const ir::Var* step = (*m)->findVar(ir::kStepVar);
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->type, (ir::TensorType{ir::DType::kI32, {1}}));
  EXPECT_EQ(step->role, ir::VarRole::kFed);
  std::vector<const ir::Node*> drops;
  for (const auto& n : (*m)->graph(ir::kTrainGraph)->nodes())
    if (ir::DropoutView::is(*n)) drops.push_back(n.get());
  ASSERT_EQ(drops.size(), 2u);
  // Each its own masks (mask_id in build order), both from the one read of @step.
  EXPECT_EQ(drops[0]->result()->name(), "mlp.dropout");
  EXPECT_EQ(drops[1]->result()->name(), "mlp.dropout_1");
  EXPECT_EQ(ir::DropoutView(*drops[0]).mask_id(), 0);
  EXPECT_EQ(ir::DropoutView(*drops[1]).mask_id(), 1);
  EXPECT_EQ(ir::DropoutView(*drops[0]).p(), 0.1);
  EXPECT_EQ(ir::DropoutView(*drops[1]).p(), 0.3);
  EXPECT_EQ(drops[0]->operand(1), drops[1]->operand(1));
  EXPECT_EQ(ir::ParamView(*drops[0]->operand(1)->def()).var(), ir::kStepVar);
  // Evaluation: no dropout, no @step; the layers after it read what dropout read.
  std::vector<std::string> eval = layerNames(*(*m)->graph(ir::kEvalGraph));
  EXPECT_THAT(eval, ::testing::Not(::testing::Contains(::testing::HasSubstr("dropout"))));
  for (const auto& n : (*m)->graph(ir::kEvalGraph)->nodes()) {
    if (ir::ParamView::is(*n)) {
      EXPECT_NE(ir::ParamView(*n).var(), ir::kStepVar);
    }
  }
  EXPECT_THAT(eval, ::testing::Contains("mlp.fc_1 linear mlp.fc_1"));
}

TEST(UserModelTest, DropoutWithPOutsideZeroToOneIsAnErrorNamingTheLayer) {
  for (double p : {1.0, -0.5}) {
    ModelSpec spec = classifierModel("dropped", {1, 4, 4}, 3, [p](Builder& b, Tensor x) {
      return b.linear(b.dropout(b.flatten(x), p), {.out_features = 3});
    });
    auto m = buildModule(spec, {.batch = 2});
    ASSERT_FALSE(m.ok());
    EXPECT_THAT(std::string(m.status().message()),
                ::testing::AllOf(::testing::HasSubstr("model dropped"),
                                 ::testing::HasSubstr("%dropout"), ::testing::HasSubstr("p")))
        << m.status();
  }
}

TEST(UserModelTest, ExplicitNameRepeatedSharesTheWeights) {
  // Naming two layers alike is how a model ties weights: one variable, two nodes.
  ModelSpec spec = classifierModel("tied", {1, 8, 8}, 2, [](Builder& b, Tensor x) {
    Tensor y = b.conv2d(x, {.out_channels = 1, .pad = 1, .name = "shared"});
    y = b.conv2d(y, {.out_channels = 1, .pad = 1, .name = "shared"});
    return b.linear(b.flatten(y), {.out_features = 2});
  });
  auto m = buildModule(spec, {.batch = 2});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(varNames(**m), ElementsAre("shared.w", "shared.b", "fc.w", "fc.b"));
  std::vector<const ir::Node*> convs;
  for (const auto& n : (*m)->graph(ir::kTrainGraph)->nodes())
    if (n->op() == ir::Op::kConv2d) convs.push_back(n.get());
  ASSERT_EQ(convs.size(), 2u);
  EXPECT_EQ(convs[0]->operand(1), convs[1]->operand(1));  // one read of @shared.w
  EXPECT_EQ(convs[0]->result()->name(), "shared");
  EXPECT_EQ(convs[1]->result()->name(), "shared_1");
}

TEST(UserModelTest, ClassTokenAndPositionEmbeddingUseTheAxisOps) {
  // A ViT's embedding and head on 4 rows of 4 pixels: a class token [1,1,4] prepended to
  // the rows (concat repeats it over the batch), a position embedding [1,5,4] added with
  // broadcasting, scaled, the class token taken back out beside the rows' mean.
  ModelSpec spec = classifierModel("tokens", {1, 4, 4}, 3, [](Builder& b, Tensor x) {
    const ir::Initializer normal{ir::Initializer::Kind::kNormal, 0.02};
    Tensor rows = b.reshape(x, {-1, 4, 4});
    Tensor cls = b.variable("cls", {ir::DType::kF32, {1, 1, 4}}, ir::VarRole::kParam, normal);
    Tensor pos = b.variable("pos", {ir::DType::kF32, {1, 5, 4}}, ir::VarRole::kParam, normal);
    Tensor t = b.addBroadcast(b.concat({cls, rows}, 1), pos);
    t = b.mulBroadcast(b.scale(t, 0.5), t);
    Tensor head = b.reshape(b.slice(t, 1, 0, 1), {-1, 4});
    Tensor z = b.add(head, b.mean(t, 1));
    return b.linear(b.add(z, b.sum(t, -2)), {.out_features = 3});
  });
  auto m = buildModule(spec, {.batch = 2});
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<std::string> train = layerNames(*(*m)->graph(ir::kTrainGraph));
  EXPECT_EQ(train, layerNames(*(*m)->graph(ir::kEvalGraph)));
  EXPECT_THAT(train, ::testing::IsSupersetOf({"concat concat_axis concat", "add add_bcast add",
                                              "scale scale scale", "mul mul_bcast mul",
                                              "slice slice_axis slice", "mean reduce_mean mean",
                                              "sum reduce_sum sum"}));
  for (const auto& n : (*m)->graph(ir::kTrainGraph)->nodes()) {
    if (n->op() == ir::Op::kConcatAxis) {
      EXPECT_EQ(n->result()->type(), (ir::TensorType{ir::DType::kF32, {2, 5, 4}}));
    }
    if (n->op() == ir::Op::kSliceAxis) {
      EXPECT_EQ(n->result()->type(), (ir::TensorType{ir::DType::kF32, {2, 1, 4}}));
    }
  }
}

}  // namespace
}  // namespace tandem
