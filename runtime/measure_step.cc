#include "runtime/measure_step.h"

#include <algorithm>
#include <chrono>

#include "ir/status_macros.h"
#include "runtime/host_tensor.h"

namespace tandem::runtime {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

absl::StatusOr<StepMeasurement> measureStep(std::unique_ptr<ir::Module> module, int warmup,
                                            int steps) {
  StepMeasurement out;
  ASSIGN_OR_RETURN(out.executor, Executor::create(std::move(module)));
  Executor& exec = *out.executor;
  RETURN_IF_ERROR(exec.run(ir::kInitGraph, {}).status());
  const ir::Graph* g = exec.module().graph(ir::kTrainGraph);
  if (g == nullptr) return absl::InternalError("the compiled module has no train_step graph");
  std::vector<HostTensor> inputs;
  std::vector<backend::TensorView> views;
  for (const ir::Node* in : g->inputs()) inputs.emplace_back(in->result()->type());
  for (const HostTensor& t : inputs) views.push_back(t.view());

  std::vector<std::vector<double>> per_node(g->idBound());
  std::vector<double> walls;
  for (int i = 0; i < warmup + steps; ++i) {
    const bool measured = i >= warmup;
    exec.setTrace(measured);
    auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(exec.run(ir::kTrainGraph, views).status());
    auto t1 = std::chrono::steady_clock::now();
    if (!measured) continue;
    walls.push_back(std::chrono::duration<double>(t1 - t0).count());
    for (const TraceEntry& e : exec.takeTrace())
      if (e.device == 0 && e.node->graph() == g && !e.prefetch)
        per_node[e.node->id()].push_back(static_cast<double>(e.end_ns - e.start_ns) * 1e-9);
  }
  out.node_seconds.resize(per_node.size());
  for (size_t i = 0; i < per_node.size(); ++i) out.node_seconds[i] = median(per_node[i]);
  out.step_s = median(walls);
  return out;
}

}  // namespace tandem::runtime
