#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "frontend/zoo/zoo.h"
#include "ir/types.h"
#include "passes/pass_manager.h"
#include "passes/pipeline.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/summary.h"

namespace tandem::tools {

void addDumpCommand(CLI::App& app, DumpFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "dump", "Build a zoo model, run the default pipeline and print the parallel graph.");
  // Required, but checked in runDump (see main.cc for why not by CLI11).
  cmd->add_option("--model", f.model,
                  "Model to build (required): " + absl::StrJoin(zoo::modelNames(), ", "));
  cmd->add_option("--devices", f.devices,
                  "Devices to replicate over: a list such as cpu:0,cpu:1 or cuda:0,cuda:1, or a "
                  "count N meaning cpu:0..cpu:N-1")
      ->capture_default_str();
  addBatchOption(cmd, f.batch);
  cmd->add_option("--after", f.after,
                  "Stop after this pass of the default pipeline (" +
                      absl::StrJoin(passes::defaultPassNames(), ", ") +
                      "), or 'none' for the model as built");
  addOutputFlags(cmd, f.out);
  cmd->add_option("--lr", f.lr, "SGD learning rate written into sgd_update")->capture_default_str();
  cmd->add_option("--momentum", f.momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--weight-decay", f.weight_decay, "SGD weight decay")->capture_default_str();
  cmd->add_option("--bucket-mb", f.bucket_mb, "Gradient all_reduce bucket cap in MiB")
      ->capture_default_str();
  cmd->add_option("--first-bucket-mb", f.first_bucket_mb, "Cap of the first (earliest) bucket")
      ->capture_default_str();
  cmd->add_flag("--memory", f.memory,
                "Print each graph's arena size per device (peak bytes) instead of the module");
  cmd->add_option("--weights", f.weights,
                  "Split the batch in proportion to these per-device weights, e.g. 3,1");
}

absl::Status runDump(const DumpFlags& f) {
  if (f.model.empty())
    return absl::InvalidArgumentError(absl::StrCat("dump: --model is required (one of ",
                                                   absl::StrJoin(zoo::modelNames(), ", "), ")"));
  if (absl::Status s = checkFormat(f.out.format); !s.ok()) return s;
  auto spec = zoo::modelByName(f.model);
  if (!spec.ok())
    return absl::InvalidArgumentError(absl::StrCat("--model: ", spec.status().message()));
  auto devices = ir::parseDeviceList(f.devices);
  if (!devices.ok())
    return absl::InvalidArgumentError(absl::StrCat("--devices: ", devices.status().message()));
  if (f.batch < 1)
    return absl::InvalidArgumentError(absl::StrCat("--batch: must be >= 1, got ", f.batch));
  if (f.batch < static_cast<int64_t>(devices->size()))
    return absl::InvalidArgumentError(
        absl::StrCat("--batch: ", f.batch, " is smaller than the device count ", devices->size(),
                     "; every device needs at least one sample"));
  passes::PipelineConfig config{.devices = *devices,
                                .lr = f.lr,
                                .momentum = f.momentum,
                                .weight_decay = f.weight_decay,
                                .bucket_mb = f.bucket_mb,
                                .first_bucket_mb = f.first_bucket_mb};
  if (!f.weights.empty()) {
    for (absl::string_view w : absl::StrSplit(f.weights, ',')) {
      double v = 0;
      if (!absl::SimpleAtod(w, &v) || !(v > 0))
        return absl::InvalidArgumentError(
            absl::StrCat("--weights: '", f.weights, "' must be positive numbers such as 3,1"));
      config.weights.push_back(v);
    }
    if (config.weights.size() != devices->size())
      return absl::InvalidArgumentError(absl::StrCat("--weights: ", config.weights.size(),
                                                     " weights for ", devices->size(), " devices"));
  }
  auto module = buildModule(*spec, {.batch = f.batch});
  if (!module.ok()) return module.status();

  auto pipeline = passes::parsePipeline(passes::defaultPipeline(config));
  if (!pipeline.ok()) return pipeline.status();
  if (!f.after.empty()) {
    auto names = passes::defaultPassNames();
    if (f.after == "none") {
      pipeline->clear();
    } else {
      auto it = std::find(names.begin(), names.end(), f.after);
      if (it == names.end())
        return absl::InvalidArgumentError(absl::StrCat("--after: '", f.after,
                                                       "' is not a pass of the default pipeline (",
                                                       absl::StrJoin(names, ", "), ", or none)"));
      pipeline->resize(static_cast<size_t>(it - names.begin()) + 1);
    }
  }
  passes::PassManager pm({.verify = !f.out.no_verify});
  for (auto& p : *pipeline) pm.add(std::move(p));
  if (absl::Status s = pm.run(**module); !s.ok()) return s;
  if (f.out.timing) std::cerr << pm.timingReport();
  if (f.memory) {
    std::cout << memoryReport(**module);
    return absl::OkStatus();
  }
  return writeModule(**module, f.out);
}

void addBatchOption(CLI::App* cmd, int64_t& batch) {
  // Parsed by hand: CLI11 silently clamps an out-of-range integer to INT64_MAX.
  cmd->add_option_function<std::string>(
         "--batch",
         [&batch](const std::string& text) {
           if (!absl::SimpleAtoi(text, &batch))
             throw CLI::ValidationError("--batch", "'" + text + "' is not a 64-bit integer");
         },
         "Global batch size, split across the devices")
      ->type_name("INT")
      ->default_str(absl::StrCat(batch));
}

}  // namespace tandem::tools
