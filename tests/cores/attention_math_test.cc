// The fused attention's math (backend/attention_math.h: tiles of keys folded into an
// online softmax, the backward recomputing the probabilities from each row's log-sum-exp)
// against PyTorch 2.6's F.scaled_dot_product_attention, forward and backward, causal and
// not (cases written by tests/data/gen_attention_refs.py). The very functions the CUDA
// kernel will run, compiled for the host.

#include "backend/attention_math.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cores/ref_case.h"

namespace tandem::testing {
namespace {

using backend::AttentionRows;
using backend::AttentionShape;

// Every (batch, head) of a case's [N, T, H, d] tensors through the row functions.
struct AttentionRun {
  std::vector<float> out, lse, dq, dk, dv;
};

AttentionRun runCase(const RefCase& c) {
  const int64_t n = c.integer("n"), heads = c.integer("heads");
  const AttentionShape s{.queries = c.integer("queries"),
                         .keys = c.integer("keys"),
                         .depth = c.integer("depth"),
                         .value_depth = c.integer("value_depth"),
                         .scale = static_cast<float>(c.num("scale")),
                         .causal = c.flag("causal")};
  const std::vector<float> q = c.tensor("q").f32(), k = c.tensor("k").f32(),
                           v = c.tensor("v").f32(), d_out = c.tensor("d_out").f32();
  AttentionRun r;
  r.out.resize(static_cast<size_t>(n * s.queries * heads * s.value_depth));
  r.lse.resize(static_cast<size_t>(n * s.queries * heads));
  r.dq.resize(q.size());
  r.dk.resize(k.size());
  r.dv.resize(v.size());
  // Row t of head h in batch b of a [N, T, H, width] tensor: a stride of H * width.
  const auto rows = [&](const float* data, int64_t b, int64_t h, int64_t t, int64_t width) {
    return AttentionRows{data + (b * t * heads + h) * width, heads * width};
  };
  for (int64_t b = 0; b < n; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const AttentionRows qr = rows(q.data(), b, h, s.queries, s.depth);
      const AttentionRows kr = rows(k.data(), b, h, s.keys, s.depth);
      const AttentionRows vr = rows(v.data(), b, h, s.keys, s.value_depth);
      const AttentionRows dor = rows(d_out.data(), b, h, s.queries, s.value_depth);
      const AttentionRows outr = rows(r.out.data(), b, h, s.queries, s.value_depth);
      std::vector<float> lse(static_cast<size_t>(s.queries)), delta(lse.size());
      for (int64_t i = 0; i < s.queries; ++i) {
        backend::attentionForwardRow(s, qr, kr, vr, i, const_cast<float*>(outr.row(i)),
                                     &lse[static_cast<size_t>(i)]);
        r.lse[static_cast<size_t>((b * s.queries + i) * heads + h)] = lse[static_cast<size_t>(i)];
      }
      for (int64_t i = 0; i < s.queries; ++i)
        delta[static_cast<size_t>(i)] = backend::attentionRowDelta(s, dor, outr, i);
      for (int64_t i = 0; i < s.queries; ++i)
        backend::attentionBackwardQueryRow(
            s, qr, kr, vr, dor, lse.data(), delta.data(), i,
            const_cast<float*>(rows(r.dq.data(), b, h, s.queries, s.depth).row(i)));
      for (int64_t j = 0; j < s.keys; ++j)
        backend::attentionBackwardKeyRow(
            s, qr, kr, vr, dor, lse.data(), delta.data(), j,
            const_cast<float*>(rows(r.dk.data(), b, h, s.keys, s.depth).row(j)),
            const_cast<float*>(rows(r.dv.data(), b, h, s.keys, s.value_depth).row(j)));
    }
  return r;
}

class AttentionMath : public ::testing::TestWithParam<std::string> {};

TEST_P(AttentionMath, IsPyTorch2sScaledDotProductAttention) {
  absl::StatusOr<RefCase> c = RefCase::load(GetParam());
  ASSERT_TRUE(c.ok()) << c.status();
  const AttentionRun r = runCase(*c);
  EXPECT_LE(relativeError(r.out, c->tensor("out")), 1e-5) << "out";
  EXPECT_LE(relativeError(r.lse, c->tensor("lse")), 1e-6) << "lse";
  EXPECT_LE(relativeError(r.dq, c->tensor("dq")), 1e-5) << "dq";
  EXPECT_LE(relativeError(r.dk, c->tensor("dk")), 1e-5) << "dk";
  EXPECT_LE(relativeError(r.dv, c->tensor("dv")), 1e-5) << "dv";
}

INSTANTIATE_TEST_SUITE_P(Refs, AttentionMath,
                         ::testing::Values("attention_causal", "attention_causal_long",
                                           "attention_full"));

// The causal mask: a key after the query changes nothing of that query's row.
TEST(AttentionMathCausal, LaterKeysDoNotReachEarlierQueries) {
  const AttentionShape s{
      .queries = 40, .keys = 40, .depth = 4, .value_depth = 4, .scale = 0.5f, .causal = true};
  std::vector<float> q(160), k(160), v(160);
  for (size_t i = 0; i < q.size(); ++i) {
    q[i] = std::sin(0.37f * static_cast<float>(i));
    k[i] = std::cos(0.23f * static_cast<float>(i));
    v[i] = std::sin(0.11f * static_cast<float>(i) + 1);
  }
  const AttentionRows qr{q.data(), 4}, kr{k.data(), 4}, vr{v.data(), 4};
  std::vector<float> before(4), after(4);
  float lse_before = 0, lse_after = 0;
  backend::attentionForwardRow(s, qr, kr, vr, 20, before.data(), &lse_before);
  for (size_t i = 21 * 4; i < k.size(); ++i) k[i] = v[i] = 1e6f;  // keys 21..39
  backend::attentionForwardRow(s, qr, kr, vr, 20, after.data(), &lse_after);
  EXPECT_EQ(before, after);
  EXPECT_EQ(lse_before, lse_after);
}

}  // namespace
}  // namespace tandem::testing
