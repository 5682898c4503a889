#pragma once

// Reference cases written by tests/data/gen_transformer_refs.py with PyTorch 1.13 (see
// its docstring for the format): inputs, attributes and PyTorch's results, read back
// by the transformer core tests so that CI needs no PyTorch.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "backend/bf16.h"
#include "gtest/gtest.h"

namespace tandem::testing {

struct RefTensor {
  bool is_int = false;
  std::vector<int64_t> shape;
  std::vector<double> values;

  int64_t size() const { return static_cast<int64_t>(values.size()); }
  std::vector<float> f32() const { return std::vector<float>(values.begin(), values.end()); }
  std::vector<int32_t> i32() const {
    std::vector<int32_t> v;
    for (double x : values) v.push_back(static_cast<int32_t>(x));
    return v;
  }
  std::vector<backend::bf16> bf16() const {
    std::vector<backend::bf16> v;
    for (double x : values) v.emplace_back(static_cast<float>(x));
    return v;
  }
};

class RefCase {
 public:
  /// tests/data/transformer_refs/<name>.ref.
  static absl::StatusOr<RefCase> load(const std::string& name) {
    const std::string path =
        absl::StrCat(TANDEM_SOURCE_DIR, "/tests/data/transformer_refs/", name, ".ref");
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
    RefCase c;
    c.name_ = name;
    std::string line;
    int line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (line.empty() || line[0] == '#') continue;
      std::istringstream words(line);
      std::string kind, key;
      words >> kind >> key;
      if (kind == "attr") {
        std::string value;
        words >> value;
        c.attrs_[key] = value;
      } else if (kind == "tensor") {
        RefTensor t;
        std::string dtype;
        words >> dtype;
        t.is_int = dtype == "i32";
        int64_t d;
        int64_t n = 1;
        while (words >> d) t.shape.push_back(d), n *= d;
        std::string data;
        if (!std::getline(in, data))
          return absl::DataLossError(absl::StrCat(path, ":", line_no, ": no values"));
        ++line_no;
        std::istringstream vs(data);
        double v;
        // Values are f32 (or i32) written with 9 digits: rounding to float restores them.
        while (vs >> v) t.values.push_back(t.is_int ? v : double(static_cast<float>(v)));
        if (t.size() != n)
          return absl::DataLossError(absl::StrCat(path, ":", line_no, ": ", t.size(),
                                                  " values for ", n, " elements of ", key));
        c.tensors_[key] = std::move(t);
      } else {
        return absl::DataLossError(absl::StrCat(path, ":", line_no, ": unknown line"));
      }
    }
    return c;
  }

  const std::string& name() const { return name_; }
  bool has(const std::string& tensor) const { return tensors_.count(tensor) > 0; }
  bool hasAttr(const std::string& key) const { return attrs_.count(key) > 0; }
  const RefTensor& tensor(const std::string& key) const {
    static const RefTensor kMissing;
    auto it = tensors_.find(key);
    EXPECT_TRUE(it != tensors_.end()) << name_ << " has no tensor " << key;
    return it == tensors_.end() ? kMissing : it->second;
  }
  double num(const std::string& key) const {
    auto it = attrs_.find(key);
    EXPECT_TRUE(it != attrs_.end()) << name_ << " has no attribute " << key;
    return it == attrs_.end() ? 0.0 : std::stod(it->second);
  }
  int64_t integer(const std::string& key) const { return static_cast<int64_t>(num(key)); }
  bool flag(const std::string& key) const { return integer(key) != 0; }
  std::string text(const std::string& key) const {
    auto it = attrs_.find(key);
    EXPECT_TRUE(it != attrs_.end()) << name_ << " has no attribute " << key;
    return it == attrs_.end() ? "" : it->second;
  }

 private:
  std::string name_;
  std::map<std::string, std::string> attrs_;
  std::map<std::string, RefTensor> tensors_;
};

/// max |got - want| / max |want|: the error relative to the tensor's scale, which is
/// what a different order of f32 additions, or a rounding to bf16, bounds.
template <typename T>
double relativeError(const std::vector<T>& got, const RefTensor& want) {
  EXPECT_EQ(static_cast<int64_t>(got.size()), want.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < got.size() && i < want.values.size(); ++i) {
    const double g = static_cast<float>(got[i]);
    worst = std::max(worst, std::isnan(g) ? INFINITY : std::abs(g - want.values[i]));
    scale = std::max(scale, std::abs(want.values[i]));
  }
  return scale > 0 ? worst / scale : worst;
}

}  // namespace tandem::testing
