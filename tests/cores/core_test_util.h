#pragma once

// Shared by the transformer core tests: a CPU context to make cores with, and host
// tensors of either float type filled from reference values.

#include <cstdint>
#include <random>
#include <vector>

#include "backend/bf16.h"
#include "backend/cpu/cpu_context.h"
#include "ir/types.h"
#include "tests/cores/ref_case.h"

namespace tandem::testing {

/// cpu:0's context (engine and stream), made once.
inline backend::cpu::CpuContext& coreContext() {
  static backend::cpu::CpuContext ctx(ir::Device{}, /*seed=*/1);
  return ctx;
}

/// n values drawn from N(0, scale^2) with a fixed seed.
inline std::vector<double> randomValues(int64_t n, uint32_t seed, double scale = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0.0, scale);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = d(rng);
  return v;
}

/// A host tensor of f32 or bf16 values.
class Typed {
 public:
  Typed(ir::DType type, int64_t n) : type_(type) {
    if (type == ir::DType::kBF16)
      h_.assign(static_cast<size_t>(n), backend::bf16(0.0f));
    else
      f_.assign(static_cast<size_t>(n), 0.0f);
  }
  Typed(ir::DType type, const std::vector<double>& values) : Typed(type, int64_t(values.size())) {
    for (size_t i = 0; i < values.size(); ++i) set(int64_t(i), static_cast<float>(values[i]));
  }
  Typed(ir::DType type, const RefTensor& t) : Typed(type, t.values) {}

  ir::DType type() const { return type_; }
  int64_t size() const { return int64_t(type_ == ir::DType::kBF16 ? h_.size() : f_.size()); }
  void* data() { return type_ == ir::DType::kBF16 ? static_cast<void*>(h_.data()) : f_.data(); }
  const void* data() const {
    return type_ == ir::DType::kBF16 ? static_cast<const void*>(h_.data()) : f_.data();
  }
  float at(int64_t i) const {
    return type_ == ir::DType::kBF16 ? static_cast<float>(h_[size_t(i)]) : f_[size_t(i)];
  }
  void set(int64_t i, float v) {
    if (type_ == ir::DType::kBF16)
      h_[size_t(i)] = v;
    else
      f_[size_t(i)] = v;
  }
  std::vector<float> values() const {
    std::vector<float> v(static_cast<size_t>(size()));
    for (int64_t i = 0; i < size(); ++i) v[size_t(i)] = at(i);
    return v;
  }

 private:
  ir::DType type_;
  std::vector<float> f_;
  std::vector<backend::bf16> h_;
};

/// Loads a reference case or fails the test.
#define TANDEM_LOAD_REF(var, name)                        \
  auto var##_or = ::tandem::testing::RefCase::load(name); \
  ASSERT_TRUE(var##_or.ok()) << var##_or.status();        \
  const ::tandem::testing::RefCase& var = *var##_or

}  // namespace tandem::testing
