// relu, relu_backward, sigmoid, sigmoid_backward, gelu, gelu_tanh, tanh (and their
// backward ops), add, flatten and flatten_backward against naive loops in double; the
// backward ops also against central finite differences of the naive forward; gelu, gelu_tanh,
// tanh and sigmoid against PyTorch 1.13 (tests/data/transformer_refs), f32 and bf16; bf16
// against f32.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernel_test_util.h"
#include "tests/cores/ref_case.h"

namespace tandem::testing {
namespace {

// Types, not shapes: f32(shape) on a loop's shape trips GCC 12's maybe-uninitialized
// false positive in absl::InlinedVector's move.
const ir::TensorType kTypes[] = {f32({1}), f32({7}), f32({1, 5}), f32({3, 4, 5, 6}),
                                 f32({2, 64, 9, 9})};

TEST(Relu, MatchesReference) {
  std::mt19937 rng(31);
  for (const ir::TensorType& t : kTypes) {
    SingleOp op(ir::Op::kRelu, {t});
    op.in(0).fillUniform(rng);
    op.run();
    std::vector<double> want(static_cast<size_t>(op.in(0).size()));
    for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(0.0, double(op.in(0).f32()[i]));
    EXPECT_EQ(maxRelativeError(op.out().f32(), want.data(), op.out().size()), 0.0);
  }
}

TEST(ReluBackward, MatchesReference) {
  std::mt19937 rng(32);
  for (const ir::TensorType& t : kTypes) {
    SingleOp op(ir::Op::kReluBackward, {t, t});
    op.in(0).fillUniform(rng);
    op.in(1).fillUniform(rng, -1, 1);
    for (int64_t i = 0; i < op.in(1).size(); ++i)  // y is a relu output
      op.in(1).f32()[i] = std::max(0.0f, op.in(1).f32()[i]);
    op.run();
    std::vector<double> want(static_cast<size_t>(op.in(0).size()));
    for (size_t i = 0; i < want.size(); ++i)
      want[i] = op.in(1).f32()[i] > 0 ? double(op.in(0).f32()[i]) : 0.0;
    EXPECT_EQ(maxRelativeError(op.out().f32(), want.data(), op.out().size()), 0.0);
  }
}

// relu_backward(dy, relu(x)) is the gradient of <dy, relu(x)> with respect to x (away from
// the kink at 0, where the test keeps every x).
TEST(ReluBackward, MatchesFiniteDifferences) {
  std::mt19937 rng(33);
  const int64_t n = 40;
  Buffer x(f32({n}));
  x.fillUniform(rng);
  for (int64_t i = 0; i < n; ++i)
    if (std::abs(x.f32()[i]) < 0.01f) x.f32()[i] = 0.5f;
  SingleOp op(ir::Op::kReluBackward, {f32({n}), f32({n})});
  op.in(0).fillUniform(rng);
  for (int64_t i = 0; i < n; ++i) op.in(1).f32()[i] = std::max(0.0f, x.f32()[i]);
  op.run();
  std::vector<double> want(n);
  constexpr double h = 1e-6;
  for (int64_t i = 0; i < n; ++i) {
    double xi = x.f32()[i], dy = op.in(0).f32()[i];
    want[static_cast<size_t>(i)] = dy * (std::max(0.0, xi + h) - std::max(0.0, xi - h)) / (2 * h);
  }
  EXPECT_LE(maxRelativeError(op.out().f32(), want.data(), n), 1e-5);
}

double sigmoidRef(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(Sigmoid, MatchesReference) {
  std::mt19937 rng(34);
  for (const ir::TensorType& t : kTypes) {
    SingleOp op(ir::Op::kSigmoid, {t});
    op.in(0).fillUniform(rng, -12, 12);
    op.run();
    std::vector<double> want(static_cast<size_t>(op.in(0).size()));
    for (size_t i = 0; i < want.size(); ++i) want[i] = sigmoidRef(op.in(0).f32()[i]);
    EXPECT_LE(maxRelativeError(op.out().f32(), want.data(), op.out().size()), 1e-6)
        << ir::toString(t);
  }
  // Saturation and the tails stay in [0, 1] and finite, as torch.sigmoid's do.
  SingleOp op(ir::Op::kSigmoid, {f32({4})});
  const float x[] = {-100.0f, 100.0f, -88.0f, 0.0f};
  std::memcpy(op.in(0).f32(), x, sizeof x);
  op.run();
  EXPECT_LT(op.out().f32()[0], 1e-30f);
  EXPECT_GE(op.out().f32()[0], 0.0f);
  EXPECT_EQ(op.out().f32()[1], 1.0f);
  EXPECT_EQ(op.out().f32()[3], 0.5f);
}

// sigmoid_backward(dy, sigmoid(x)) is the gradient of <dy, sigmoid(x)> with respect to x.
TEST(SigmoidBackward, MatchesFiniteDifferences) {
  std::mt19937 rng(35);
  const int64_t n = 64;
  Buffer x(f32({n}));
  x.fillUniform(rng, -6, 6);
  SingleOp op(ir::Op::kSigmoidBackward, {f32({n}), f32({n})});
  op.in(0).fillUniform(rng);
  for (int64_t i = 0; i < n; ++i) op.in(1).f32()[i] = static_cast<float>(sigmoidRef(x.f32()[i]));
  op.run();
  std::vector<double> want(n);
  constexpr double h = 1e-5;
  for (int64_t i = 0; i < n; ++i) {
    const double xi = x.f32()[i], dy = op.in(0).f32()[i];
    want[static_cast<size_t>(i)] = dy * (sigmoidRef(xi + h) - sigmoidRef(xi - h)) / (2 * h);
  }
  EXPECT_LE(maxRelativeError(op.out().f32(), want.data(), n), 1e-6);
}

TEST(Sigmoid, Bf16IsF32RoundedOnce) {
  std::mt19937 rng(36);
  const ir::Shape shape{3, 5, 7, 11};
  SingleOp ref(ir::Op::kSigmoid, {f32(shape)}), low(ir::Op::kSigmoid, {bf16(shape)});
  ref.in(0).fillUniform(rng, -8, 8);
  expectBf16NearF32(ref, low, 8e-3);  // bf16 keeps 8 bits: half an ulp is 2^-9
  SingleOp back_ref(ir::Op::kSigmoidBackward, {f32(shape), f32(shape)});
  SingleOp back_low(ir::Op::kSigmoidBackward, {bf16(shape), bf16(shape)});
  back_ref.in(0).fillUniform(rng);
  back_ref.in(1).fillUniform(rng, 0, 1);
  expectBf16NearF32(back_ref, back_low, 2e-2);
}

// gelu (erf form), gelu_tanh and tanh: oneDNN eltwise primitives (as sigmoid is), through
// the ops' kernel slots.
struct ActivationOp {
  ir::Op op, backward;
  double (*ref)(double);  // the forward in double
  bool backward_reads_output;
  const char* pytorch_case;  // tests/data/transformer_refs/<case>.ref
};

double geluErfRef(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double geluTanhRef(double x) {
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double tanhRef(double x) { return std::tanh(x); }

const ActivationOp kActivationOps[] = {
    {ir::Op::kGelu, ir::Op::kGeluBackward, geluErfRef, false, "activation_gelu_erf"},
    {ir::Op::kGeluTanh, ir::Op::kGeluTanhBackward, geluTanhRef, false, "activation_gelu_tanh"},
    {ir::Op::kTanh, ir::Op::kTanhBackward, tanhRef, true, "activation_tanh"},
};
// sigmoid has its own tests above; against PyTorch it is checked as these are.
const ActivationOp kSigmoidOp{ir::Op::kSigmoid, ir::Op::kSigmoidBackward, sigmoidRef, true,
                              "activation_sigmoid"};

std::string nameOf(ir::Op op) { return std::string(ir::opInfo(op).name); }

// Against the double forward: oneDNN's jit erf/tanh are polynomials accurate to a few
// f32 ulps, so 1e-6 of max(1, |y|) (8 ulps near 1) bounds them with room; the tails of
// [-12, 12] (gelu(-12) underflows towards 0, tanh saturates) are in the range.
TEST(Activations, MatchTheDoubleReference) {
  std::mt19937 rng(37);
  for (const ActivationOp& a : kActivationOps) {
    SCOPED_TRACE(nameOf(a.op));
    for (const ir::TensorType& t : kTypes) {
      SingleOp op(a.op, {t});
      op.in(0).fillUniform(rng, -12, 12);
      op.run();
      std::vector<double> want(static_cast<size_t>(op.in(0).size()));
      for (size_t i = 0; i < want.size(); ++i) want[i] = a.ref(op.in(0).f32()[i]);
      EXPECT_LE(maxRelativeError(op.out().f32(), want.data(), op.out().size()), 1e-6)
          << ir::toString(t);
    }
  }
}

// The backward op applied to dy is the gradient of <dy, f(x)>: central differences of the
// double forward with h = 1e-5 are exact to about h^2 max|f'''| / 6 < 1e-10 (|f'''| < 2
// for all three), far below the f32 kernel's few ulps, so 2e-6 of max(1, |dx|).
TEST(Activations, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(38);
  const int64_t n = 257;
  for (const ActivationOp& a : kActivationOps) {
    SCOPED_TRACE(nameOf(a.op));
    Buffer x(f32({n}));
    x.fillUniform(rng, -6, 6);
    SingleOp op(a.backward, {f32({n}), f32({n})});
    op.in(0).fillUniform(rng);
    for (int64_t i = 0; i < n; ++i) {
      const double xi = x.f32()[i];
      op.in(1).f32()[i] = a.backward_reads_output ? static_cast<float>(a.ref(xi)) : x.f32()[i];
    }
    op.run();
    std::vector<double> want(n);
    constexpr double h = 1e-5;
    for (int64_t i = 0; i < n; ++i) {
      const double xi = x.f32()[i], dy = op.in(0).f32()[i];
      want[static_cast<size_t>(i)] = dy * (a.ref(xi + h) - a.ref(xi - h)) / (2 * h);
    }
    EXPECT_LE(maxRelativeError(op.out().f32(), want.data(), n), 2e-6);
  }
}

// The ops' kernels against PyTorch 1.13's forward and backward (tests/data/transformer_refs,
// whose inputs are bf16-representable), relative to the tensor's scale. f32: 1e-5
// (oneDNN's and PyTorch's transcendental approximations differ by a few ulps). bf16: one
// rounding to 8 significant bits (2^-9 of the value) on top of that, so 2^-8; a gradient
// computed from a rounded y (tanh's, sigmoid's) gets twice that.
void expectMatchesPyTorch(const ActivationOp& a, ir::DType dtype) {
  SCOPED_TRACE(std::string(a.pytorch_case) + (dtype == ir::DType::kBF16 ? " bf16" : " f32"));
  auto loaded = RefCase::load(a.pytorch_case);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const RefCase& c = *loaded;
  const RefTensor &x = c.tensor("x"), &dy = c.tensor("dy");
  ir::TensorType t = f32({x.size()});
  t.dtype = dtype;
  const bool bf16 = dtype == ir::DType::kBF16;
  auto set = [&](Buffer& b, int64_t i, double v) {
    if (bf16)
      b.bf16()[i] = static_cast<float>(v);
    else
      b.f32()[i] = static_cast<float>(v);
  };
  auto values = [](Buffer& b) {
    std::vector<double> v(static_cast<size_t>(b.size()));
    for (int64_t i = 0; i < b.size(); ++i) v[static_cast<size_t>(i)] = b.at(i);
    return v;
  };
  SingleOp fwd(a.op, {t});
  for (int64_t i = 0; i < x.size(); ++i) set(fwd.in(0), i, x.values[i]);
  fwd.run();
  const double tol = bf16 ? 1.0 / 256 : 1e-5;
  EXPECT_LE(relativeError(values(fwd.out()), c.tensor("y")), tol) << "y";
  SingleOp back(a.backward, {t, t});
  for (int64_t i = 0; i < x.size(); ++i) {
    set(back.in(0), i, dy.values[i]);
    set(back.in(1), i, a.backward_reads_output ? fwd.out().at(i) : fwd.in(0).at(i));
  }
  back.run();
  EXPECT_LE(relativeError(values(back.out()), c.tensor("dx")), bf16 ? 2 * tol : tol) << "dx";
}

TEST(Activations, MatchPyTorch) {
  for (const ActivationOp& a : kActivationOps) {
    expectMatchesPyTorch(a, ir::DType::kF32);
    expectMatchesPyTorch(a, ir::DType::kBF16);
  }
  expectMatchesPyTorch(kSigmoidOp, ir::DType::kF32);
  expectMatchesPyTorch(kSigmoidOp, ir::DType::kBF16);
}

// bf16: the f32 result rounded once (half an ulp is 2^-9 of the value), as sigmoid's.
TEST(Activations, Bf16IsF32RoundedOnce) {
  std::mt19937 rng(39);
  const ir::Shape shape{3, 5, 7, 11};
  for (const ActivationOp& a : kActivationOps) {
    SCOPED_TRACE(nameOf(a.op));
    SingleOp ref(a.op, {f32(shape)}), low(a.op, {bf16(shape)});
    ref.in(0).fillUniform(rng, -6, 6);
    expectBf16NearF32(ref, low, 8e-3);
    SingleOp back_ref(a.backward, {f32(shape), f32(shape)});
    SingleOp back_low(a.backward, {bf16(shape), bf16(shape)});
    back_ref.in(0).fillUniform(rng);
    const float bound = a.backward_reads_output ? 1 : 6;  // y of tanh, or x of gelu
    back_ref.in(1).fillUniform(rng, -bound, bound);
    expectBf16NearF32(back_ref, back_low, 2e-2);
  }
}

TEST(Add, MatchesReference) {
  std::mt19937 rng(34);
  for (const ir::TensorType& t : kTypes) {
    SingleOp op(ir::Op::kAdd, {t, t});
    op.in(0).fillUniform(rng);
    op.in(1).fillUniform(rng);
    op.run();
    std::vector<double> want(static_cast<size_t>(op.in(0).size()));
    for (size_t i = 0; i < want.size(); ++i)
      want[i] = double(op.in(0).f32()[i]) + op.in(1).f32()[i];
    EXPECT_LE(maxRelativeError(op.out().f32(), want.data(), op.out().size()), 1e-7);
  }
}

TEST(Add, Int32) {
  SingleOp op(ir::Op::kAdd, {i32({3}), i32({3})});
  const int32_t a[] = {1, -2, 300}, b[] = {4, 2, -1000};
  std::copy(a, a + 3, op.in(0).i32());
  std::copy(b, b + 3, op.in(1).i32());
  op.run();
  EXPECT_EQ(op.out().i32()[0], 5);
  EXPECT_EQ(op.out().i32()[1], 0);
  EXPECT_EQ(op.out().i32()[2], -700);
}

// flatten and its backward op keep the row-major bytes: the result is a copy.
TEST(Flatten, CopiesBytes) {
  std::mt19937 rng(35);
  SingleOp op(ir::Op::kFlatten, {f32({3, 4, 5, 5})});
  op.in(0).fillUniform(rng);
  op.run();
  EXPECT_EQ(op.out().type(), f32({3, 100}));
  EXPECT_EQ(std::memcmp(op.out().f32(), op.in(0).f32(), 300 * sizeof(float)), 0);

  SingleOp back(ir::Op::kFlattenBackward, {f32({3, 100}), f32({3, 4, 5, 5})});
  back.in(0).fillUniform(rng);
  back.run();
  EXPECT_EQ(back.out().type(), f32({3, 4, 5, 5}));
  EXPECT_EQ(std::memcmp(back.out().f32(), back.in(0).f32(), 300 * sizeof(float)), 0);
}

}  // namespace
}  // namespace tandem::testing
