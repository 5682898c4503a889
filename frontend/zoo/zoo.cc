#include "frontend/zoo/zoo.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::zoo {
namespace {

struct Entry {
  const char* name;
  ModelSpec (*make)();
};

ModelSpec defaultResnet18() { return resnet18(); }

constexpr Entry kModels[] = {
    {"lenet", lenet},         {"lenet_bn", lenetBn},  {"resnet18", defaultResnet18},
    {"resnet34", resnet34},   {"resnet50", resnet50}, {"resnet101", resnet101},
    {"resnet152", resnet152}, {"vit", vit},           {"mlp", mlp},
};

}  // namespace

std::vector<std::string> modelNames() {
  std::vector<std::string> out;
  for (const Entry& e : kModels) out.emplace_back(e.name);
  return out;
}

absl::StatusOr<ModelSpec> modelByName(absl::string_view name) {
  for (const Entry& e : kModels)
    if (name == e.name) return e.make();
  return absl::NotFoundError(
      absl::StrCat("unknown model '", name, "' (known: ", absl::StrJoin(modelNames(), ", "), ")"));
}

}  // namespace tandem::zoo
