#pragma once

// The cases of tests/data/gen_nonfinite_refs.py (PyTorch 1.13 over NaN, +-inf, -0.0 and
// subnormals; see its docstring) and the agreement both of their readers ask for: the CPU
// kernels (nonfinite_ops_test.cc) and the CUDA backend's host-compiled per-element math
// (cuda_math_nonfinite_test.cc).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tandem::testing {

inline constexpr const char* kNonfiniteDir = TANDEM_SOURCE_DIR "/tests/data/nonfinite_refs";

/// The case files' names (without .ref), sorted.
inline std::vector<std::string> nonfiniteCaseNames() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(kNonfiniteDir, ec))
    if (e.path().extension() == ".ref") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

/// One tensor of a case: its dtype (f32, bf16, i32 or f64), shape and values (f32 and bf16
/// ones rounded to float, as written; f64 ones as written).
struct CaseTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<double> values;

  int64_t size() const { return static_cast<int64_t>(values.size()); }
  std::vector<int32_t> i32() const { return {values.begin(), values.end()}; }
};

/// A case file: gen_transformer_refs.py's format, read with strtod so that nan, inf and
/// -inf come through (RefCase's >> stops at them), with f64 and bf16 tensors besides.
class NonfiniteCase {
 public:
  static absl::StatusOr<NonfiniteCase> load(const std::string& name) {
    const std::string path = absl::StrCat(kNonfiniteDir, "/", name, ".ref");
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
    NonfiniteCase c;
    c.name_ = name;
    std::string line;
    for (int line_no = 1; std::getline(in, line); ++line_no) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream words(line);
      std::string kind, key;
      words >> kind >> key;
      if (kind == "attr") {
        words >> c.attrs_[key];
        continue;
      }
      if (kind != "tensor") return absl::DataLossError(absl::StrCat(path, ":", line_no, ": ?"));
      CaseTensor t;
      words >> t.dtype;
      int64_t n = 1;
      for (int64_t d; words >> d;) t.shape.push_back(d), n *= d;
      std::string data, word;
      if (!std::getline(in, data)) return absl::DataLossError(absl::StrCat(path, ": no values"));
      ++line_no;
      std::istringstream vs(data);
      while (vs >> word) {
        char* end = nullptr;
        const double v = std::strtod(word.c_str(), &end);
        if (end != word.c_str() + word.size())
          return absl::DataLossError(absl::StrCat(path, ":", line_no, ": bad value ", word));
        const bool as_is = t.dtype == "f64" || t.dtype == "i32";
        t.values.push_back(as_is ? v : static_cast<double>(static_cast<float>(v)));
      }
      if (t.size() != n)
        return absl::DataLossError(absl::StrCat(path, ":", line_no, ": ", t.size(), " values for ",
                                                n, " elements of ", key));
      c.tensors_[key] = std::move(t);
    }
    return c;
  }

  const std::string& name() const { return name_; }
  bool has(const std::string& tensor) const { return tensors_.count(tensor) > 0; }
  bool hasAttr(const std::string& key) const { return attrs_.count(key) > 0; }
  const CaseTensor& tensor(const std::string& key) const {
    static const CaseTensor kMissing;
    auto it = tensors_.find(key);
    EXPECT_TRUE(it != tensors_.end()) << name_ << " has no tensor " << key;
    return it == tensors_.end() ? kMissing : it->second;
  }
  std::string text(const std::string& key) const {
    auto it = attrs_.find(key);
    EXPECT_TRUE(it != attrs_.end()) << name_ << " has no attribute " << key;
    return it == attrs_.end() ? "" : it->second;
  }
  double num(const std::string& key) const { return std::strtod(text(key).c_str(), nullptr); }
  int64_t integer(const std::string& key) const { return static_cast<int64_t>(num(key)); }
  bool flag(const std::string& key) const { return integer(key) != 0; }

 private:
  std::string name_;
  std::map<std::string, std::string> attrs_;
  std::map<std::string, CaseTensor> tensors_;
};

inline absl::StatusOr<NonfiniteCase> loadNonfiniteCase(const std::string& name) {
  return NonfiniteCase::load(name);
}

/// The case's tolerance for finite values (of the tensor's largest finite |value|), and
/// whether it wants every value bit for bit.
inline double caseTolerance(const NonfiniteCase& c) {
  return c.hasAttr("_tol") ? c.num("_tol") : 1e-5;
}
inline bool caseExact(const NonfiniteCase& c) { return c.hasAttr("_exact") && c.flag("_exact"); }

/// "" when `got` agrees with `want`, else its first disagreements. NaN must meet NaN, an
/// infinity the same infinity; a finite value must be finite and within tol of the
/// largest finite |want| (exact: equal, the sign of a zero included).
inline std::string disagreement(const std::vector<double>& got, const std::vector<double>& want,
                                double tol, bool exact) {
  if (got.size() != want.size())
    return absl::StrCat(got.size(), " values where PyTorch has ", want.size());
  double scale = 0;
  for (double w : want)
    if (std::isfinite(w)) scale = std::max(scale, std::abs(w));
  const double bound = tol * (scale > 0 ? scale : 1.0);
  std::string out;
  int shown = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    bool agree;
    if (std::isnan(w))
      agree = std::isnan(g);
    else if (std::isinf(w) || exact)
      agree = g == w && std::signbit(g) == std::signbit(w);
    else
      agree = std::isfinite(g) && std::abs(g - w) <= bound;
    if (!agree && shown++ < 6) absl::StrAppend(&out, " [", i, "] ", g, " (PyTorch ", w, ")");
  }
  return out;
}

}  // namespace tandem::testing
