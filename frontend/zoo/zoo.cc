#include "frontend/zoo/zoo.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::zoo {
namespace {

struct Entry {
  const char* name;
  ModelSpec (*make)(const ImageClasses&);
  const ImageClasses* defaults;  // null: Fashion-MNIST's
};

constexpr Entry kModels[] = {
    {"lenet", lenet, nullptr},
    {"lenet_bn", lenetBn, nullptr},
    {"resnet18", resnet18, nullptr},
    {"resnet34", resnet34, &kImagenet},
    {"resnet50", resnet50, &kImagenet},
    {"resnet101", resnet101, &kImagenet},
    {"resnet152", resnet152, &kImagenet},
    {"vit", vit, nullptr},
    {"mlp", mlp, nullptr},
};

// The language models, made for a vocabulary and a context rather than images.
constexpr const char* kLanguageModels[] = {"gpt"};

}  // namespace

std::vector<std::string> modelNames() {
  std::vector<std::string> out;
  for (const Entry& e : kModels) out.emplace_back(e.name);
  for (const char* name : kLanguageModels) out.emplace_back(name);
  return out;
}

bool isLanguageModel(absl::string_view name) {
  for (const char* m : kLanguageModels)
    if (name == m) return true;
  return false;
}

absl::StatusOr<ModelSpec> modelOfCheckpoint(
    absl::string_view name, const std::vector<std::pair<std::string, std::string>>& settings) {
  if (name != "gpt") return modelByName(name);
  absl::StatusOr<GptShape> shape = gptShapeOf(settings);
  if (!shape.ok()) return shape.status();
  return gpt(*shape);
}

absl::StatusOr<ModelSpec> modelByName(absl::string_view name,
                                      const std::optional<ImageClasses>& data) {
  for (const Entry& e : kModels)
    if (name == e.name) return e.make(data ? *data : e.defaults ? *e.defaults : ImageClasses{});
  if (name == "gpt") return gpt();
  return absl::NotFoundError(
      absl::StrCat("unknown model '", name, "' (known: ", absl::StrJoin(modelNames(), ", "), ")"));
}

}  // namespace tandem::zoo
