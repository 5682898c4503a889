#include "tools/tandem/onnx_model.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/processes.h"
#include "ir/status_macros.h"

#ifdef TANDEM_HAVE_ONNX
#include "frontend/onnx/importer.h"
#endif

namespace tandem::tools {

absl::Status builtWithoutOnnx(const char* what, const char* feature) {
  return absl::FailedPreconditionError(
      absl::StrCat(what, ": this tandem was built without ", feature,
                   " (libonnx-dev and libprotobuf-dev were not found when it was configured; "
                   "scripts/setup installs them)"));
}

#ifndef TANDEM_HAVE_ONNX

absl::StatusOr<OnnxModelSpec> onnxModelSpec(const std::string&, const std::optional<std::string>&,
                                            const std::optional<std::string>&, int64_t) {
  return builtWithoutOnnx("--onnx");
}

#else

absl::StatusOr<OnnxModelSpec> onnxModelSpec(const std::string& path,
                                            const std::optional<std::string>& input,
                                            const std::optional<std::string>& logits,
                                            int64_t batch) {
  ASSIGN_OR_RETURN(std::shared_ptr<onnx_import::OnnxModel> model, onnx_import::readOnnxModel(path));
  const std::vector<onnx_import::ModelInput> inputs = onnx_import::modelInputs(*model);
  const std::vector<std::string> outputs = onnx_import::modelOutputs(*model);
  std::vector<std::string> input_names;
  for (const auto& in : inputs) input_names.push_back(in.name);
  const onnx_import::ModelInput* images = nullptr;
  for (const auto& in : inputs)
    if (input ? in.name == *input : inputs.size() == 1) images = &in;
  if (images == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(
        input ? absl::StrCat("--input ", *input, ": model '", path, "' has no such input")
              : absl::StrCat("--onnx ", path, ": the model has ", inputs.size(),
                             " inputs; name the images with --input"),
        " (its inputs: ", absl::StrJoin(input_names, ", "), ")"));
  const std::string logits_name = logits.value_or(outputs.size() == 1 ? outputs[0] : "");
  if (std::find(outputs.begin(), outputs.end(), logits_name) == outputs.end())
    return absl::InvalidArgumentError(absl::StrCat(
        logits ? absl::StrCat("--logits ", *logits, ": model '", path, "' has no such output")
               : absl::StrCat("--onnx ", path, ": the model has ", outputs.size(),
                              " outputs; name the class scores with --logits"),
        " (its outputs: ", absl::StrJoin(outputs, ", "), ")"));
  if (images->shape.size() < 2 || images->elem_type != onnx::TensorProto::FLOAT)
    return absl::InvalidArgumentError(absl::StrCat("--onnx ", path, ": input '", images->name,
                                                   "' is not a float batch [N, ...]"));
  ir::Shape shape = images->shape;
  shape[0] = batch;  // --batch sets it; the others are the images' (one shape for all)
  for (size_t d = 1; d < shape.size(); ++d)
    if (shape[d] < 0)
      return absl::InvalidArgumentError(absl::StrCat("--onnx ", path, ": input '", images->name,
                                                     "' leaves dimension ", d, " open"));
  // Imported once now: unsupported nodes and bad files are said before any data loads,
  // and the logits' shape gives the classes.
  ASSIGN_OR_RETURN(onnx_import::ImportedModel probe,
                   onnx_import::importModel(*model, {.input_shapes = {{images->name, shape}}}));
  const size_t at =
      size_t(std::find(outputs.begin(), outputs.end(), logits_name) - outputs.begin());
  const ir::Shape classes =
      probe.module->graph(onnx_import::kInferGraph)->outputs()[at]->type().shape;
  if (classes.size() != 2 || classes[0] != batch)
    return absl::InvalidArgumentError(absl::StrCat("--logits ", logits_name, ": model '", path,
                                                   "' gives it as [", absl::StrJoin(classes, ","),
                                                   "]; the class scores are [batch, classes]"));
  OnnxModelSpec out;
  out.values = std::make_shared<ImportedValues>(std::move(probe.values));
  out.spec = classifierModel(
      onnx_import::identifierFor(probe.module->name()),
      std::vector<int64_t>(shape.begin() + 1, shape.end()), classes[1],
      [model, values = out.values, input_name = images->name, at](Builder& b, Tensor x) -> Tensor {
        auto outs = onnx_import::emitGraph(*model, b, {{input_name, x}}, values.get());
        if (!outs.ok()) {
          b.fail(outs.status());
          return Tensor();
        }
        return (*outs)[at];
      });
  return out;
}

#endif  // TANDEM_HAVE_ONNX

absl::Status writeImportedValues(runtime::Executor& exec, const ImportedValues& values) {
  const ir::Module& m = exec.module();
  const int rank = backend::Processes::current().rank();
  for (const auto& [name, data] : values) {
    const ir::Var* var = m.findVar(name);
    if (var == nullptr) continue;
    if (int64_t(data.size()) != var->type.numElements())
      return absl::InternalError(absl::StrCat("variable @", name, ": ", data.size(),
                                              " imported values for ", ir::toString(var->type)));
    runtime::HostTensor t(var->type);
    std::memcpy(t.buffer.data(), data.data(), data.size() * sizeof(float));
    for (size_t d = 0; d < m.devices().size(); ++d)
      if (m.devices()[d].rank == rank) RETURN_IF_ERROR(exec.writeVariable(name, d, t));
  }
  return absl::OkStatus();
}

}  // namespace tandem::tools
