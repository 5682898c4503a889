#include "runtime/data/subset_source.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/data/batch_loader.h"
#include "runtime/data/token_source.h"

namespace tandem::runtime::data {

SubsetSource::SubsetSource(std::shared_ptr<const ExampleSource> source,
                           std::vector<int64_t> indices)
    : source_(std::move(source)), indices_(std::move(indices)) {}

absl::Status SubsetSource::read(int64_t index, const ExampleKey& key,
                                absl::Span<void* const> out) const {
  if (index < 0 || index >= size())
    return absl::OutOfRangeError(
        absl::StrCat(where(), ": example ", index, " is beyond the ", size(), " taken"));
  return source_->read(indices_[static_cast<size_t>(index)], key, out);
}

const ExampleSource& underlyingSource(const ExampleSource& source) {
  const ExampleSource* s = &source;
  while (const auto* view = dynamic_cast<const SubsetSource*>(s)) s = &view->source();
  return *s;
}

std::unique_ptr<ExampleSource> firstExamples(std::shared_ptr<const ExampleSource> source,
                                             int64_t count) {
  std::vector<int64_t> indices(static_cast<size_t>(std::min(count, source->size())));
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i);
  return std::make_unique<SubsetSource>(std::move(source), std::move(indices));
}

absl::StatusOr<TrainValidation> splitValidation(std::shared_ptr<const ExampleSource> source,
                                                double fraction, uint64_t seed,
                                                const std::string& setting) {
  if (!(fraction > 0 && fraction < 1))
    return absl::InvalidArgumentError(
        absl::StrCat(setting, " ", fraction, " is not between 0 and 1 (0.2 keeps a fifth)"));
  if (dynamic_cast<const TokenSource*>(&underlyingSource(*source)) != nullptr)
    return absl::InvalidArgumentError(absl::StrCat(
        setting, " splits examples, but ", source->where(),
        " draws random windows from all of its tokens: give a separate validation file"));
  const int64_t n = source->size();
  const int64_t validation = std::llround(fraction * static_cast<double>(n));
  if (validation < 1 || validation >= n)
    return absl::InvalidArgumentError(
        absl::StrCat(setting, " ", fraction, " of ", source->where(), "'s ", n, " examples leaves ",
                     validation < 1 ? "no validation example" : "no training example"));
  // A salt, so that the split's order is not the first epoch's shuffle of the same seed.
  constexpr uint64_t kValidationSplitSalt = 0x76616c6964617465ull;  // "validate"
  std::vector<int64_t> order = epochPermutation(n, seed ^ kValidationSplitSalt, 0);
  std::vector<int64_t> val(order.begin(), order.begin() + validation);
  std::vector<int64_t> train(order.begin() + validation, order.end());
  std::sort(val.begin(), val.end());
  std::sort(train.begin(), train.end());
  TrainValidation parts;
  parts.train = std::make_unique<SubsetSource>(source, std::move(train));
  parts.validation = std::make_unique<SubsetSource>(std::move(source), std::move(val));
  return parts;
}

}  // namespace tandem::runtime::data
