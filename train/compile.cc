#include "train/compile.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/backend.h"
#include "backend/backends.h"
#include "frontend/build_module.h"
#include "ir/status_macros.h"
#include "ir/target.h"

namespace tandem::training {

CompileOptions withModelDefaults(const ModelSpec& spec, CompileOptions o) {
  o.build.weight_init = spec.defaults.weight_init;
  o.build.label_smoothing = spec.defaults.label_smoothing;
  o.pipeline.optimizer = spec.defaults.optimizer;
  o.pipeline.clip_grad_norm = spec.defaults.clip_grad_norm.value_or(0);
  o.pipeline.decay_matrices_only = spec.defaults.decay_matrices_only;
  // A schedule other than constant, or a warmup, feeds the learning rate every step.
  o.pipeline.lr_schedule = spec.defaults.schedule != "constant" ||
                           spec.defaults.warmup_epochs > 0 ||
                           spec.defaults.warmup_steps.value_or(0) > 0;
  return o;
}

absl::StatusOr<std::unique_ptr<ir::Module>> compileModel(
    const ModelSpec& spec, const CompileOptions& o, std::unique_ptr<passes::PassManager>* pm_out,
    const SettingNames& names) {
  passes::PipelineConfig config = o.pipeline;
  // The arena alignment the devices' targets want (ir/target.h): known for every kind this
  // build knows, also where it has no backend for it (dump --devices cuda:0).
  backend::registerBackends();
  ASSIGN_OR_RETURN(const int64_t alignment, ir::targetAlignment(config.devices));
  config.alignment = std::max(config.alignment, alignment);
  // Mixed precision needs kernels that compute in bf16 on every device (its facts again).
  if (config.bf16)
    for (const ir::Device& d : config.devices)
      if (const ir::TargetInfo* t = ir::findTarget(d.kind);
          t != nullptr &&
          std::find(t->dtypes.begin(), t->dtypes.end(), ir::DType::kBF16) == t->dtypes.end())
        return absl::InvalidArgumentError(
            absl::StrCat(names(Setting::kPrecision), " bf16: ", ir::toString(d), " is a ",
                         t->display_name, " device, whose kernels do not compute in bf16"));
  auto pipeline = passes::parsePipeline(passes::defaultPipeline(config));
  if (!pipeline.ok()) return pipeline.status();
  if (o.stop_after == "none") {
    pipeline->clear();
  } else if (!o.stop_after.empty()) {
    auto it = std::find_if(pipeline->begin(), pipeline->end(),
                           [&](const auto& p) { return p->name() == o.stop_after; });
    if (it == pipeline->end()) {
      std::vector<std::string> passes;
      for (const auto& p : *pipeline) passes.emplace_back(p->name());
      return absl::InvalidArgumentError(absl::StrCat(
          names(Setting::kStopAfter), ": '", o.stop_after,
          "' is not a pass of the default pipeline (", absl::StrJoin(passes, ", "), ", or none)"));
    }
    pipeline->erase(it + 1, pipeline->end());
  }
  auto module = buildModule(spec, o.build);
  if (!module.ok()) return module.status();
  auto pm = std::make_unique<passes::PassManager>(passes::PassManagerOptions{.verify = o.verify});
  for (auto& p : *pipeline) pm->add(std::move(p));
  if (absl::Status s = pm->run(**module); !s.ok()) return s;
  if (pm_out != nullptr) *pm_out = std::move(pm);
  return std::move(*module);
}

absl::StatusOr<std::unique_ptr<ir::Module>> compilePrediction(const ModelSpec& spec, int64_t batch,
                                                              passes::PipelineConfig pipeline) {
  backend::registerBackends();
  ASSIGN_OR_RETURN(const int64_t alignment, ir::targetAlignment(pipeline.devices));
  pipeline.alignment = std::max(pipeline.alignment, alignment);
  ASSIGN_OR_RETURN(std::unique_ptr<ir::Module> module,
                   buildPredictModule(spec, BuildOptions{.batch = batch}));
  passes::PassManager pm(passes::PassManagerOptions{.verify = true});
  RETURN_IF_ERROR(pm.addPipeline(passes::predictPipeline(pipeline)));
  RETURN_IF_ERROR(pm.run(*module));
  return module;
}

absl::Status checkDevicesRunHere(const std::vector<ir::Device>& devices) {
  backend::registerBackends();
  for (const ir::Device& d : devices) {
    if (d.rank != 0) continue;  // another process's, checked there
    absl::StatusOr<const backend::Backend*> b = backend::backendFor(d.kind);
    if (!b.ok())
      return absl::InvalidArgumentError(absl::StrCat(ir::toString(d), ": ", b.status().message()));
    RETURN_IF_ERROR((*b)->checkDevice(d));
  }
  return absl::OkStatus();
}

absl::Status compileInference(ir::Module& module, const std::vector<ir::Device>& devices) {
  backend::registerBackends();
  ASSIGN_OR_RETURN(const int64_t alignment, ir::targetAlignment(devices));
  const std::string text = absl::StrCat(
      "replicate{devices=[",
      absl::StrJoin(devices, ",",
                    [](std::string* o, const ir::Device& d) { o->append(ir::toString(d)); }),
      "]},insert-collectives,dce,schedule,assign-streams,plan-events,assign-layouts,",
      "choose-algorithms,", "plan-memory{alignment=", std::max<int64_t>(alignment, 64), "}");
  passes::PassManager pm(passes::PassManagerOptions{.verify = true});
  RETURN_IF_ERROR(pm.addPipeline(text));
  return pm.run(module);
}

}  // namespace tandem::training
