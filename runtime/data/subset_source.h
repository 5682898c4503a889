#pragma once

// Views of a source: some of its examples (a --limit, a validation split).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/data/example_source.h"

namespace tandem::runtime::data {

/// The examples `indices` of `source`, in that order: example i is source example
/// indices[i], read with the same key. Fields, class labels and where() are the source's.
class SubsetSource : public ExampleSource {
 public:
  SubsetSource(std::shared_ptr<const ExampleSource> source, std::vector<int64_t> indices);
  std::string where() const override { return source_->where(); }
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  const std::vector<Field>& fields() const override { return source_->fields(); }
  absl::Status read(int64_t index, const ExampleKey& key,
                    absl::Span<void* const> out) const override;
  std::pair<std::string, int64_t> classLabels() const override { return source_->classLabels(); }
  const std::vector<int64_t>& indices() const { return indices_; }
  const ExampleSource& source() const { return *source_; }

 private:
  std::shared_ptr<const ExampleSource> source_;
  std::vector<int64_t> indices_;
};

/// The source under any SubsetSource views of it.
const ExampleSource& underlyingSource(const ExampleSource& source);

/// The first `count` examples of `source` (all of them when it has fewer).
std::unique_ptr<ExampleSource> firstExamples(std::shared_ptr<const ExampleSource> source,
                                             int64_t count);

struct TrainValidation {
  std::unique_ptr<ExampleSource> train, validation;
};

/// --val-fraction F: a deterministic split of `source` into training and validation
/// examples. Over a seeded permutation, not an index range, because files are often sorted
/// by class and the last fifth of one would hold only a few classes: validation takes the
/// first round(F * size) places of epochPermutation(size, seed ^ a constant, 0), training
/// the rest; each part in the source's order. The same seed gives the same split on every
/// platform, device count and process. Errors: F outside (0, 1), a part left empty, and a
/// source whose examples are random windows (tokens, text), where a split of the windows
/// would train on the validation text: give a separate validation file instead.
/// `setting` names the fraction in messages ("--val-fraction").
absl::StatusOr<TrainValidation> splitValidation(std::shared_ptr<const ExampleSource> source,
                                                double fraction, uint64_t seed = 0,
                                                const std::string& setting = "--val-fraction");

}  // namespace tandem::runtime::data
