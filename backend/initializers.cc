#include "backend/initializers.h"

#include <cmath>
#include <cstring>
#include <numbers>
#include <random>

#include "absl/strings/str_cat.h"
#include "ir/random.h"

namespace tandem::backend {
namespace {

using ir::splitmix64;

/// A double in [0, 1) from the top 53 bits.
double unitInterval(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

/// Fills `n` floats with N(0, std) by Box-Muller over mt19937_64. std::normal_distribution
/// is not used: its algorithm is up to the standard library, mt19937_64's stream is not.
void fillNormal(float* out, int64_t n, double std, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < n; i += 2) {
    double u1 = 1.0 - unitInterval(rng());  // (0, 1]: log stays finite
    double u2 = unitInterval(rng());
    double r = std * std::sqrt(-2.0 * std::log(u1));
    double angle = 2.0 * std::numbers::pi * u2;
    out[i] = static_cast<float>(r * std::cos(angle));
    if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(angle));
  }
}

template <typename T>
void fillValue(void* data, int64_t n, T value) {
  T* out = static_cast<T*>(data);
  for (int64_t i = 0; i < n; ++i) out[i] = value;
}

}  // namespace

uint64_t variableSeed(uint64_t run_seed, absl::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return splitmix64(h ^ splitmix64(run_seed));
}

absl::Status checkInitializer(const ir::Var& var) {
  using Kind = ir::Initializer::Kind;
  ir::DType dtype = var.type.dtype;
  bool constant = var.init.kind == Kind::kZeros || var.init.kind == Kind::kOnes;
  if (dtype != ir::DType::kF32 && !(constant && dtype == ir::DType::kI32))
    return absl::UnimplementedError(absl::StrCat("variable @", var.name, " of type ",
                                                 ir::toString(var.type), " cannot be ",
                                                 ir::toString(var.init), "-initialized on CPU"));
  if (var.init.kind == Kind::kKaiming && var.type.rank() < 2)
    return absl::InvalidArgumentError(
        absl::StrCat("variable @", var.name, " of type ", ir::toString(var.type),
                     ": kaiming needs rank >= 2 (the fan-in is the product of all dims but "
                     "the first)"));
  if (var.init.kind == Kind::kNormal && !(var.init.std >= 0))
    return absl::InvalidArgumentError(
        absl::StrCat("variable @", var.name, ": normal std must be >= 0"));
  return absl::OkStatus();
}

double initializerStd(const ir::Var& var) {
  switch (var.init.kind) {
    case ir::Initializer::Kind::kNormal:
      return var.init.std;
    case ir::Initializer::Kind::kKaiming: {
      int64_t fan_in = 1;
      for (int64_t i = 1; i < var.type.rank(); ++i)
        fan_in *= var.type.shape[static_cast<size_t>(i)];
      return fan_in > 0 ? std::sqrt(2.0 / static_cast<double>(fan_in)) : 0.0;
    }
    default:
      return 0.0;
  }
}

void fillInitializer(const ir::Var& var, uint64_t run_seed, void* data) {
  int64_t n = var.type.numElements();
  bool f32 = var.type.dtype == ir::DType::kF32;
  switch (var.init.kind) {
    case ir::Initializer::Kind::kZeros:
      std::memset(data, 0, static_cast<size_t>(var.type.bytes()));
      return;
    case ir::Initializer::Kind::kOnes:
      if (f32)
        fillValue<float>(data, n, 1.0f);
      else
        fillValue<int32_t>(data, n, 1);
      return;
    case ir::Initializer::Kind::kNormal:
    case ir::Initializer::Kind::kKaiming:
      fillNormal(static_cast<float*>(data), n, initializerStd(var),
                 variableSeed(run_seed, var.name));
      return;
  }
}

}  // namespace tandem::backend
