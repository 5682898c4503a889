// embedding and label-smoothed softmax_cross_entropy as ops: through their kernel slots and
// gradient rules (GraphEval: the rules' nodes run on the CPU kernels too) against PyTorch
// 1.13 (tests/data/gen_embedding_loss_refs.py), against central differences, with bf16
// gradients, and bad ids, operands and attributes as errors naming the node.

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/bf16.h"
#include "graph_eval.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "kernel_test_util.h"
#include "tests/cores/ref_case.h"

namespace tandem::testing {
namespace {

ir::Shape shapeOf(const RefTensor& t) { return ir::Shape(t.shape.begin(), t.shape.end()); }

RefCase load(const std::string& name) {
  // RefCase::load reads tests/data/transformer_refs/<name>.ref; these cases are in the
  // sibling folder, which gen_transformer_refs.py (it clears its folder) does not touch.
  auto c = RefCase::load("../embedding_loss_refs/" + name);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : RefCase();
}

void fillIds(Buffer& b, const std::vector<int32_t>& ids) {
  ASSERT_EQ(b.size(), static_cast<int64_t>(ids.size()));
  for (size_t i = 0; i < ids.size(); ++i) b.i32()[i] = ids[i];
}

/// ids and the table as graph inputs, the embedding node, dy and its gradient rule.
struct EmbeddingGraph {
  GraphEval e;
  ir::Value *ids, *table, *dy = nullptr, *dtable = nullptr;
  ir::Node* node = nullptr;
  EmbeddingGraph(const ir::Shape& ids_shape, int64_t vocab, int64_t width,
                 ir::DType dy_dtype = ir::DType::kF32) {
    ids = e.input("ids", ir::TensorType{ir::DType::kI32, ids_shape});
    table = e.input("table", f32Of({vocab, width}));
    auto n = e.add(ir::EmbeddingArgs{.ids = ids, .table = table}.spec({.names = {"emb"}}));
    EXPECT_TRUE(n.ok()) << n.status();
    if (!n.ok()) return;
    node = *n;
    ir::TensorType dy_type = node->result()->type();
    dy_type.dtype = dy_dtype;
    dy = e.input("dy", dy_type);
    const std::vector<ir::Value*> grads = e.grad(*node, dy);
    EXPECT_EQ(grads.size(), 2u);
    EXPECT_EQ(grads[0], nullptr) << "ids are integers: no gradient";
    dtable = grads[1];
  }
};

// A lookup is a copy: PyTorch's values exactly. The table's gradient adds up to 6 rows of
// dy per table row (the cases pick one row 2 to 6 times), in index order here and in
// PyTorch's order there: a few f32 roundings of the rows' scale, below 1e-6 of it.
TEST(Embedding, LookupAndTableGradientMatchPyTorch) {
  for (const char* name : {"embedding_tokens", "embedding_flat", "embedding_3d"}) {
    SCOPED_TRACE(name);
    const RefCase c = load(name);
    EmbeddingGraph g(shapeOf(c.tensor("ids")), c.integer("vocab"), c.integer("width"));
    ASSERT_NE(g.node, nullptr);
    EXPECT_EQ(g.node->result()->type(), f32Of(c.tensor("y").shape));
    ASSERT_NE(g.dtable, nullptr);
    EXPECT_EQ(g.dtable->type(), g.table->type());
    ASSERT_TRUE(ir::EmbeddingBackwardView::is(*g.dtable->def()));
    fillIds(g.e.buffer(g.ids), c.tensor("ids").i32());
    fillFrom(g.e.buffer(g.table), c.tensor("table").values);
    fillFrom(g.e.buffer(g.dy), c.tensor("dy").values);
    g.e.buffer(g.dtable).f32()[0] = 99.0f;  // overwritten: the kernel zeroes the table first
    g.e.run();
    EXPECT_EQ(relativeError(valuesOf(g.e.buffer(g.node->result())), c.tensor("y")), 0.0);
    EXPECT_LE(relativeError(valuesOf(g.e.buffer(g.dtable)), c.tensor("dtable")), 1e-6);
  }
}

// y is linear in the table (a copy), so the central difference of <w, y> in one table
// entry is exact in exact arithmetic for any h; with entries and w multiples of 2^-4 in
// [-2, 2] and h = 0.5 every f32 value and product is exact and the double sums too: the
// finite difference equals the gradient to the bit but for the order of the table
// gradient's f32 sums (at most 24 terms of the same grid: exact as well). 1e-6 leaves
// room for nothing but a wrong rule.
TEST(Embedding, TableGradientMatchesFiniteDifferences) {
  EmbeddingGraph g({3, 4}, 5, 3);
  ASSERT_NE(g.node, nullptr);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> grid(-32, 32), id(0, 4);
  Buffer& ids = g.e.buffer(g.ids);
  for (int64_t i = 0; i < ids.size(); ++i) ids.i32()[i] = id(rng);
  ids.i32()[5] = ids.i32()[2] = ids.i32()[0];  // a row picked three times at least
  Buffer &table = g.e.buffer(g.table), &w = g.e.buffer(g.dy);
  for (Buffer* b : {&table, &w})
    for (int64_t i = 0; i < b->size(); ++i) b->f32()[i] = static_cast<float>(grid(rng)) / 16;
  g.e.run();
  const std::vector<float> dtable = valuesOf(g.e.buffer(g.dtable));
  auto objective = [&] {
    g.e.run();
    Buffer& y = g.e.buffer(g.node->result());
    double s = 0;
    for (int64_t i = 0; i < y.size(); ++i) s += double(w.f32()[i]) * y.f32()[i];
    return s;
  };
  constexpr float h = 0.5f;
  int64_t nonzero = 0;
  for (int64_t i = 0; i < table.size(); ++i) {
    const float keep = table.f32()[i];
    table.f32()[i] = keep + h;
    const double plus = objective();
    table.f32()[i] = keep - h;
    const double minus = objective();
    table.f32()[i] = keep;
    EXPECT_NEAR(dtable[static_cast<size_t>(i)], (plus - minus) / (2 * h), 1e-6) << "entry " << i;
    nonzero += dtable[static_cast<size_t>(i)] != 0.0f ? 1 : 0;
  }
  EXPECT_GT(nonzero, 0) << "a gradient of zeros proves nothing";
}

// A bf16 dy (a bf16 model's gradient) is added in f32: with bf16-representable values,
// the same bits as the f32 dy.
TEST(Embedding, Bf16GradientAddsInF32) {
  const RefCase c = load("embedding_tokens");
  EmbeddingGraph f32(shapeOf(c.tensor("ids")), c.integer("vocab"), c.integer("width"));
  EmbeddingGraph b16(shapeOf(c.tensor("ids")), c.integer("vocab"), c.integer("width"),
                     ir::DType::kBF16);
  ASSERT_NE(b16.dtable, nullptr);
  EXPECT_EQ(b16.dtable->type().dtype, ir::DType::kF32);
  for (EmbeddingGraph* g : {&f32, &b16}) {
    fillIds(g->e.buffer(g->ids), c.tensor("ids").i32());
    fillFrom(g->e.buffer(g->table), c.tensor("table").values);
  }
  const std::vector<backend::bf16> dy16 = c.tensor("dy").bf16();
  for (size_t i = 0; i < dy16.size(); ++i) {
    b16.e.buffer(b16.dy).bf16()[i] = dy16[i];
    f32.e.buffer(f32.dy).f32()[i] = static_cast<float>(dy16[i]);
  }
  f32.e.run();
  b16.e.run();
  EXPECT_EQ(valuesOf(b16.e.buffer(b16.dtable)), valuesOf(f32.e.buffer(f32.dtable)));
}

TEST(Embedding, AnIdOutsideTheTableIsAnErrorNamingTheNodeAndTheToken) {
  for (int32_t bad : {5, -1}) {
    SCOPED_TRACE(bad);
    SingleOp op(ir::Op::kEmbedding, {i32({2, 3}), f32({5, 4})});
    for (int64_t i = 0; i < 6; ++i) op.in(0).i32()[i] = static_cast<int32_t>(i % 5);
    op.in(0).i32()[4] = bad;
    op.out().f32()[0] = 42.0f;
    auto k = backend::cpu::makeKernel(op.node(), op.ctx());
    ASSERT_TRUE(k.ok()) << k.status();
    const absl::Status s = (*k)->runHere({op.in(0).view(), op.in(1).view()}, {op.out().view()});
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find(op.node().describe()), std::string::npos) << s;
    EXPECT_NE(s.message().find(absl::StrCat("token 4 has index ", bad)), std::string::npos) << s;
    EXPECT_NE(s.message().find("5 rows"), std::string::npos) << s;
    EXPECT_EQ(op.out().f32()[0], 42.0f) << "nothing written before the check";
  }
}

std::string createError(GraphEval& e, ir::NodeSpec spec) {
  auto n = e.add(std::move(spec));
  return n.ok() ? std::string("no error") : std::string(n.status().message());
}

TEST(Embedding, BadOperandsAreErrorsNamingTheNodeAndTheOperand) {
  GraphEval e;
  ir::Value* ids = e.input("ids", ir::TensorType{ir::DType::kI32, {2, 3}});
  ir::Value* fids = e.input("fids", f32Of({2, 3}));
  ir::Value* table = e.input("table", f32Of({7, 4}));
  ir::Value* itable = e.input("itable", ir::TensorType{ir::DType::kI32, {7, 4}});
  ir::Value* flat = e.input("flat", f32Of({28}));
  ir::Value* btable = e.input("btable", ir::TensorType{ir::DType::kBF16, {7, 4}});
  ir::Value* dy = e.input("dy", f32Of({2, 3, 4}));
  ir::Value* short_dy = e.input("short_dy", f32Of({2, 4}));
  ir::Value* idy = e.input("idy", ir::TensorType{ir::DType::kI32, {2, 3, 4}});
  auto emb = [](ir::Value* ids, ir::Value* table, const char* name) {
    return ir::EmbeddingArgs{.ids = ids, .table = table}.spec({.names = {name}});
  };
  auto back = [](ir::Value* dy, ir::Value* ids, int64_t vocab, const char* name) {
    return ir::EmbeddingBackwardArgs{.dy = dy, .ids = ids, .vocab = vocab}.spec({.names = {name}});
  };
  struct Bad {
    ir::NodeSpec spec;
    std::vector<std::string> says;
  };
  const Bad bad[] = {
      {emb(fids, table, "float_ids"), {"%float_ids", "ids (%fids: f32[2,3])", "i32"}},
      {emb(ids, itable, "int_table"), {"%int_table", "table (%itable: i32[7,4])", "f32"}},
      {emb(ids, flat, "flat_table"), {"%flat_table", "table (%flat: f32[28])", "rank 2"}},
      {emb(ids, btable, "bf16_table"), {"%bf16_table", "table (%btable: bf16[7,4])", "f32"}},
      {back(short_dy, ids, 7, "short"), {"%short", "dy (%short_dy: f32[2,4])", "[ids..., dim]"}},
      {back(idy, ids, 7, "int_dy"), {"%int_dy", "dy (%idy: i32[2,3,4])", "f32 or bf16"}},
      {back(dy, ids, 0, "no_rows"), {"%no_rows", "vocab"}},
  };
  for (const Bad& b : bad) {
    const std::string err = createError(e, b.spec);
    for (const std::string& want : b.says)
      EXPECT_NE(err.find(want), std::string::npos) << err << "\nlacks: " << want;
  }
  EXPECT_EQ(createError(e, back(dy, ids, 7, "fine")), "no error");
}

// ---- softmax_cross_entropy with label smoothing -----------------------------------------

/// logits and labels as graph inputs, the loss node with `smoothing`, and its gradient
/// rule's node for a given dloss.
struct LossGraph {
  GraphEval e;
  ir::Value *logits, *labels, *dloss;
  ir::Node* loss = nullptr;
  ir::Value* dlogits = nullptr;
  LossGraph(int64_t rows, int64_t classes, ir::Reduction reduction, int64_t divisor,
            double smoothing) {
    logits = e.input("logits", f32Of({rows, classes}));
    labels = e.input("labels", ir::TensorType{ir::DType::kI32, {rows}});
    auto n = e.add(ir::SoftmaxCrossEntropyArgs{.logits = logits,
                                               .labels = labels,
                                               .reduction = reduction,
                                               .divisor = divisor,
                                               .label_smoothing = smoothing}
                       .spec({.names = {"loss"}}));
    EXPECT_TRUE(n.ok()) << n.status();
    dloss = e.input("dloss", f32Of({}));
    if (!n.ok()) return;
    loss = *n;
    dlogits = e.grad(*loss, dloss)[0];
  }
};

// The kernels sum in double and round once: within an ulp or two of PyTorch's f32, whose
// sums over the classes round at each step (1e-6 of the tensor's scale). The gradient
// rule must hand the smoothing to the backward op, or eps > 0 misses by eps / C.
TEST(LabelSmoothing, LossAndGradientMatchPyTorchForSeveralEps) {
  for (const char* name : {"cross_entropy_eps0", "cross_entropy_eps005", "cross_entropy_eps02",
                           "cross_entropy_eps06_sum"}) {
    SCOPED_TRACE(name);
    const RefCase c = load(name);
    const RefTensor& logits = c.tensor("logits");
    const bool mean = c.text("reduction") == "mean";
    LossGraph g(logits.shape[0], logits.shape[1], mean ? ir::Reduction::kMean : ir::Reduction::kSum,
                c.integer("divisor"), c.num("smoothing"));
    ASSERT_NE(g.dlogits, nullptr);
    const ir::Node& back = *g.dlogits->def();
    ASSERT_TRUE(ir::SoftmaxCrossEntropyBackwardView::is(back));
    EXPECT_EQ(ir::SoftmaxCrossEntropyBackwardView(back).label_smoothing(), c.num("smoothing"));
    fillFrom(g.e.buffer(g.logits), logits.values);
    fillIds(g.e.buffer(g.labels), c.tensor("labels").i32());
    g.e.buffer(g.dloss).f32()[0] = static_cast<float>(c.num("dloss"));
    g.e.run();
    EXPECT_LE(relativeError(valuesOf(g.e.buffer(g.loss->result())), c.tensor("loss")), 1e-6);
    EXPECT_LE(relativeError(valuesOf(g.e.buffer(g.dlogits)), c.tensor("dlogits")), 1e-6);
    // Padding rows (label -1): no gradient at all.
    const std::vector<int32_t> labels = c.tensor("labels").i32();
    const std::vector<float> d = valuesOf(g.e.buffer(g.dlogits));
    for (size_t r = 0; r < labels.size(); ++r) {
      if (labels[r] >= 0) continue;
      for (int64_t j = 0; j < logits.shape[1]; ++j) {
        EXPECT_EQ(d[r * static_cast<size_t>(logits.shape[1]) + static_cast<size_t>(j)], 0.0f);
      }
    }
  }
}

// The loss is smooth in the logits; central differences with h = 1e-3 of the f32 kernel's
// loss (computed in double, rounded once to f32: 6e-8 relative of a loss near 2) err by
// the rounding over 2h (about 1e-4 absolute, divided by the batch of 8 the loss is a mean
// over) plus h^2 f''' / 6 (below 1e-6 for softmax's bounded derivatives): 2e-4 bounds
// both, while a missing eps / C term (eps = 0.3, C = 5: 0.06 / 8 per entry) is 40 times
// that.
TEST(LabelSmoothing, GradientMatchesFiniteDifferences) {
  constexpr int64_t kRows = 8, kClasses = 5;
  LossGraph g(kRows, kClasses, ir::Reduction::kMean, kRows, 0.3);
  ASSERT_NE(g.dlogits, nullptr);
  std::mt19937 rng(11);
  Buffer& logits = g.e.buffer(g.logits);
  logits.fillUniform(rng, -3, 3);
  Buffer& labels = g.e.buffer(g.labels);
  labels.fillInts(rng, 0, kClasses - 1);
  labels.i32()[3] = -1;  // a padding row: no gradient, no loss
  g.e.buffer(g.dloss).f32()[0] = 1.0f;
  g.e.run();
  const std::vector<float> d = valuesOf(g.e.buffer(g.dlogits));
  const double h = 1e-3;
  for (int64_t i = 0; i < logits.size(); ++i) {
    const float keep = logits.f32()[i];
    logits.f32()[i] = static_cast<float>(keep + h);
    g.e.run();
    const double plus = g.e.buffer(g.loss->result()).f32()[0];
    logits.f32()[i] = static_cast<float>(keep - h);
    g.e.run();
    const double minus = g.e.buffer(g.loss->result()).f32()[0];
    logits.f32()[i] = keep;
    const double fd = (plus - minus) /
                      (double(static_cast<float>(keep + h)) - double(static_cast<float>(keep - h)));
    EXPECT_NEAR(d[static_cast<size_t>(i)], fd, 2e-4) << "logit " << i;
  }
}

TEST(LabelSmoothing, OutOfRangeSmoothingIsAnErrorNamingTheNode) {
  for (double eps : {1.0, -0.1, 1.5, std::nan("")}) {
    SCOPED_TRACE(eps);
    GraphEval e;
    ir::Value* logits = e.input("logits", f32Of({4, 3}));
    ir::Value* labels = e.input("labels", ir::TensorType{ir::DType::kI32, {4}});
    const std::string err =
        createError(e, ir::SoftmaxCrossEntropyArgs{.logits = logits,
                                                   .labels = labels,
                                                   .reduction = ir::Reduction::kMean,
                                                   .divisor = 4,
                                                   .label_smoothing = eps}
                           .spec({.names = {"smoothed"}}));
    EXPECT_NE(err.find("%smoothed"), std::string::npos) << err;
    EXPECT_NE(err.find("label_smoothing"), std::string::npos) << err;
    EXPECT_NE(err.find("[0, 1)"), std::string::npos) << err;
  }
}

// label_smoothing is printed only when it is not 0, so the text of every module written
// before it existed reads and prints the same; a smoothed loss round-trips.
TEST(LabelSmoothing, PrintedOnlyWhenSetAndRoundTrips) {
  const std::string text = R"(module @m {
graph @g(%logits: f32[4,3], %labels: i32[4]) {
  %plain = softmax_cross_entropy(%logits, %labels) {reduction=mean, divisor=4} : f32[]
  %smooth = softmax_cross_entropy(%logits, %labels) {reduction=mean, divisor=4, label_smoothing=0.1} : f32[]
  return %plain, %smooth
}
}
)";
  auto m = ir::parseModule(text);
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string printed = ir::printModule(**m, {.locations = false});
  EXPECT_NE(printed.find("{reduction=mean, divisor=4} : f32[]"), std::string::npos) << printed;
  EXPECT_NE(printed.find("label_smoothing=0.1}"), std::string::npos) << printed;
  auto again = ir::parseModule(printed);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ir::printModule(**again, {.locations = false}), printed);
}

}  // namespace
}  // namespace tandem::testing
