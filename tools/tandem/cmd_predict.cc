// `tandem predict --checkpoint DIR (--data SPEC | --input NAME=FILE.npy ...) -o OUT.npy`:
// the outputs of a trained model (a classifier's logits) over any number of examples. The
// model is built again from the name the checkpoint records (or --model) as its prediction
// module alone (train/compile.h's compilePrediction: @predict_step, forward only, split
// across --devices), which loads from the checkpoint only the variables the forward reads
// (no optimizer state). Rows come out in the data's order; with class labels in the data
// the accuracy of the logits over it is printed too.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "frontend/build_module.h"
#include "frontend/zoo/zoo.h"
#include "ir/status_macros.h"
#include "ir/target.h"
#include "runtime/checkpoint.h"
#include "runtime/data/npy_format.h"
#include "runtime/data/open_source.h"
#include "runtime/predictor.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/output_file.h"
#include "tools/tandem/path_claims.h"
#include "tools/tandem/progress.h"
#include "train/compile.h"

namespace tandem::tools {
namespace {

absl::Status predictFlagError(absl::string_view flag, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", message));
}

/// The model the checkpoint holds: the one it names, which --model may only repeat, made
/// for `made_for` (the zoo's images and classes until the data is known).
absl::StatusOr<ModelSpec> predictedModel(const PredictFlags& f, const runtime::Checkpoint& c,
                                         const std::string& path,
                                         const zoo::ImageClasses& made_for = {}) {
  if (f.model && *f.model != c.model)
    return predictFlagError(absl::StrCat("--model ", *f.model),
                            absl::StrCat("'", path, "' was written by a run of model ", c.model));
  absl::StatusOr<ModelSpec> spec = zoo::isLanguageModel(c.model)
                                       ? zoo::modelOfCheckpoint(c.model, c.settings)
                                       : zoo::modelByName(c.model, made_for);
  if (!spec.ok())
    return predictFlagError(
        "--checkpoint", absl::StrCat("'", path, "' was written for model '", c.model,
                                     "', which is not a zoo model (a train --onnx model predicts "
                                     "with tandem run on its own .onnx file)"));
  if (!spec->predict)
    return predictFlagError("--checkpoint",
                            absl::StrCat("model ", c.model, " declares no prediction"));
  return spec;
}

/// The examples: --data's source, or the --input files as one npy source.
absl::StatusOr<std::unique_ptr<runtime::data::ExampleSource>> predictedData(
    const PredictFlags& f, const PredictSpec& predict, const std::string& model) {
  runtime::data::SourceOptions options{.split = runtime::data::Split::kTest,
                                       .limit = f.limit.value_or(0)};
  // A source's error names its file; the flag goes in front where it does not say it.
  const auto flagged = [](absl::string_view flag,
                          absl::StatusOr<std::unique_ptr<runtime::data::ExampleSource>> source)
      -> absl::StatusOr<std::unique_ptr<runtime::data::ExampleSource>> {
    if (source.ok() || absl::StartsWith(source.status().message(), flag)) return source;
    return absl::Status(source.status().code(),
                        absl::StrCat(flag, ": ", source.status().message()));
  };
  if (f.data) {
    options.setting = "--data";
    return flagged("--data", runtime::data::openSource(*f.data, options));
  }
  std::vector<std::string> pairs;
  for (const std::string& input : f.inputs) {
    const size_t eq = input.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == input.size())
      return predictFlagError("--input", absl::StrCat("'", input, "' is not NAME=FILE.npy"));
    const std::string name = input.substr(0, eq);
    if (std::find(predict.inputs.begin(), predict.inputs.end(), name) == predict.inputs.end())
      return predictFlagError(
          absl::StrCat("--input ", input),
          absl::StrCat("model ", model, " predicts from ", absl::StrJoin(predict.inputs, ", "),
                       "; it has no input ", name));
    pairs.push_back(input);
  }
  for (const std::string& name : predict.inputs)
    if (std::none_of(pairs.begin(), pairs.end(),
                     [&](const std::string& p) { return absl::StartsWith(p, name + "="); }))
      return predictFlagError(
          "--input", absl::StrCat("model ", model, " predicts from ", name, ", which no --input ",
                                  name, "=FILE.npy gives"));
  options.setting = "--input";
  return flagged("--input", runtime::data::openSource(
                                absl::StrCat("npy:", absl::StrJoin(pairs, ",")), options));
}

/// What the zoo model is made for: the images of the data (its field x, as `train` makes a
/// model for its data's) and the classes the checkpoint's weights tell apart. A checkpoint
/// does not record its classes, so they are read off its weights: the variables whose
/// shapes change between the model made for 2 and for 3 classes (the classifier's head)
/// hold the class count on the axis that changes.
absl::StatusOr<zoo::ImageClasses> imagesAndClasses(const runtime::Checkpoint& c,
                                                   const runtime::data::ExampleSource& data) {
  zoo::ImageClasses made_for;
  for (const runtime::data::Field& field : data.fields())
    if (field.name == "x" && field.dtype == ir::DType::kF32 && field.shape.size() == 3)
      made_for.image_shape = field.shape;
  std::unique_ptr<ir::Module> two, three;
  for (auto [classes, module] : {std::pair{2, &two}, std::pair{3, &three}}) {
    ASSIGN_OR_RETURN(
        ModelSpec spec,
        zoo::modelByName(
            c.model, zoo::ImageClasses{.image_shape = made_for.image_shape, .classes = classes}));
    absl::StatusOr<std::unique_ptr<ir::Module>> m = buildPredictModule(spec, {.batch = 1});
    // Images the model cannot take (too small for its layers) are the data's to name.
    if (!m.ok()) return m.status();
    *module = std::move(*m);
  }
  std::map<std::string, const runtime::CheckpointTensor*> first;
  for (const runtime::CheckpointTensor& t : c.tensors)
    if (t.replica == 0) first[t.name] = &t;
  for (const ir::Var& v : two->vars()) {
    const ir::Var* other = three->findVar(v.name);
    if (other == nullptr || other->type == v.type) continue;
    const auto it = first.find(v.name);
    for (size_t axis = 0; axis < v.type.shape.size(); ++axis)
      if (v.type.shape[axis] != other->type.shape[axis] && it != first.end() &&
          it->second->type.rank() == v.type.rank()) {
        made_for.classes = it->second->type.shape[axis];
        return made_for;
      }
  }
  return made_for;
}

/// Writes every variable of the predictor's module from replica 0 of the checkpoint (the
/// first device's: without --sync-bn each device's running statistics differ, and an
/// example's prediction must not depend on the device it lands on).
absl::Status loadVariables(runtime::Predictor& p, const runtime::Checkpoint& c,
                           const std::string& path, const std::string& made_for) {
  std::map<std::string, const runtime::CheckpointTensor*> first;
  for (const runtime::CheckpointTensor& t : c.tensors)
    if (t.replica == 0) first[t.name] = &t;
  for (const ir::Var& v : p.module().vars()) {
    auto it = first.find(v.name);
    if (it == first.end())
      return predictFlagError("--checkpoint", absl::StrCat("'", path, "' has no variable @", v.name,
                                                           " of model ", p.module().name()));
    const runtime::CheckpointTensor& t = *it->second;
    if (t.type != v.type)
      return predictFlagError(
          "--checkpoint",
          absl::StrCat("'", path, "': variable @", v.name, " is ", ir::toString(t.type),
                       " there, but model ", p.module().name(), " made for ", made_for, " has ",
                       ir::toString(v.type), "; its run trained on other images"));
    runtime::HostTensor value(v.type);
    std::memcpy(value.buffer.data(), t.bytes.data(), t.bytes.size());
    RETURN_IF_ERROR(p.setVariable(v.name, value));
  }
  return absl::OkStatus();
}

/// A row's predicted class as the accuracy kernels take it: its first NaN, else its first
/// largest logit.
int64_t argMax(const float* row, int64_t classes) {
  int64_t best = 0;
  for (int64_t j = 0; j < classes; ++j) {
    if (row[j] != row[j]) return j;
    if (row[j] > row[best]) best = j;
  }
  return best;
}

}  // namespace

absl::Status runPredict(const PredictFlags& f) {
  if (f.checkpoint.empty())
    return predictFlagError("--checkpoint", "is required (the directory of train --checkpoint)");
  if (f.output.empty()) return predictFlagError("--output", "is required (OUT.npy)");
  if (!absl::EndsWith(f.output, ".npy"))
    return predictFlagError(absl::StrCat("--output ", f.output), "the outputs go to a .npy file");
  if (f.data && !f.inputs.empty())
    return predictFlagError("--input", "give the examples by --data or by --input, not both");
  if (!f.data && f.inputs.empty())
    return predictFlagError("--data", "is required (a data spec, or --input NAME=FILE.npy)");
  const std::string path = runtime::checkpointPath(f.checkpoint);
  // The file written, claimed against every file read before anything is (path_claims.h).
  PathClaims claims;
  RETURN_IF_ERROR(claims.claim("--checkpoint", path, PathClaims::Use::kReads));
  for (const std::string& input : f.inputs)
    if (const size_t eq = input.find('='); eq != std::string::npos)
      RETURN_IF_ERROR(claims.claim(absl::StrCat("--input ", input.substr(0, eq)),
                                   input.substr(eq + 1), PathClaims::Use::kReads));
  if (f.data)
    for (const std::string& file : runtime::data::filesOfSpec(*f.data))
      RETURN_IF_ERROR(claims.claim("--data", file, PathClaims::Use::kReads));
  RETURN_IF_ERROR(claims.claim("--output", f.output, PathClaims::Use::kWrites));

  absl::StatusOr<std::vector<ir::Device>> devices = ir::parseTargetDevices(f.devices);
  if (!devices.ok()) return predictFlagError("--devices", devices.status().message());
  if (f.batch < static_cast<int64_t>(devices->size()))
    return predictFlagError(
        "--batch", absl::StrCat(f.batch, " is smaller than the device count ", devices->size(),
                                "; every device needs at least one example"));
  if (absl::Status here = training::checkDevicesRunHere(*devices); !here.ok())
    return predictFlagError("--devices", here.message());

  absl::StatusOr<runtime::Checkpoint> c = runtime::readCheckpointFile(f.checkpoint);
  if (!c.ok())
    return absl::Status(c.status().code(), absl::StrCat("--checkpoint: ", c.status().message()));
  // The model's inputs' names first (what --input may name), then the model made for the
  // data's images and the checkpoint's classes.
  ASSIGN_OR_RETURN(const ModelSpec named, predictedModel(f, *c, path));
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::data::ExampleSource> data,
                   predictedData(f, *named.predict, named.name));
  absl::StatusOr<zoo::ImageClasses> made_for = imagesAndClasses(*c, *data);
  if (!made_for.ok())
    return predictFlagError(f.data ? absl::StrCat("--data ", *f.data)
                                   : absl::StrCat("--input ", absl::StrJoin(f.inputs, " --input ")),
                            made_for.status().message());
  ASSIGN_OR_RETURN(const ModelSpec spec, predictedModel(f, *c, path, *made_for));

  // The forward as the run evaluated it: in bf16 when it trained in mixed precision.
  passes::PipelineConfig pipeline;
  pipeline.devices = *devices;
  for (const auto& [key, value] : c->settings)
    if (key == "precision" && value == "bf16") pipeline.bf16 = true;
  ASSIGN_OR_RETURN(std::unique_ptr<ir::Module> module,
                   training::compilePrediction(spec, f.batch, pipeline));
  runtime::ExecutorOptions options;
  options.backend_options.set("threads_per_device", f.threads_per_device);
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::Predictor> predictor,
                   runtime::Predictor::create(std::move(module), spec.predict->outputs, options));
  RETURN_IF_ERROR(predictor->checkData(
      *data, f.data ? absl::StrCat("--data ", *f.data)
                    : absl::StrCat("--input ", absl::StrJoin(f.inputs, " --input "))));
  if (spec.predict->outputs.size() != 1)
    return predictFlagError(
        absl::StrCat("--output ", f.output),
        absl::StrCat("model ", spec.name, " predicts ", spec.predict->outputs.size(), " outputs (",
                     absl::StrJoin(spec.predict->outputs, ", "), "); a .npy file holds one"));
  RETURN_IF_ERROR(loadVariables(
      *predictor, *c, path,
      absl::StrCat(absl::StrJoin(made_for->image_shape, "x"), " images (",
                   f.data ? absl::StrCat("--data ", *f.data)
                          : absl::StrCat("--input ", absl::StrJoin(f.inputs, " --input ")),
                   ")")));
  // Opened before the run, so that an output that cannot be written stops it first.
  ASSIGN_OR_RETURN(OutputFile out, OutputFile::openReplacing(f.output, "--output"));

  // A classifier's labels in the data: the accuracy of its logits over them.
  const std::string label_field = data->classLabels().first;
  size_t labels_at = SIZE_MAX;
  for (size_t k = 0; k < data->fields().size(); ++k)
    if (!label_field.empty() && data->fields()[k].name == label_field) labels_at = k;
  std::vector<int32_t> labels;
  ProgressBar bar(isatty(fileno(stderr)) != 0);
  int64_t done = 0;
  absl::StatusOr<std::vector<runtime::PredictedOutput>> predicted =
      predictor->predict(*data, [&](const runtime::data::Batch& batch, int64_t batches) {
        if (labels_at != SIZE_MAX) {
          const int32_t* y = batch.field<int32_t>(labels_at);
          labels.insert(labels.end(), y, y + batch.valid);
        }
        bar.update("predicting", ++done, batches, "");
        return true;
      });
  bar.clear();
  if (!predicted.ok()) return predicted.status();
  const runtime::HostTensor& result = (*predicted)[0].value;
  absl::StatusOr<std::string> header = runtime::data::npyFileHeader(
      result.type.dtype, {result.type.shape.begin(), result.type.shape.end()});
  if (!header.ok()) return predictFlagError("--output", header.status().message());
  RETURN_IF_ERROR(out.write(*header));
  RETURN_IF_ERROR(
      out.write(absl::string_view(result.buffer.data(), static_cast<size_t>(result.type.bytes()))));
  RETURN_IF_ERROR(out.close());

  const int64_t count = result.type.shape[0];
  std::string text = absl::StrCat(
      f.output, ": ", (*predicted)[0].name, " ", ir::toString(result.type), " of model ", spec.name,
      " from '", path, "' (",
      c->progress.steps == 0 ? absl::StrCat("after epoch ", c->epoch - 1)
                             : absl::StrCat("epoch ", c->epoch, ", step ", c->progress.steps),
      ")\n");
  if (labels_at != SIZE_MAX && result.type.rank() == 2 && result.type.dtype == ir::DType::kF32 &&
      static_cast<int64_t>(labels.size()) == count) {
    const int64_t classes = result.type.shape[1];
    int64_t correct = 0;
    for (int64_t i = 0; i < count; ++i)
      correct += argMax(result.f32() + i * classes, classes) == labels[size_t(i)];
    absl::StrAppend(&text, absl::StrFormat("accuracy %.4f (%d of %d examples)\n",
                                           double(correct) / double(count), correct, count));
  }
  OutputFile std_out = OutputFile::standardOutput();
  RETURN_IF_ERROR(std_out.write(text));
  return absl::OkStatus();
}

}  // namespace tandem::tools
