#include "train/auto_split.h"

#include <utility>

#include "ir/interfaces.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"
#include "passes/replicate.h"

namespace tandem::training {

AutoSplit::AutoSplit(const ModelSpec& spec, CompileOptions options, runtime::Trainer& trainer,
                     runtime::SplitBalancer::Options balance)
    : spec_(spec),
      options_(std::move(options)),
      trainer_(trainer),
      balancer_(options_.pipeline.devices.size(), balance) {
  trainer_.executor().setTrace(balancer_.wantsTrace());
}

void AutoSplit::restore(const runtime::SplitBalancer::State& state) {
  balancer_.restore(state);
  trainer_.executor().setTrace(balancer_.wantsTrace());
}

std::vector<int64_t> AutoSplit::rows() const {
  // The sizes of the split of the images input (the first split of the step).
  for (const auto& n : trainer_.executor().module().graph(ir::kTrainGraph)->nodes())
    if (ir::SplitView::is(*n) && n->operand(0)->type().rank() == 4)
      return ir::SplitView(*n).sizes();
  return {};
}

absl::StatusOr<std::optional<std::vector<int64_t>>> AutoSplit::afterStep() {
  runtime::Executor& ex = trainer_.executor();
  std::vector<runtime::TraceEntry> trace;
  if (ex.tracing()) {
    for (const runtime::TraceEntry& e : ex.takeTrace())
      if (e.node->graph()->name() == ir::kTrainGraph) trace.push_back(e);
  }
  const std::vector<int64_t> now = rows();
  std::optional<std::vector<double>> weights = balancer_.afterStep(trace, now);
  std::optional<std::vector<int64_t>> changed;
  // Weights that round to the split already running cannot do better at this batch's
  // granularity: the balancer settles instead of recompiling the same step again.
  if (weights) {
    ASSIGN_OR_RETURN(std::vector<int64_t> proposed,
                     passes::splitBatch(options_.build.batch, now.size(), *weights));
    if (proposed == now) {
      balancer_.settle();
      weights.reset();
    }
  }
  if (weights) {
    options_.pipeline.weights = *weights;
    ASSIGN_OR_RETURN(std::unique_ptr<ir::Module> module, compileModel(spec_, options_));
    RETURN_IF_ERROR(trainer_.replaceModule(std::move(module)));
    changed = rows();
  }
  trainer_.executor().setTrace(balancer_.wantsTrace());
  return changed;
}

}  // namespace tandem::training
