#pragma once

// `tandem train --onnx MODEL.onnx [--input NAME] [--logits NAME] [--reinit]`: an ONNX
// model as the classifier `train` compiles (its graph the forward, the loss attached to
// the output named), and the values its initializers give the variables, written over
// the initializers' after @init unless --reinit.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/model.h"
#include "runtime/executor.h"

namespace tandem::tools {

/// Variable values by name (filled as the module is built).
using ImportedValues = std::map<std::string, std::vector<float>>;

struct OnnxModelSpec {
  ModelSpec spec;
  std::shared_ptr<ImportedValues> values;
};

/// The ONNX model in `path` as a ModelSpec taking images of its input `input` (unset: its
/// only data input) and returning its output `logits` (unset: its only output) as the
/// class scores. The graph is imported once here at `batch`, so that unsupported nodes and
/// malformed files are reported before any data loads. Errors name the flag or the file.
absl::StatusOr<OnnxModelSpec> onnxModelSpec(const std::string& path,
                                            const std::optional<std::string>& input,
                                            const std::optional<std::string>& logits,
                                            int64_t batch);

/// The error of an ONNX command in a tandem built without libonnx-dev and libprotobuf-dev:
/// "`what`: this tandem was built without `feature` (...; scripts/setup installs them)".
absl::Status builtWithoutOnnx(const char* what, const char* feature = "ONNX import");

/// Writes `values` into every variable of this process's devices that has one.
absl::Status writeImportedValues(runtime::Executor& exec, const ImportedValues& values);

}  // namespace tandem::tools
