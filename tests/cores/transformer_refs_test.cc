// The transformer compute cores (backend/cpu/*_core.h) against PyTorch 1.13: every case
// in tests/data/transformer_refs (written by tests/data/gen_transformer_refs.py), forward
// results and gradients, f32 and, where the op has bf16 behaviour, bf16.
//
// Tolerances are errors relative to the largest magnitude of the expected tensor
// (relativeError), chosen from what each computation can differ by:
// - f32 sums (matmul, layer norm, softmax, reductions): PyTorch and oneDNN add in other
//   orders; for sums of at most 64 terms each order is within about 64 * 2^-24 = 4e-6 of
//   the exact sum relative to the sum of magnitudes, hence kF32Sum = 4e-6 (measured:
//   at most 1.5e-7).
// - f32 transcendental functions: oneDNN's jit erf/tanh/exp are polynomial
//   approximations accurate to a few ulps, PyTorch's are Sleef's or libm's, and softmax's
//   gradient subtracts nearly equal terms: kF32Math = 1e-5 (measured: at most 3e-6).
// - bf16 results: one rounding to 8 significant bits, 2^-9 of the value and so at most
//   2^-9 of the tensor's scale, on top of the f32 error; inputs are bf16-representable
//   in every case (the generator rounds them), so the f32 reference is exact for them:
//   kBf16Out = 2^-8 leaves a factor of two for the f32 part (measured: at most 3.2e-3;
//   a gradient computed from a rounded bf16 output gets twice that).
// - bf16 inputs with f32 results (a bf16 product accumulating in f32, as weight
//   gradients are computed): products of bf16 values are exact in f32, so kF32Sum.

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/axis_split.h"
#include "backend/cpu/adamw_core.h"
#include "backend/cpu/cross_entropy_core.h"
#include "backend/cpu/embedding_core.h"
#include "backend/cpu/layer_norm_core.h"
#include "backend/cpu/matmul_core.h"
#include "backend/cpu/reduce_core.h"
#include "backend/cpu/softmax_core.h"
#include "backend/matmul_shape.h"
#include "gtest/gtest.h"
#include "tests/cores/core_test_util.h"

namespace tandem::testing {
namespace {

using backend::AxisSplit;
using backend::MatmulGradProduct;
using backend::MatmulShape;
using backend::MatmulTensor;
using backend::bf16;
using namespace backend::cpu;  // NOLINT: the cores under test
constexpr ir::DType kF32 = ir::DType::kF32, kBF16 = ir::DType::kBF16;

constexpr double kF32Sum = 4e-6;
constexpr double kF32Math = 1e-5;
constexpr double kBf16Out = 1.0 / 256;

MatmulShape shapeOf(const RefCase& c) {
  MatmulShape s;
  s.batch = c.integer("batch"), s.m = c.integer("m"), s.n = c.integer("n"), s.k = c.integer("k");
  s.trans_a = c.flag("trans_a"), s.trans_b = c.flag("trans_b");
  s.a_broadcast = c.flag("a_broadcast"), s.b_broadcast = c.flag("b_broadcast");
  return s;
}

/// Runs one product of `shape` over two reference tensors and returns C.
Typed product(const MatmulShape& shape, const Typed& lhs, const Typed& rhs, ir::DType out,
              float scale = 1.0f, const Typed* bias = nullptr) {
  MatmulSpec spec;
  spec.shape = shape;
  spec.a = lhs.type(), spec.b = rhs.type(), spec.c = out;
  spec.scale = scale;
  if (bias != nullptr) spec.bias = bias->type();
  auto core = MatmulCore::make(coreContext(), spec, "test matmul");
  EXPECT_TRUE(core.ok()) << core.status();
  Typed c(out, shape.batch * shape.m * shape.n);
  if (core.ok()) core->run(lhs.data(), rhs.data(), bias ? bias->data() : nullptr, c.data());
  return c;
}

/// The forward product, both backward products (matmulGradA/B) and the bias gradient
/// (column sums of dC over every row: a reduction over axis 0 of [batch*m, n]), with
/// operands of type `in` and results of type `out`, against PyTorch.
void checkMatmul(const std::string& name, ir::DType in, ir::DType out, double tol) {
  SCOPED_TRACE(name + (in == kBF16 ? " bf16 in" : " f32 in") +
               (out == kBF16 ? ", bf16 out" : ", f32 out"));
  TANDEM_LOAD_REF(c, name);
  const MatmulShape shape = shapeOf(c);
  const Typed a(in, c.tensor("a")), b(in, c.tensor("b")), dc(in, c.tensor("dc"));
  std::optional<Typed> bias;
  if (c.flag("bias")) bias.emplace(in, c.tensor("bias"));
  const Typed y = product(shape, a, b, out, float(c.num("scale")), bias ? &*bias : nullptr);
  EXPECT_LE(relativeError(y.values(), c.tensor("c")), tol) << "C";

  auto pick = [&](MatmulTensor t) -> const Typed& {
    return t == MatmulTensor::kA ? a : t == MatmulTensor::kB ? b : dc;
  };
  // dA and dB of C = scale * op(A) op(B): the products times the scale.
  const float scale = float(c.num("scale"));
  auto grad = [&](const MatmulGradProduct& g) {
    return product(g.shape, pick(g.lhs), pick(g.rhs), out, scale);
  };
  auto ga = backend::matmulGradA(shape);
  ASSERT_TRUE(ga.ok()) << ga.status();
  EXPECT_LE(relativeError(grad(*ga).values(), c.tensor("da")), tol) << "dA";
  auto gb = backend::matmulGradB(shape);
  ASSERT_TRUE(gb.ok()) << gb.status();
  EXPECT_LE(relativeError(grad(*gb).values(), c.tensor("db")), tol) << "dB";

  if (bias) {
    ReduceSpec rs{{1, shape.batch * shape.m, shape.n}, in, Reduction::kSum};
    auto sum = ReduceForward::make(coreContext(), rs, "test bias gradient");
    ASSERT_TRUE(sum.ok()) << sum.status();
    Typed dbias(in, shape.n);
    sum->run(dc.data(), dbias.data());
    EXPECT_LE(relativeError(dbias.values(), c.tensor("dbias")), in == kBF16 ? kBf16Out : kF32Sum)
        << "dbias";
  }
}

const char* const kMatmulCases[] = {"matmul_plain",
                                    "matmul_trans_a",
                                    "matmul_batched_trans_b",
                                    "matmul_batched_trans_both",
                                    "matmul_shared_b_bias",
                                    "matmul_shared_b_trans_b",
                                    "matmul_attention_scores",
                                    "matmul_attention_values",
                                    "matmul_mlp_bias"};

TEST(TransformerRefs, MatmulF32ForwardAndBothGradientsMatchPyTorch) {
  for (const char* name : kMatmulCases) checkMatmul(name, kF32, kF32, kF32Sum);
}

TEST(TransformerRefs, MatmulBf16MatchesPyTorch) {
  // The cases with bf16-representable inputs: f32 results are exact products summed in
  // f32, bf16 results that rounded once.
  for (const char* name :
       {"matmul_attention_scores", "matmul_attention_values", "matmul_mlp_bias"}) {
    checkMatmul(name, kBF16, kF32, kF32Sum);
    checkMatmul(name, kBF16, kBF16, kBf16Out);
  }
}

TEST(TransformerRefs, MatmulWithF32MasterWeightBesideBf16Activations) {
  // Mixed precision: A bf16, B an f32 variable converted inside the core.
  TANDEM_LOAD_REF(c, "matmul_mlp_bias");
  const MatmulShape shape = shapeOf(c);
  const Typed a(kBF16, c.tensor("a")), b(kF32, c.tensor("b")), bias(kF32, c.tensor("bias"));
  const Typed y = product(shape, a, b, kF32, 1.0f, &bias);
  EXPECT_LE(relativeError(y.values(), c.tensor("c")), kF32Sum);
}

/// Layer norm forward (y, mean, var) and backward (dx, dgamma, dbeta) in `type`.
void checkLayerNorm(const std::string& name, ir::DType type) {
  SCOPED_TRACE(name + (type == kBF16 ? " bf16" : " f32"));
  TANDEM_LOAD_REF(c, name);
  const LayerNormSpec spec{c.integer("rows"), c.integer("width"), type, float(c.num("eps"))};
  auto fwd = LayerNormForward::make(coreContext(), spec, "test layer norm");
  auto bwd = LayerNormBackward::make(coreContext(), spec, "test layer norm");
  ASSERT_TRUE(fwd.ok()) << fwd.status();
  ASSERT_TRUE(bwd.ok()) << bwd.status();
  const Typed x(type, c.tensor("x")), dy(type, c.tensor("dy"));
  const std::vector<float> gamma = c.tensor("gamma").f32(), beta = c.tensor("beta").f32();
  Typed y(type, x.size()), dx(type, x.size());
  std::vector<float> mean(size_t(spec.rows)), var(size_t(spec.rows)), dgamma(gamma.size()),
      dbeta(beta.size());
  fwd->run(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), var.data());
  bwd->run(x.data(), dy.data(), mean.data(), var.data(), gamma.data(), dx.data(), dgamma.data(),
           dbeta.data());
  const double out_tol = type == kBF16 ? kBf16Out : kF32Sum;
  EXPECT_LE(relativeError(y.values(), c.tensor("y")), out_tol) << "y";
  EXPECT_LE(relativeError(mean, c.tensor("mean")), kF32Sum) << "mean";
  EXPECT_LE(relativeError(var, c.tensor("var")), kF32Sum) << "var";
  EXPECT_LE(relativeError(dx.values(), c.tensor("dx")), out_tol) << "dx";
  // f32 sums over the rows of products of exact (bf16-representable) inputs.
  EXPECT_LE(relativeError(dgamma, c.tensor("dgamma")), kF32Sum) << "dgamma";
  EXPECT_LE(relativeError(dbeta, c.tensor("dbeta")), kF32Sum) << "dbeta";
}

TEST(TransformerRefs, LayerNormMatchesPyTorch) {
  checkLayerNorm("layer_norm_odd", kF32);
  checkLayerNorm("layer_norm_vit", kF32);
  checkLayerNorm("layer_norm_vit", kBF16);
}

void checkSoftmax(const std::string& name, ir::DType type) {
  SCOPED_TRACE(name + (type == kBF16 ? " bf16" : " f32"));
  TANDEM_LOAD_REF(c, name);
  const RefTensor& xr = c.tensor("x");
  auto dims = backend::splitAtAxis(ir::Shape(xr.shape.begin(), xr.shape.end()), c.integer("axis"),
                                   "test softmax", "softmax");
  ASSERT_TRUE(dims.ok()) << dims.status();
  const SoftmaxSpec spec{*dims, type, c.flag("log")};
  auto fwd = SoftmaxForward::make(coreContext(), spec, "test softmax");
  auto bwd = SoftmaxBackward::make(coreContext(), spec, "test softmax");
  ASSERT_TRUE(fwd.ok()) << fwd.status();
  ASSERT_TRUE(bwd.ok()) << bwd.status();
  const Typed x(type, xr), dy(type, c.tensor("dy"));
  Typed y(type, x.size()), dx(type, x.size());
  fwd->run(x.data(), y.data());
  bwd->run(y.data(), dy.data(), dx.data());
  const double tol = type == kBF16 ? kBf16Out : kF32Math;
  EXPECT_LE(relativeError(y.values(), c.tensor("y")), tol) << "y";
  // bf16: dx is computed from the rounded y, one more rounding's worth.
  EXPECT_LE(relativeError(dx.values(), c.tensor("dx")), type == kBF16 ? 2 * tol : tol) << "dx";
}

TEST(TransformerRefs, SoftmaxAndLogSoftmaxOverEveryAxisMatchPyTorch) {
  for (const char* name : {"softmax_last", "softmax_middle", "softmax_first", "log_softmax_last",
                           "log_softmax_middle"})
    checkSoftmax(name, kF32);
  for (const char* name : {"softmax_last", "log_softmax_last"}) checkSoftmax(name, kBF16);
}

void checkReduce(const std::string& name, ir::DType type) {
  SCOPED_TRACE(name + (type == kBF16 ? " bf16" : " f32"));
  TANDEM_LOAD_REF(c, name);
  const RefTensor& xr = c.tensor("x");
  auto dims = backend::splitAtAxis(ir::Shape(xr.shape.begin(), xr.shape.end()), c.integer("axis"),
                                   "test reduce", "reduction");
  ASSERT_TRUE(dims.ok()) << dims.status();
  const ReduceSpec spec{*dims, type, c.text("kind") == "sum" ? Reduction::kSum : Reduction::kMean};
  auto fwd = ReduceForward::make(coreContext(), spec, "test reduce");
  ASSERT_TRUE(fwd.ok()) << fwd.status();
  const Typed x(type, xr), dy(type, c.tensor("dy"));
  Typed y(type, dy.size()), dx(type, x.size());
  fwd->run(x.data(), y.data());
  reduceBackward(spec, dy.data(), dx.data());
  const double tol = type == kBF16 ? kBf16Out : kF32Sum;
  EXPECT_LE(relativeError(y.values(), c.tensor("y")), tol) << "y";
  EXPECT_LE(relativeError(dx.values(), c.tensor("dx")), tol) << "dx";
}

TEST(TransformerRefs, SumAndMeanOverAnAxisMatchPyTorch) {
  for (const char* name :
       {"reduce_sum_middle", "reduce_mean_tokens", "reduce_sum_first", "reduce_mean_last"}) {
    checkReduce(name, kF32);
    checkReduce(name, kBF16);
  }
}

TEST(TransformerRefs, EmbeddingLookupAndTableGradientMatchPyTorch) {
  TANDEM_LOAD_REF(c, "embedding");
  const EmbeddingShape s{c.integer("vocab"), c.integer("width"), c.tensor("index").size()};
  const std::vector<float> table = c.tensor("table").f32();
  const std::vector<int32_t> index = c.tensor("index").i32();
  std::vector<float> y(size_t(s.tokens * s.width)), dtable(table.size(), 99.0f);
  embeddingForward(s, table.data(), index.data(), y.data());
  // A lookup is a copy: exactly PyTorch's values.
  EXPECT_EQ(relativeError(y, c.tensor("y")), 0.0);
  const std::vector<float> dy = c.tensor("dy").f32();
  embeddingBackward(s, dy.data(), index.data(), dtable.data());
  // At most a few rows add up per table row, in token order here, in PyTorch's order
  // there: a few f32 roundings of the summands' scale.
  EXPECT_LE(relativeError(dtable, c.tensor("dtable")), 1e-6);
  // bf16 rows: rounded once from the table; a bf16 dy accumulates in f32 (dy's values
  // are bf16-representable, so the same sums).
  std::vector<bf16> y16(y.size()), dy16(dy.begin(), dy.end());
  embeddingForward(s, table.data(), index.data(), y16.data());
  EXPECT_LE(relativeError(y16, c.tensor("y")), kBf16Out);
  std::vector<float> dtable16(table.size());
  embeddingBackward(s, dy16.data(), index.data(), dtable16.data());
  EXPECT_EQ(dtable16, dtable);
}

TEST(TransformerRefs, SmoothedCrossEntropyMatchesPyTorch) {
  for (const char* name : {"cross_entropy_smooth", "cross_entropy_plain", "cross_entropy_strong"}) {
    SCOPED_TRACE(name);
    TANDEM_LOAD_REF(c, name);
    const CrossEntropySpec s{c.integer("rows"), c.integer("classes"), c.num("smoothing"),
                             c.num("divisor")};
    const std::vector<float> logits = c.tensor("logits").f32();
    const std::vector<int32_t> labels = c.tensor("labels").i32();
    // In double, rounded once: within an ulp or two of PyTorch's f32 (whose sums over 10
    // classes round at each step).
    const float loss = crossEntropyForward(s, logits.data(), labels.data());
    EXPECT_LE(relativeError(std::vector<float>{loss}, c.tensor("loss")), 1e-6);
    std::vector<float> dlogits(logits.size(), 99.0f);
    crossEntropyBackward(s, logits.data(), labels.data(), float(c.num("dloss")), dlogits.data());
    EXPECT_LE(relativeError(dlogits, c.tensor("dlogits")), 1e-6);
  }
}

/// The update w_t - w_{t-1}, in double from the f32 weights.
std::vector<double> delta(const std::vector<float>& now, const std::vector<float>& before) {
  std::vector<double> d(now.size());
  for (size_t i = 0; i < now.size(); ++i) d[i] = double(now[i]) - double(before[i]);
  return d;
}

/// AdamW for every step of a case, m and v after each, and each step's update of w,
/// against PyTorch's.
void checkAdamW(const std::string& name) {
  SCOPED_TRACE(name);
  TANDEM_LOAD_REF(c, name);
  backend::AdamWHyper h;
  h.lr = c.num("lr"), h.beta1 = c.num("beta1"), h.beta2 = c.num("beta2"), h.eps = c.num("eps");
  h.weight_decay = c.num("weight_decay");
  const int64_t n = c.integer("n");
  std::vector<float> w = c.tensor("w0").f32(), m(size_t(n), 0.0f), v(size_t(n), 0.0f);
  for (int64_t t = 1; t <= c.integer("steps"); ++t) {
    const std::string at = std::to_string(t), before = std::to_string(t - 1);
    const std::vector<float> w_before = w;
    const RefTensor& g = c.tensor("g" + at);
    if (c.flag("bf16_grads")) {
      const std::vector<bf16> g16 = g.bf16();
      adamwUpdate(w.data(), g16.data(), m.data(), v.data(), n, backend::adamwScalars(h, t));
    } else {
      adamwUpdate(w.data(), g.f32().data(), m.data(), v.data(), n, backend::adamwScalars(h, t));
    }
    // The same float operations in PyTorch's order, except that PyTorch's vectorized
    // add with alpha (m's update) fuses a multiply-add: m may differ in its last bit.
    EXPECT_LE(relativeError(m, c.tensor("m" + at)), 1e-6) << "m after step " << t;
    EXPECT_LE(relativeError(v, c.tensor("v" + at)), 1e-6) << "v after step " << t;
    // The step itself (about lr) against PyTorch's, which w's own rounding (an ulp of w,
    // about 2e-7 for |w| near 2) blurs by about 1e-4 of the step: a wrong bias
    // correction, eps inside the square root (the tiny-gradient case) or a decay applied
    // after the step would be off by far more.
    RefTensor want_delta;
    want_delta.values = delta(c.tensor("w" + at).f32(), c.tensor("w" + before).f32());
    EXPECT_LE(relativeError(delta(w, w_before), want_delta), 1e-3) << "update of step " << t;
  }
}

TEST(TransformerRefs, AdamWStepsMatchTorchOptimAdamW) {
  checkAdamW("adamw");
  checkAdamW("adamw_bf16_grads");
  checkAdamW("adamw_no_decay");
  checkAdamW("adamw_tiny_grads");
}

}  // namespace
}  // namespace tandem::testing
