#include "runtime/data/integer_width_source.h"

#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace tandem::runtime::data {
namespace {

bool isI32OrI64(ir::DType t) { return t == ir::DType::kI32 || t == ir::DType::kI64; }

}  // namespace

std::unique_ptr<IntegerWidthSource> IntegerWidthSource::forInputs(const ExampleSource& source,
                                                                  const ir::Graph& step) {
  std::vector<Field> fields = source.fields();
  bool differs = false;
  for (Field& f : fields)
    for (const ir::Node* in : step.inputs()) {
      const ir::DType want = in->result()->type().dtype;
      if (in->result()->name() != f.name || f.dtype == want) continue;
      if (isI32OrI64(f.dtype) && isI32OrI64(want)) {
        f.dtype = want;
        differs = true;
      }
    }
  if (!differs) return nullptr;
  return std::unique_ptr<IntegerWidthSource>(new IntegerWidthSource(source, std::move(fields)));
}

absl::Status IntegerWidthSource::read(int64_t index, const ExampleKey& key,
                                      absl::Span<void* const> out) const {
  const std::vector<Field>& from = source_.fields();
  // The source's bytes of each converted field; thread-local, as the loader's threads read
  // at once.
  thread_local std::vector<std::vector<char>> scratch;
  scratch.resize(fields_.size());
  std::vector<void*> theirs(out.begin(), out.end());
  for (size_t f = 0; f < fields_.size(); ++f)
    if (fields_[f].dtype != from[f].dtype) {
      scratch[f].resize(static_cast<size_t>(from[f].bytes()));
      theirs[f] = scratch[f].data();
    }
  if (absl::Status s = source_.read(index, key, theirs); !s.ok()) return s;
  for (size_t f = 0; f < fields_.size(); ++f) {
    if (fields_[f].dtype == from[f].dtype) continue;
    const int64_t n = fields_[f].elements();
    if (fields_[f].dtype == ir::DType::kI64) {
      const auto* src = reinterpret_cast<const int32_t*>(scratch[f].data());
      auto* dst = static_cast<int64_t*>(out[f]);
      for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
      continue;
    }
    const auto* src = reinterpret_cast<const int64_t*>(scratch[f].data());
    auto* dst = static_cast<int32_t*>(out[f]);
    for (int64_t i = 0; i < n; ++i) {
      if (src[i] < std::numeric_limits<int32_t>::min() ||
          src[i] > std::numeric_limits<int32_t>::max())
        return absl::InvalidArgumentError(absl::StrCat(
            where(), ": example ", index, ": value ", src[i], " of field '", fields_[f].name,
            "' (element ", i, ") does not fit the model's i32 input"));
      dst[i] = static_cast<int32_t>(src[i]);
    }
  }
  return absl::OkStatus();
}

const ExampleSource& sourceForInputs(const ExampleSource& source, const ir::Graph& step,
                                     std::unique_ptr<IntegerWidthSource>& view) {
  view = IntegerWidthSource::forInputs(source, step);
  return view ? *view : source;
}

}  // namespace tandem::runtime::data
