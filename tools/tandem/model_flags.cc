#include "tools/tandem/model_flags.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/zoo/zoo.h"
#include "ir/status_macros.h"
#include "runtime/data/text_source.h"
#include "tools/tandem/setting_flags.h"

namespace tandem::tools {
namespace {

absl::Status flagError(absl::string_view flag, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", message));
}

// --model gpt made for the data's vocabulary (a text's characters: y's classes), at the
// size the flags give.
absl::StatusOr<ModelSpec> languageModelOfFlags(const ModelFlags& f,
                                               const runtime::data::ExampleSource* data) {
  zoo::GptShape s;
  s.context = f.context.value_or(s.context);
  s.layers = f.gpt_layers.value_or(s.layers);
  s.heads = f.gpt_heads.value_or(s.heads);
  s.width = f.gpt_width.value_or(s.width);
  if (data != nullptr) {
    const auto [labels, vocabulary] = data->classLabels();
    const bool tokens = std::any_of(
        data->fields().begin(), data->fields().end(),
        [](const runtime::data::Field& x) { return x.name == "x" && x.dtype == ir::DType::kI32; });
    if (labels != "y" || !tokens)
      return flagError("--model",
                       absl::StrCat(f.model,
                                    " is a language model of token ids x and the "
                                    "next ids y, but ",
                                    data->where(), " holds no such text (give --data text:FILE)"));
    s.vocab = vocabulary;
  }
  if (absl::Status st = zoo::checkGptShape(s); !st.ok()) return flagError("--model", st.message());
  ModelSpec spec = zoo::gpt(s);
  // A text's vocabulary goes into the checkpoints, for `tandem generate` to read and write
  // text in it.
  if (const auto* text = dynamic_cast<const runtime::data::TextSource*>(data)) {
    const runtime::data::TextVocabulary& v = text->vocabulary();
    if (v.isBytes()) {
      spec.made_for.push_back({"text", "bytes"});
    } else {
      std::vector<int32_t> ids(static_cast<size_t>(v.size()));
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
      spec.made_for.push_back({"characters", v.decode(ids)});
    }
  }
  return spec;
}

}  // namespace

int64_t contextOfFlags(const ModelFlags& f) {
  return zoo::isLanguageModel(f.model) ? f.context.value_or(zoo::GptShape{}.context) : 0;
}

std::string inertModelFlagWarning(const ModelFlags& f, const ir::Module& compiled) {
  if (!f.sync_bn) return "";
  const ir::Graph* step = compiled.graph(ir::kTrainGraph);
  const bool batch_norm =
      step != nullptr && std::any_of(step->nodes().begin(), step->nodes().end(), [](const auto& n) {
        return n->op() == ir::Op::kBatchNorm || n->op() == ir::Op::kBatchNormApply;
      });
  if (!batch_norm)
    return absl::StrCat("--sync-bn: ", compiled.name(),
                        " has no batch norm, so there are no statistics to all-reduce; it changes "
                        "nothing");
  if (compiled.devices().size() == 1)
    return "--sync-bn: one device normalizes with the whole batch's statistics already; it "
           "changes nothing";
  return "";
}

absl::StatusOr<zoo::ImageClasses> imageClassesOf(const runtime::data::ExampleSource& data,
                                                 absl::string_view flag, absl::string_view model) {
  const auto [labels, classes] = data.classLabels();
  for (const runtime::data::Field& f : data.fields())
    if (f.name == "x" && f.dtype == ir::DType::kF32 && f.shape.size() == 3 && !labels.empty())
      return zoo::ImageClasses{.image_shape = f.shape, .classes = classes};
  std::vector<std::string> fields;
  for (const runtime::data::Field& f : data.fields()) fields.push_back(f.text());
  return flagError(flag, absl::StrCat(model,
                                      " is a classifier of images x: f32[C,H,W] with class "
                                      "labels y, but ",
                                      data.where(), " holds ", absl::StrJoin(fields, ", "),
                                      labels.empty() ? " without class labels" : ""));
}

absl::StatusOr<ModelSpec> modelSpecOfFlags(const ModelFlags& f,
                                           const runtime::data::ExampleSource* data,
                                           std::shared_ptr<ImportedValues>* imported) {
  for (auto [flag, given] : {std::pair{"--input", f.onnx_input.has_value()},
                             std::pair{"--logits", f.onnx_logits.has_value()},
                             std::pair{"--reinit", f.reinit}})
    if (given && !f.onnx) return flagError(flag, "applies to an ONNX model: give --onnx MODEL.onnx");
  if (f.onnx) {
    if (!f.model.empty())
      return flagError("--onnx", absl::StrCat("and --model ", f.model, " name two models; give one"));
    // Imported at the batch the module is built for (training::resolveModel's default: 256).
    constexpr int64_t kDefaultBatch = 256;
    ASSIGN_OR_RETURN(OnnxModelSpec model, onnxModelSpec(*f.onnx, f.onnx_input, f.onnx_logits,
                                                        f.batch.value_or(kDefaultBatch)));
    const std::vector<int64_t>& images = model.spec.inputs.front().shape;
    if (data != nullptr) {
      ASSIGN_OR_RETURN(const zoo::ImageClasses classes, imageClassesOf(*data, "--onnx", *f.onnx));
      if (images != classes.image_shape)
        return flagError("--onnx", absl::StrCat(*f.onnx, " takes ", absl::StrJoin(images, "x"),
                                                " images, but ", data->where(), " has ",
                                                absl::StrJoin(classes.image_shape, "x")));
    }
    if (imported != nullptr) *imported = model.values;
    return model.spec;
  }
  if (f.model.empty())
    return flagError("--model", absl::StrCat("is required (one of ",
                                             absl::StrJoin(zoo::modelNames(), ", "), ")"));
  if (zoo::isLanguageModel(f.model)) return languageModelOfFlags(f, data);
  for (auto [flag, given] : {std::pair{"--context", f.context.has_value()},
                             std::pair{"--gpt-layers", f.gpt_layers.has_value()},
                             std::pair{"--gpt-heads", f.gpt_heads.has_value()},
                             std::pair{"--gpt-width", f.gpt_width.has_value()}})
    if (given) return flagError(flag, absl::StrCat("sizes --model gpt, not ", f.model));
  // A model to train is made for the data's images and classes; one to look at keeps its
  // own (the ImageNet ResNets' 3x224x224).
  std::optional<zoo::ImageClasses> made_for;
  const std::vector<std::string> names = zoo::modelNames();
  if (data != nullptr && std::find(names.begin(), names.end(), f.model) != names.end()) {
    ASSIGN_OR_RETURN(made_for, imageClassesOf(*data, "--model", f.model));
  }
  auto spec = zoo::modelByName(f.model, made_for);
  if (!spec.ok()) return flagError("--model", spec.status().message());
  return *std::move(spec);
}

absl::StatusOr<training::ModelSettings> modelSettingsOfFlags(const ModelFlags& f,
                                                             const ModelSpec& spec,
                                                             bool for_training) {
  training::ModelSettings s = f;
  RETURN_IF_ERROR(training::parseWrittenSettings(f.written, spec, for_training,
                                                 FlagNames(f.onnx.has_value()), s));
  return s;
}

absl::StatusOr<ModelChoice> resolveModelFlags(const ModelFlags& f, bool for_training,
                                              std::shared_ptr<ImportedValues>* imported) {
  ASSIGN_OR_RETURN(ModelSpec spec, modelSpecOfFlags(f, /*data=*/nullptr, imported));
  ASSIGN_OR_RETURN(training::ModelSettings settings, modelSettingsOfFlags(f, spec, for_training));
  return training::resolveModel(spec, settings, for_training, FlagNames(f.onnx.has_value()));
}

}  // namespace tandem::tools
