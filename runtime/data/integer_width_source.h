#pragma once

// A source's integer fields at the width the model's inputs take (issue 42). Sources read
// integer arrays as i32 (NumPy's int64 ones checked to fit: runtime/data/npy_format.h);
// a model may declare an input i64 (PyTorch's long ids and labels), which its graph casts
// to i32 at its start. This view widens an i32 field for an i64 input, and narrows an i64
// field for an i32 one (a value past i32 is the read's error, naming the example), so that
// any source feeds either.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/ir.h"
#include "runtime/data/example_source.h"

namespace tandem::runtime::data {

class IntegerWidthSource : public ExampleSource {
 public:
  /// A view of `source` whose fields have the dtypes of `step`'s inputs of the same names,
  /// where the two are i32 and i64; nullptr when none differs so (the source as it is
  /// serves). `source` must outlive the view.
  static std::unique_ptr<IntegerWidthSource> forInputs(const ExampleSource& source,
                                                       const ir::Graph& step);

  std::string where() const override { return source_.where(); }
  int64_t size() const override { return source_.size(); }
  const std::vector<Field>& fields() const override { return fields_; }
  absl::Status read(int64_t index, const ExampleKey& key,
                    absl::Span<void* const> out) const override;
  std::pair<std::string, int64_t> classLabels() const override { return source_.classLabels(); }

 private:
  IntegerWidthSource(const ExampleSource& source, std::vector<Field> fields)
      : source_(source), fields_(std::move(fields)) {}
  const ExampleSource& source_;
  std::vector<Field> fields_;  // the source's, with the inputs' integer widths
};

/// The source that feeds `step`: `source`, or `view` set to its IntegerWidthSource when
/// the widths differ (the caller keeps `view` alive as long as the result).
const ExampleSource& sourceForInputs(const ExampleSource& source, const ir::Graph& step,
                                     std::unique_ptr<IntegerWidthSource>& view);

}  // namespace tandem::runtime::data
