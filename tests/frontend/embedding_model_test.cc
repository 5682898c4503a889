// Builder::embedding (nn.Embedding: a table variable, i32 ids of any shape) and the
// training loss's label smoothing (BuildOptions::label_smoothing): what they build, and
// bad inputs as errors naming the layer or the setting.

#include <string>

#include "frontend/build_module.h"
#include "frontend/builder_internals.h"
#include "frontend/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"

namespace tandem {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

/// A training graph on a fresh module with an i32 ids input [2,3].
struct TokenGraph {
  ir::Module m{"tokens"};
  Builder b = BuilderInternals::make(m, BuildOptions{.batch = 2});
  Tensor ids;
  TokenGraph() {
    BuilderInternals::beginGraph(b, *m.addGraph(std::string(ir::kTrainGraph)), /*training=*/true);
    ids = BuilderInternals::addInput(b, "ids", ir::TensorType{ir::DType::kI32, {2, 3}});
  }
};

TEST(EmbeddingModelTest, EmbeddingReadsATableVariableAndAppendsItsWidth) {
  TokenGraph t;
  Tensor a = t.b.embedding(t.ids, 10, 4, "tok");
  Tensor unnamed = t.b.embedding(t.ids, 6, 2);
  Tensor again = t.b.embedding(t.ids, 10, 4, "tok");  // the same name: the same table
  ASSERT_TRUE(t.b.status().ok()) << t.b.status();
  EXPECT_EQ(a.value()->type(), (ir::TensorType{ir::DType::kF32, {2, 3, 4}}));
  EXPECT_EQ(unnamed.value()->type(), (ir::TensorType{ir::DType::kF32, {2, 3, 2}}));
  const ir::Var* table = t.m.findVar("tok.table");
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->type, (ir::TensorType{ir::DType::kF32, {10, 4}}));
  EXPECT_EQ(table->role, ir::VarRole::kParam);
  EXPECT_EQ(table->init, (ir::Initializer{ir::Initializer::Kind::kNormal, 1.0}));
  EXPECT_NE(t.m.findVar("embedding.table"), nullptr);
  ASSERT_TRUE(ir::EmbeddingView::is(*a.value()->def()));
  EXPECT_EQ(ir::EmbeddingView(*a.value()->def()).ids(), t.ids.value());
  EXPECT_EQ(a.value()->def()->operand(1), again.value()->def()->operand(1));
}

TEST(EmbeddingModelTest, BadSizesAndFloatIdsAreErrorsNamingTheLayer) {
  {
    TokenGraph t;
    t.b.embedding(t.ids, 0, 4, "empty");
    EXPECT_THAT(std::string(t.b.status().message()), AllOf(HasSubstr("layer empty (embedding)"),
                                                           HasSubstr("vocab and dim must be >= 1")))
        << t.b.status();
  }
  {
    TokenGraph t;
    Tensor x = BuilderInternals::addInput(t.b, "x", ir::TensorType{ir::DType::kF32, {2, 3}});
    t.b.embedding(x, 5, 4, "floaty");
    EXPECT_THAT(std::string(t.b.status().message()),
                AllOf(HasSubstr("floaty"), HasSubstr("must be i32")))
        << t.b.status();
  }
}

ModelSpec smallModel() {
  return classifierModel("small", {1, 2, 2}, 3, [](Builder& b, Tensor x) {
    return b.linear(b.flatten(x), {.out_features = 3});
  });
}

const ir::Node* lossOf(const ir::Module& m, absl::string_view graph) {
  for (const auto& n : m.graph(graph)->nodes())
    if (ir::SoftmaxCrossEntropyView::is(*n)) return n.get();
  return nullptr;
}

TEST(EmbeddingModelTest, LabelSmoothingIsTheTrainingLossesAndTheTestLossStaysPlain) {
  auto m = buildModule(smallModel(), {.batch = 4, .label_smoothing = 0.1});
  ASSERT_TRUE(m.ok()) << m.status();
  const ir::Node* train = lossOf(**m, ir::kTrainGraph);
  const ir::Node* eval = lossOf(**m, ir::kEvalGraph);
  ASSERT_NE(train, nullptr);
  ASSERT_NE(eval, nullptr);
  EXPECT_EQ(ir::SoftmaxCrossEntropyView(*train).label_smoothing(), 0.1);
  EXPECT_EQ(ir::SoftmaxCrossEntropyView(*eval).label_smoothing(), 0.0);
  auto plain = buildModule(smallModel(), {.batch = 4});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(ir::SoftmaxCrossEntropyView(*lossOf(**plain, ir::kTrainGraph)).label_smoothing(), 0.0);
}

TEST(EmbeddingModelTest, LabelSmoothingOutsideZeroToOneIsAnError) {
  for (double eps : {1.0, -0.01, 2.0}) {
    auto m = buildModule(smallModel(), {.batch = 4, .label_smoothing = eps});
    ASSERT_FALSE(m.ok()) << eps;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr("label smoothing must be in [0, 1)"));
  }
}

}  // namespace
}  // namespace tandem
