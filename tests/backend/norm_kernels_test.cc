// batch_norm (training and inference) and batch_norm_backward against naive loops in
// double precision, and the naive backward against central finite differences of the
// naive training forward.

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "gtest/gtest.h"
#include "kernel_test_util.h"
#include "tests/device_kinds.h"

namespace tandem::testing {
namespace {

/// [N,C,H,W] or [N,C]: channel count and values per channel.
struct Layout {
  int64_t n, c, hw;
  explicit Layout(const ir::Shape& s)
      : n(s[0]), c(s[1]), hw(s.size() == 4 ? s[2] * s[3] : 1) {}
  int64_t channel(int64_t i) const { return (i / hw) % c; }
  int64_t count() const { return n * hw; }
};

struct Stats {
  std::vector<double> mean, var;  // biased batch variance
};

Stats batchStats(const ir::Shape& s, const std::vector<double>& x) {
  Layout l(s);
  Stats st{std::vector<double>(l.c, 0.0), std::vector<double>(l.c, 0.0)};
  for (size_t i = 0; i < x.size(); ++i) st.mean[l.channel(i)] += x[i] / double(l.count());
  for (size_t i = 0; i < x.size(); ++i) {
    double d = x[i] - st.mean[l.channel(i)];
    st.var[l.channel(i)] += d * d / double(l.count());
  }
  return st;
}

std::vector<double> normalize(const ir::Shape& s, const std::vector<double>& x,
                              const std::vector<double>& gamma, const std::vector<double>& beta,
                              const std::vector<double>& mean, const std::vector<double>& var,
                              double eps) {
  Layout l(s);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t c = l.channel(i);
    y[i] = gamma[c] * (x[i] - mean[c]) / std::sqrt(var[c] + eps) + beta[c];
  }
  return y;
}

struct Grads {
  std::vector<double> dx, dgamma, dbeta;
};

/// The training-mode gradient, from the saved mean and 1/std.
Grads batchNormBackwardRef(const ir::Shape& s, const std::vector<double>& dy,
                           const std::vector<double>& x, const std::vector<double>& gamma,
                           const std::vector<double>& mean, const std::vector<double>& invstd) {
  Layout l(s);
  Grads g{std::vector<double>(x.size()), std::vector<double>(l.c, 0.0),
          std::vector<double>(l.c, 0.0)};
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t c = l.channel(i);
    g.dbeta[c] += dy[i];
    g.dgamma[c] += dy[i] * (x[i] - mean[c]) * invstd[c];
  }
  double m = double(l.count());
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t c = l.channel(i);
    double xhat = (x[i] - mean[c]) * invstd[c];
    g.dx[i] = gamma[c] * invstd[c] / m * (m * dy[i] - g.dbeta[c] - xhat * g.dgamma[c]);
  }
  return g;
}

std::vector<double> toDouble(const float* p, int64_t n) { return std::vector<double>(p, p + n); }
std::vector<double> toDouble(Buffer& b) { return toDouble(b.f32(), b.size()); }

/// A training-mode batch_norm node whose running statistics come from param nodes (its
/// shape rule insists on that), with host buffers like SingleOp's.
class TrainingBatchNorm {
 public:
  TrainingBatchNorm(const ir::Shape& x_shape, double momentum, double eps)
      : module_("bn_test"), ctx_(ir::Device{::tandem::testing::kind("cpu"), 0}, 1) {
    ir::TensorType x = f32(x_shape), channel = f32({x_shape[1]});
    for (const char* var : {"running_mean", "running_var"})
      EXPECT_TRUE(module_.addVar({var, channel, ir::VarRole::kBuffer, {}}).ok());
    ir::Graph* g = *module_.addGraph("t");
    ir::NodeSpec bn;
    bn.op = ir::Op::kBatchNorm;
    bn.device = ctx_.device();
    bn.attrs = {{"training", true}, {"momentum", momentum}, {"eps", eps}};
    for (const ir::TensorType& t : {x, channel, channel}) {
      ir::NodeSpec in;
      in.op = ir::Op::kInput;
      in.names = {"in"};
      in.declared_types = {t};
      in.device = ctx_.device();
      bn.operands.push_back((*g->create(std::move(in)))->result());
    }
    for (const char* var : {"running_mean", "running_var"}) {
      ir::NodeSpec param;
      param.op = ir::Op::kParam;
      param.attrs = {{"var", ir::Symbol{var}}};
      param.device = ctx_.device();
      bn.operands.push_back((*g->create(std::move(param)))->result());
    }
    auto n = g->create(std::move(bn));
    EXPECT_TRUE(n.ok()) << n.status();
    node_ = *n;
    for (const ir::TensorType& t : {x, channel, channel, channel, channel}) in_.emplace_back(t);
    for (size_t i = 0; i < node_->numResults(); ++i) out_.emplace_back(node_->result(i)->type());
  }

  const ir::Node& node() const { return *node_; }
  Buffer& in(size_t i) { return in_[i]; }
  Buffer& out(size_t i) { return out_[i]; }

  void run() {
    if (!kernel_) {
      auto k = backend::cpu::makeKernel(*node_, ctx_);
      ASSERT_TRUE(k.ok()) << k.status();
      kernel_ = std::move(*k);
    }
    std::vector<backend::TensorView> in, out;
    for (Buffer& b : in_) in.push_back(b.view());
    for (Buffer& b : out_) out.push_back(b.view());
    absl::Status s = kernel_->runHere(in, out);
    ASSERT_TRUE(s.ok()) << s;
  }

 private:
  ir::Module module_;
  backend::cpu::CpuContext ctx_;
  ir::Node* node_ = nullptr;
  std::vector<Buffer> in_, out_;
  std::unique_ptr<backend::cpu::CpuKernel> kernel_;
};

const std::vector<ir::Shape> kShapes = {
    {4, 3, 5, 5}, {2, 20, 13, 13}, {8, 6}, {3, 64, 4, 4}, {1, 5, 7, 3}, {16, 10},
};

TEST(BatchNormKernel, TrainingMatchesReference) {
  std::mt19937 rng(21);
  const double momentum = 0.1, eps = 1e-5;
  for (const ir::Shape& s : kShapes) {
    SCOPED_TRACE(ir::toString(f32(s)));
    TrainingBatchNorm op(s, momentum, eps);
    ASSERT_EQ(op.node().numResults(), 3u);
    op.in(0).fillUniform(rng, -2, 3);  // a mean away from zero
    op.in(1).fillUniform(rng, 0.5, 1.5);
    op.in(2).fillUniform(rng);
    op.in(3).fillUniform(rng);
    op.in(4).fillUniform(rng, 0.5, 2);
    std::vector<double> x = toDouble(op.in(0)), rm = toDouble(op.in(3)), rv = toDouble(op.in(4));
    Stats st = batchStats(s, x);
    std::vector<double> y = normalize(s, x, toDouble(op.in(1)), toDouble(op.in(2)), st.mean,
                                      st.var, eps);
    op.run();
    Layout l(s);
    std::vector<double> invstd(l.c), new_rm(l.c), new_rv(l.c);
    for (int64_t c = 0; c < l.c; ++c) {
      invstd[c] = 1 / std::sqrt(st.var[c] + eps);
      new_rm[c] = (1 - momentum) * rm[c] + momentum * st.mean[c];
      double unbiased = st.var[c] * double(l.count()) / double(l.count() - 1);
      new_rv[c] = (1 - momentum) * rv[c] + momentum * unbiased;
    }
    EXPECT_LE(maxRelativeError(op.out(0).f32(), y.data(), op.out(0).size()), 1e-5);
    EXPECT_LE(maxRelativeError(op.out(1).f32(), st.mean.data(), l.c), 1e-5);
    EXPECT_LE(maxRelativeError(op.out(2).f32(), invstd.data(), l.c), 1e-5);
    EXPECT_LE(maxRelativeError(op.in(3).f32(), new_rm.data(), l.c), 1e-5);
    EXPECT_LE(maxRelativeError(op.in(4).f32(), new_rv.data(), l.c), 1e-5);
  }
}

// The running statistics move a little each step and normalization does not drift: two
// runs give the same y and compound the momentum update twice.
// batch_norm_recompute (backward's copy of a fused batch_norm_apply with relu) from a
// statistics tensor f64[3,C] of count, sum and sum of squares.
TEST(BatchNormRecomputeKernel, MatchesReference) {
  std::mt19937 rng(23);
  const double eps = 1e-5;
  for (const ir::Shape& s : {ir::Shape{4, 3, 5, 5}, ir::Shape{2, 16, 7, 7}}) {
    SCOPED_TRACE(ir::toString(f32(s)));
    const int64_t c = s[1];
    for (bool relu : {true, false}) {
      SingleOp op(ir::Op::kBatchNormRecompute,
                  {f32(s), {ir::DType::kF64, {3, c}}, f32({c}), f32({c})},
                  {{"eps", eps}, {"relu", relu}});
      op.in(0).fillUniform(rng, -2, 3);
      op.in(2).fillUniform(rng, 0.5, 1.5);
      op.in(3).fillUniform(rng);
      std::vector<double> x = toDouble(op.in(0));
      Stats st = batchStats(s, x);
      Layout l(s);
      auto* stats = static_cast<double*>(op.in(1).view().data);
      for (int64_t ch = 0; ch < c; ++ch) {
        const double m = double(l.count());
        stats[ch] = m;
        stats[c + ch] = m * st.mean[ch];
        stats[2 * c + ch] = m * st.var[ch] + m * st.mean[ch] * st.mean[ch];
      }
      std::vector<double> y =
          normalize(s, x, toDouble(op.in(2)), toDouble(op.in(3)), st.mean, st.var, eps);
      if (relu)
        for (double& v : y) v = std::max(v, 0.0);
      op.run();
      EXPECT_LE(maxRelativeError(op.out(0).f32(), y.data(), op.out(0).size()), 1e-5) << relu;
    }
  }
}

TEST(BatchNormKernel, TrainingRunsTwice) {
  std::mt19937 rng(22);
  ir::Shape s{4, 8, 6, 6};
  TrainingBatchNorm op(s, 0.25, 1e-3);
  for (size_t i = 0; i < 5; ++i) op.in(i).fillUniform(rng, 0.5, 1.5);
  std::vector<double> rm = toDouble(op.in(3));
  Stats st = batchStats(s, toDouble(op.in(0)));
  op.run();
  std::vector<float> y(op.out(0).f32(), op.out(0).f32() + op.out(0).size());
  op.out(0).fillUniform(rng);
  op.run();
  EXPECT_EQ(y, std::vector<float>(op.out(0).f32(), op.out(0).f32() + op.out(0).size()));
  for (int64_t c = 0; c < 8; ++c) {
    double want = 0.75 * (0.75 * rm[c] + 0.25 * st.mean[c]) + 0.25 * st.mean[c];
    EXPECT_NEAR(op.in(3).f32()[c], want, 1e-6);
  }
}

TEST(BatchNormKernel, InferenceUsesRunningStatistics) {
  std::mt19937 rng(23);
  const double eps = 1e-3;
  for (const ir::Shape& s : kShapes) {
    SCOPED_TRACE(ir::toString(f32(s)));
    ir::TensorType channel = f32({s[1]});
    SingleOp op(ir::Op::kBatchNorm, {f32(s), channel, channel, channel, channel},
                {{"training", false}, {"momentum", 0.1}, {"eps", eps}});
    ASSERT_EQ(op.node().numResults(), 1u);
    op.in(0).fillUniform(rng, -2, 3);
    op.in(1).fillUniform(rng, 0.5, 1.5);
    op.in(2).fillUniform(rng);
    op.in(3).fillUniform(rng);
    op.in(4).fillUniform(rng, 0.5, 2);
    std::vector<double> rm = toDouble(op.in(3)), rv = toDouble(op.in(4));
    std::vector<double> y = normalize(s, toDouble(op.in(0)), toDouble(op.in(1)),
                                      toDouble(op.in(2)), rm, rv, eps);
    op.out(0).fillUniform(rng, 1e6, 2e6);
    op.run();
    EXPECT_LE(maxRelativeError(op.out(0).f32(), y.data(), op.out(0).size()), 1e-5);
    // Inference leaves the running statistics alone.
    EXPECT_EQ(toDouble(op.in(3)), rm);
    EXPECT_EQ(toDouble(op.in(4)), rv);
  }
}

TEST(BatchNormKernel, BackwardMatchesReference) {
  std::mt19937 rng(24);
  const double eps = 1e-5;
  for (const ir::Shape& s : kShapes) {
    SCOPED_TRACE(ir::toString(f32(s)));
    Layout l(s);
    ir::TensorType channel = f32({l.c});
    SingleOp op(ir::Op::kBatchNormBackward, {f32(s), f32(s), channel, channel, channel},
                {{"eps", eps}});
    op.in(0).fillUniform(rng);
    op.in(1).fillUniform(rng, -2, 3);
    op.in(2).fillUniform(rng, 0.5, 1.5);
    // The saved statistics as the training forward leaves them (float).
    Stats st = batchStats(s, toDouble(op.in(1)));
    for (int64_t c = 0; c < l.c; ++c) {
      op.in(3).f32()[c] = static_cast<float>(st.mean[c]);
      op.in(4).f32()[c] = static_cast<float>(1 / std::sqrt(st.var[c] + eps));
    }
    for (size_t i = 0; i < 3; ++i) op.out(i).fillUniform(rng, 1e6, 2e6);
    op.run();
    Grads g = batchNormBackwardRef(s, toDouble(op.in(0)), toDouble(op.in(1)), toDouble(op.in(2)),
                                   toDouble(op.in(3)), toDouble(op.in(4)));
    EXPECT_LE(maxRelativeError(op.out(0).f32(), g.dx.data(), op.out(0).size()), 1e-5);
    EXPECT_LE(maxRelativeError(op.out(1).f32(), g.dgamma.data(), l.c), 1e-5);
    EXPECT_LE(maxRelativeError(op.out(2).f32(), g.dbeta.data(), l.c), 1e-5);
  }
}

TEST(BatchNormReference, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(25);
  std::uniform_real_distribution<double> d(-1, 1);
  const double eps = 1e-5, h = 1e-5;
  for (const ir::Shape& s : {ir::Shape{3, 2, 2, 3}, ir::Shape{5, 3}}) {
    SCOPED_TRACE(ir::toString(f32(s)));
    Layout l(s);
    auto random = [&](int64_t n, double lo) {
      std::vector<double> v(n);
      for (double& e : v) e = lo + (d(rng) + 1) / 2;
      return v;
    };
    std::vector<double> x = random(l.n * l.c * l.hw, -0.5), dy = random(x.size(), -0.5),
                        gamma = random(l.c, 0.5), beta = random(l.c, -0.5);
    auto loss = [&] {
      Stats st = batchStats(s, x);
      std::vector<double> y = normalize(s, x, gamma, beta, st.mean, st.var, eps);
      double sum = 0;
      for (size_t i = 0; i < y.size(); ++i) sum += dy[i] * y[i];
      return sum;
    };
    auto fd = [&](std::vector<double>& v) {
      std::vector<double> g(v.size());
      for (size_t i = 0; i < v.size(); ++i) {
        double keep = v[i];
        v[i] = keep + h;
        double up = loss();
        v[i] = keep - h;
        double down = loss();
        v[i] = keep;
        g[i] = (up - down) / (2 * h);
      }
      return g;
    };
    Stats st = batchStats(s, x);
    std::vector<double> invstd(l.c);
    for (int64_t c = 0; c < l.c; ++c) invstd[c] = 1 / std::sqrt(st.var[c] + eps);
    Grads g = batchNormBackwardRef(s, dy, x, gamma, st.mean, invstd);
    auto close = [](const std::vector<double>& a, const std::vector<double>& b) {
      double worst = 0;
      for (size_t i = 0; i < a.size(); ++i)
        worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(1.0, std::abs(b[i])));
      return worst;
    };
    EXPECT_LE(close(g.dx, fd(x)), 1e-6);
    EXPECT_LE(close(g.dgamma, fd(gamma)), 1e-6);
    EXPECT_LE(close(g.dbeta, fd(beta)), 1e-6);
  }
}

}  // namespace
}  // namespace tandem::testing
