#include "tools/tandem/model_flags.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/zoo/zoo.h"

namespace tandem::tools {
namespace {

const std::vector<int64_t> kFashionMnistImage{1, 28, 28};

absl::Status flagError(absl::string_view flag, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", message));
}

}  // namespace

std::vector<std::string> trainableModelNames() {
  std::vector<std::string> out;
  for (const std::string& name : zoo::modelNames())
    if (zoo::modelByName(name)->image_shape == kFashionMnistImage) out.push_back(name);
  return out;
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

absl::StatusOr<ModelChoice> resolveModelFlags(const ModelFlags& f, bool for_training) {
  const std::vector<std::string> choices = for_training ? trainableModelNames() : zoo::modelNames();
  if (f.model.empty())
    return flagError("--model",
                     absl::StrCat("is required (one of ", absl::StrJoin(choices, ", "), ")"));
  auto spec = zoo::modelByName(f.model);
  if (!spec.ok()) return flagError("--model", spec.status().message());
  if (for_training && spec->image_shape != kFashionMnistImage)
    return flagError("--model",
                     absl::StrCat(f.model, " takes ", absl::StrJoin(spec->image_shape, "x"),
                                  " images, but Fashion-MNIST has 1x28x28 (train ",
                                  listWithOr(choices), ")"));
  return driver::resolveModel(*spec, f, for_training);
}

}  // namespace tandem::tools
