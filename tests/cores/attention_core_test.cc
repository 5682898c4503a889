// The CPU attention core (backend/cpu/attention_core.h: query blocks meeting key tiles
// through oneDNN's sgemm, an online softmax, the backward recomputing the probabilities)
// against PyTorch 2.6's F.scaled_dot_product_attention (the cases of
// tests/data/gen_attention_refs.py: causal and not, 37 to 130 tokens, so one to three
// tiles), and with dropout against the row math of backend/attention_math.h, which the
// CUDA kernel runs: the same masks from the same counters, on any split of the batch.

#include "backend/cpu/attention_core.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/attention_math.h"
#include "gtest/gtest.h"
#include "tests/cores/ref_case.h"

namespace tandem::testing {
namespace {

using backend::AttentionSizes;
using backend::cpu::AttentionDropout;

struct Outputs {
  std::vector<float> y, lse, dq, dk, dv;
};

Outputs runCore(const AttentionSizes& d, const AttentionDropout& drop, const std::vector<float>& q,
                const std::vector<float>& k, const std::vector<float>& v,
                const std::vector<float>& dy) {
  Outputs o;
  o.y.assign(static_cast<size_t>(d.batch * d.queries * d.heads * d.value_depth), NAN);
  o.lse.assign(static_cast<size_t>(d.batch * d.heads * d.queries), NAN);
  o.dq.assign(q.size(), NAN);
  o.dk.assign(k.size(), NAN);
  o.dv.assign(v.size(), NAN);
  backend::cpu::attentionForward(d, drop, q.data(), k.data(), v.data(), o.y.data(), o.lse.data());
  backend::cpu::attentionBackward(d, drop, dy.data(), q.data(), k.data(), v.data(), o.y.data(),
                                  o.lse.data(), o.dq.data(), o.dk.data(), o.dv.data());
  return o;
}

class AttentionCore : public ::testing::TestWithParam<std::string> {};

TEST_P(AttentionCore, IsPyTorch2sScaledDotProductAttention) {
  absl::StatusOr<RefCase> c = RefCase::load(GetParam());
  ASSERT_TRUE(c.ok()) << c.status();
  const AttentionSizes d{.batch = c->integer("n"),
                        .heads = c->integer("heads"),
                        .queries = c->integer("queries"),
                        .keys = c->integer("keys"),
                        .depth = c->integer("depth"),
                        .value_depth = c->integer("value_depth"),
                        .scale = static_cast<float>(c->num("scale")),
                        .causal = c->flag("causal")};
  const Outputs o = runCore(d, {}, c->tensor("q").f32(), c->tensor("k").f32(), c->tensor("v").f32(),
                            c->tensor("d_out").f32());
  // The reference's lse is [N, Tq, H]; the op's [N, H, Tq].
  std::vector<float> lse(o.lse.size());
  for (int64_t n = 0; n < d.batch; ++n)
    for (int64_t h = 0; h < d.heads; ++h)
      for (int64_t i = 0; i < d.queries; ++i)
        lse[static_cast<size_t>((n * d.queries + i) * d.heads + h)] =
            o.lse[static_cast<size_t>((n * d.heads + h) * d.queries + i)];
  EXPECT_LE(relativeError(o.y, c->tensor("out")), 1e-5) << "y";
  EXPECT_LE(relativeError(lse, c->tensor("lse")), 1e-6) << "lse";
  EXPECT_LE(relativeError(o.dq, c->tensor("dq")), 1e-5) << "dq";
  EXPECT_LE(relativeError(o.dk, c->tensor("dk")), 1e-5) << "dk";
  EXPECT_LE(relativeError(o.dv, c->tensor("dv")), 1e-5) << "dv";
}

INSTANTIATE_TEST_SUITE_P(Refs, AttentionCore,
                         ::testing::Values("attention_causal", "attention_causal_long",
                                           "attention_full"));

std::vector<float> wave(size_t n, float f, float phase) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = std::sin(f * static_cast<float>(i) + phase);
  return x;
}

// The row math (what the CUDA kernel runs) over every (batch row, head), with dropout.
Outputs runRowMath(const AttentionSizes& d, const AttentionDropout& drop,
                   const std::vector<float>& q, const std::vector<float>& k,
                   const std::vector<float>& v, const std::vector<float>& dy) {
  using backend::AttentionRows;
  const backend::AttentionShape s{.queries = d.queries,
                                  .keys = d.keys,
                                  .depth = d.depth,
                                  .value_depth = d.value_depth,
                                  .scale = d.scale,
                                  .causal = d.causal};
  Outputs o;
  o.y.resize(dy.size());
  o.lse.resize(static_cast<size_t>(d.batch * d.heads * d.queries));
  o.dq.resize(q.size());
  o.dk.resize(k.size());
  o.dv.resize(v.size());
  const int64_t qs = d.heads * d.depth, vs = d.heads * d.value_depth;
  for (int64_t n = 0; n < d.batch; ++n)
    for (int64_t h = 0; h < d.heads; ++h) {
      const backend::AttentionRowDropout rd{.mask = drop.on ? &drop.mask : nullptr,
                                            .sample = static_cast<uint64_t>(drop.first_sample + n),
                                            .base = h * d.queries * d.keys};
      const AttentionRows qr{q.data() + n * d.queries * qs + h * d.depth, qs};
      const AttentionRows kr{k.data() + n * d.keys * qs + h * d.depth, qs};
      const AttentionRows vr{v.data() + n * d.keys * vs + h * d.value_depth, vs};
      const AttentionRows dyr{dy.data() + n * d.queries * vs + h * d.value_depth, vs};
      float* y = o.y.data() + n * d.queries * vs + h * d.value_depth;
      float* lse = o.lse.data() + (n * d.heads + h) * d.queries;
      for (int64_t i = 0; i < d.queries; ++i)
        backend::attentionForwardRow(s, qr, kr, vr, i, y + i * vs, lse + i, rd);
      const AttentionRows yr{y, vs};
      std::vector<float> delta(static_cast<size_t>(d.queries));
      for (int64_t i = 0; i < d.queries; ++i)
        delta[static_cast<size_t>(i)] = backend::attentionRowDelta(s, dyr, yr, i);
      for (int64_t i = 0; i < d.queries; ++i)
        backend::attentionBackwardQueryRow(s, qr, kr, vr, dyr, lse, delta.data(), i,
                                           o.dq.data() + (n * d.queries + i) * qs + h * d.depth,
                                           rd);
      for (int64_t j = 0; j < d.keys; ++j)
        backend::attentionBackwardKeyRow(s, qr, kr, vr, dyr, lse, delta.data(), j,
                                         o.dk.data() + (n * d.keys + j) * qs + h * d.depth,
                                         o.dv.data() + (n * d.keys + j) * vs + h * d.value_depth,
                                         rd);
    }
  return o;
}

/// relativeError against another run's values.
double differs(const std::vector<float>& got, const std::vector<float>& want) {
  RefTensor t;
  t.values.assign(want.begin(), want.end());
  return relativeError(got, t);
}

struct DropoutCase {
  AttentionSizes d{.batch = 4,
                  .heads = 2,
                  .queries = 70,
                  .keys = 70,
                  .depth = 8,
                  .value_depth = 8,
                  .scale = 0.35f,
                  .causal = true};
  AttentionDropout drop{.on = true, .mask = backend::dropoutMask(7, 3, 5, 0.25), .first_sample = 0};
  std::vector<float> q = wave(4 * 70 * 16, 0.37f, 0), k = wave(4 * 70 * 16, 0.23f, 1),
                     v = wave(4 * 70 * 16, 0.11f, 2), dy = wave(4 * 70 * 16, 0.07f, 3);
};

TEST(AttentionCoreDropout, IsTheRowMathsMasks) {
  for (bool causal : {true, false}) {
    DropoutCase c;
    c.d.causal = causal;
    const Outputs core = runCore(c.d, c.drop, c.q, c.k, c.v, c.dy);
    const Outputs rows = runRowMath(c.d, c.drop, c.q, c.k, c.v, c.dy);
    EXPECT_LE(differs(core.y, rows.y), 1e-5) << "y, causal " << causal;
    EXPECT_LE(differs(core.lse, rows.lse), 1e-6) << "lse, causal " << causal;
    EXPECT_LE(differs(core.dq, rows.dq), 1e-5) << "dq, causal " << causal;
    EXPECT_LE(differs(core.dk, rows.dk), 1e-5) << "dk, causal " << causal;
    EXPECT_LE(differs(core.dv, rows.dv), 1e-5) << "dv, causal " << causal;
    // Dropout changed something: the mask is not all ones.
    const Outputs plain = runCore(c.d, {}, c.q, c.k, c.v, c.dy);
    EXPECT_GT(differs(core.y, plain.y), 1e-2);
    EXPECT_EQ(core.lse, plain.lse);  // the softmax's sum is of the probabilities before it
  }
}

// Rows 2 and 3 of the batch on a device of their own (first_sample 2) get the bits the
// whole batch gives them.
TEST(AttentionCoreDropout, ASplitOfTheBatchDrawsTheSameMasks) {
  DropoutCase c;
  const Outputs whole = runCore(c.d, c.drop, c.q, c.k, c.v, c.dy);
  const size_t half = c.q.size() / 2;
  auto second = [&](const std::vector<float>& x) {
    return std::vector<float>(x.begin() + static_cast<std::ptrdiff_t>(x.size() / 2), x.end());
  };
  AttentionSizes d = c.d;
  d.batch = 2;
  AttentionDropout drop = c.drop;
  drop.first_sample = 2;
  const Outputs part = runCore(d, drop, second(c.q), second(c.k), second(c.v), second(c.dy));
  EXPECT_EQ(part.y, second(whole.y));
  EXPECT_EQ(part.dq, second(whole.dq));
  EXPECT_EQ(part.dk, second(whole.dk));
  EXPECT_EQ(part.dv, second(whole.dv));
  EXPECT_EQ(half, part.y.size());
}

}  // namespace
}  // namespace tandem::testing
