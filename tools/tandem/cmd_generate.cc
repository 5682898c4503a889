// `tandem generate`: text from a trained language model's checkpoint (issue 43). The model
// is remade from the checkpoint's own settings (zoo::modelOfCheckpoint: its size and the
// text's characters), its one-token step compiled with a KV cache (train/generation.h),
// and every character printed as it is drawn.

#include <chrono>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "frontend/zoo/zoo.h"
#include "ir/status_macros.h"
#include "runtime/checkpoint.h"
#include "runtime/data/text_source.h"
#include "tools/tandem/commands.h"
#include "train/generation.h"

namespace tandem::tools {
namespace {

absl::Status generateError(absl::string_view flag, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", message));
}

/// The vocabulary a run on a text saved (the gpt's made_for: "model.characters", or
/// "model.text" = bytes).
absl::StatusOr<runtime::data::TextVocabulary> vocabularyOf(const runtime::Checkpoint& c,
                                                           const std::string& path) {
  for (const auto& [key, value] : c.settings) {
    if (key == "model.text" && value == "bytes") return runtime::data::TextVocabulary::bytes();
    if (key == "model.characters") return runtime::data::TextVocabulary::characters(value);
  }
  return generateError("--checkpoint", absl::StrCat("'", path, "' holds no text's vocabulary (its ",
                                                c.model, " was not trained on text:)"));
}

}  // namespace

absl::Status runGenerate(const GenerateFlags& f) {
  if (f.checkpoint.empty())
    return absl::InvalidArgumentError(
        "generate: --checkpoint DIR is required (train --checkpoint's)");
  const std::string path = runtime::checkpointPath(f.checkpoint);
  absl::StatusOr<runtime::Checkpoint> c = runtime::readCheckpointFile(f.checkpoint);
  if (!c.ok()) return generateError("--checkpoint", c.status().message());
  absl::StatusOr<ModelSpec> spec = zoo::modelOfCheckpoint(c->model, c->settings);
  if (!spec.ok()) return generateError("--checkpoint", spec.status().message());
  if (!spec->decode)
    return generateError("--checkpoint", absl::StrCat("'", path, "' holds model ", c->model,
                                                  ", which does not generate (a language model "
                                                  "does: --model gpt)"));
  ASSIGN_OR_RETURN(const runtime::data::TextVocabulary vocabulary, vocabularyOf(*c, path));
  absl::StatusOr<std::vector<int32_t>> prompt = vocabulary.encode(f.prompt);
  if (!prompt.ok()) return generateError("--prompt", prompt.status().message());
  absl::StatusOr<ir::Device> device = ir::parseDevice(f.device);
  if (!device.ok()) return generateError("--device", device.status().message());

  // The checkpoint's values, device 0's replica.
  auto value_of = [&](const ir::Var& var) -> absl::StatusOr<runtime::HostTensor> {
    for (const runtime::CheckpointTensor& t : c->tensors)
      if (t.name == var.name && t.replica == 0) {
        runtime::HostTensor value(t.type);
        std::memcpy(value.buffer.data(), t.bytes.data(), t.bytes.size());
        return value;
      }
    return generateError("--checkpoint", absl::StrCat("'", path, "' holds no variable @", var.name,
                                                  " of model ", c->model));
  };
  ASSIGN_OR_RETURN(std::unique_ptr<training::Generator> gen,
                   training::Generator::create(*spec, *device, value_of));
  std::fputs(f.prompt.c_str(), stdout);
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::vector<int32_t> drawn,
                   gen->generate(*prompt, f.tokens,
                                 {.temperature = f.temperature, .top_k = f.top_k, .seed = f.seed},
                                 [&](int32_t token) {
                                   const int32_t one[] = {token};
                                   std::fputs(vocabulary.decode(one).c_str(), stdout);
                                   std::fflush(stdout);
                                   return true;
                                 }));
  std::fputs("\n", stdout);
  // The rate on standard error, so that the text on standard output stays the text alone.
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "tandem: drew %zu tokens in %.3f s, %.0f tokens/s (feeding the prompt's %zu "
               "tokens included)\n",
               drawn.size(), seconds, seconds > 0 ? static_cast<double>(drawn.size()) / seconds : 0.0,
               prompt->size());
  return absl::OkStatus();
}

}  // namespace tandem::tools
