// Pass microbenchmarks: each pass of the default pipeline, and the whole pipeline, on
// ResNet-18 ... ResNet-152 and LeNet replicated over 1, 2, 8 and 64 devices, plus LeNet
// and ResNet-18 over 256 and 1024 devices (the most the CLI accepts: ir::kMaxDevices). Each
// benchmark family fits its cost against N = total nodes of the module the pass produces, so linear
// passes report O(N). Timing is manual: only pass->run is measured, not the module
// copy each iteration starts from.
//
// The 256 and 1024 rows are the check that no pass grows with devices faster than the
// nodes do (plan-memory once went cubic in the device count). They stop at ResNet-18:
// ResNet-18 x 1024 is already 0.7 M nodes; the deeper ResNets there would take GBs and
// tens of seconds a row without adding a new shape to the curve.
//
//   build/bench/passes_bench --benchmark_filter=Pipeline/model:4
//   build/bench/passes_bench --benchmark_filter='devices:(256|1024)'
//   build/bench/passes_bench --benchmark_counters_tabular=true
//   TANDEM_BENCH_AUTO_FIT=1 build/bench/passes_bench   # best-fitting curve instead of O(N)
//   TANDEM_BENCH_PASS_TIMES=1 build/bench/passes_bench --benchmark_filter=Pipeline  # + each pass

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backend/targets.h"
#include "benchmark/benchmark.h"
#include "frontend/build_module.h"
#include "frontend/zoo/zoo.h"
#include "ir/ir.h"
#include "ir/types.h"
#include "passes/pass_manager.h"
#include "passes/pipeline.h"

namespace {

using tandem::ir::Module;
namespace passes = tandem::passes;
namespace backend = tandem::backend;
namespace ir = tandem::ir;

const char* const kModels[] = {"resnet18",  "resnet34",  "resnet50",
                               "resnet101", "resnet152", "lenet"};
const int kDevices[] = {1, 2, 8, 64};
// Model indices (into kModels) that also run at kManyDevices.
const int kManyDeviceModels[] = {0, 5};
const int kManyDevices[] = {256, static_cast<int>(tandem::ir::kMaxDevices)};

/// Global batch: 512, or one sample per device past that. Every device needs a sample;
/// the batch does not change the node count, only the shapes.
int64_t batchFor(int devices) { return std::max<int64_t>(512, devices); }

std::vector<std::unique_ptr<passes::Pass>> pipelineFor(int devices) {
  passes::PipelineConfig config;
  config.devices.clear();
  backend::registerTargets();  // what the pipeline asks of cpu devices (ir/target.h)
  for (int d = 0; d < devices; ++d) config.devices.push_back({ir::DeviceKind(), d});  // cpu:d
  auto pipeline = passes::parsePipeline(passes::defaultPipeline(config));
  if (!pipeline.ok()) std::abort();
  return *std::move(pipeline);
}

/// The model with the first `stage` passes of the default pipeline already applied.
std::unique_ptr<Module> moduleBefore(const char* model, int devices, size_t stage) {
  auto spec = tandem::zoo::modelByName(model);
  auto m = tandem::buildModule(*spec, {.batch = batchFor(devices)});
  if (!m.ok()) std::abort();
  auto pipeline = pipelineFor(devices);
  for (size_t i = 0; i < stage; ++i)
    if (!pipeline[i]->run(**m).ok()) std::abort();
  return *std::move(m);
}

/// Times passes [first, last) of the default pipeline, verifier off.
void runStages(benchmark::State& state, size_t first, size_t last) {
  const char* model = kModels[state.range(0)];
  int devices = static_cast<int>(state.range(1));
  std::unique_ptr<Module> input = moduleBefore(model, devices, first);
  auto pipeline = pipelineFor(devices);
  // With TANDEM_BENCH_PASS_TIMES=1 a row of several passes also reports each one's mean
  // time inside it (counters "ms:PASS"): a pass's own row runs it on a fresh clone, which
  // can differ from its cost in the pipeline.
  const bool pass_times = last - first > 1 && std::getenv("TANDEM_BENCH_PASS_TIMES") != nullptr;
  std::vector<double> seconds(last - first, 0.0);
  size_t nodes = 0;
  for (auto _ : state) {
    std::unique_ptr<Module> m = input->clone();
    // A clone shares its graphs' plans; a plan pass would copy it on its first write.
    // Copy here, untimed, so that a plan pass's row times the pass, as in the pipeline.
    for (const auto& g : m->graphs()) g->mutablePlan();
    auto start = std::chrono::steady_clock::now();
    auto pass_start = start;
    for (size_t i = first; i < last; ++i) {
      if (!pipeline[i]->run(*m).ok()) state.SkipWithError("pass failed");
      if (pass_times) {
        auto now = std::chrono::steady_clock::now();
        seconds[i - first] += std::chrono::duration<double>(now - pass_start).count();
        pass_start = now;
      }
    }
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    nodes = passes::countNodes(*m);
    benchmark::DoNotOptimize(m);
  }
  if (pass_times)
    for (size_t i = first; i < last; ++i)
      state.counters["ms:" + std::string(pipeline[i]->name())] =
          1e3 * seconds[i - first] / static_cast<double>(state.iterations());
  state.SetComplexityN(static_cast<int64_t>(nodes));
  state.counters["nodes"] = static_cast<double>(nodes);
  state.counters["nodes/s"] = benchmark::Counter(static_cast<double>(nodes) * state.iterations(),
                                                 benchmark::Counter::kIsRate);
  state.SetLabel(std::string(model) + " x" + std::to_string(devices));
}

void configure(benchmark::internal::Benchmark* b) {
  for (int m = 0; m < static_cast<int>(std::size(kModels)); ++m)
    for (int d : kDevices) b->Args({m, d});
  for (int m : kManyDeviceModels)
    for (int d : kManyDevices) b->Args({m, d});
  b->ArgNames({"model", "devices"})
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      // O(N) is the claim being checked (its RMS says how well it holds);
      // TANDEM_BENCH_AUTO_FIT=1 lets Google Benchmark pick the best-fitting curve instead.
      ->Complexity(std::getenv("TANDEM_BENCH_AUTO_FIT") ? benchmark::oAuto : benchmark::oN);
}

// Position of a pass in the default pipeline (as the CPU devices' pipeline has it); the
// whole pipeline is every position.
size_t stageOf(const char* pass) {
  std::vector<std::unique_ptr<passes::Pass>> pipeline = pipelineFor(2);
  for (size_t i = 0; i < pipeline.size(); ++i)
    if (pipeline[i]->name() == pass) return i;
  std::abort();
}
void runPass(benchmark::State& s, const char* pass) {
  const size_t stage = stageOf(pass);
  runStages(s, stage, stage + 1);
}

void BM_Autodiff(benchmark::State& s) { runPass(s, "autodiff"); }
void BM_FuseConvBnRelu(benchmark::State& s) { runPass(s, "fuse-conv-bn-relu"); }
void BM_Replicate(benchmark::State& s) { runPass(s, "replicate"); }
void BM_InsertCollectives(benchmark::State& s) { runPass(s, "insert-collectives"); }
void BM_RecomputeBnRelu(benchmark::State& s) { runPass(s, "recompute-bn-relu"); }
void BM_Dce(benchmark::State& s) { runPass(s, "dce"); }
void BM_Schedule(benchmark::State& s) { runPass(s, "schedule"); }
void BM_AssignStreams(benchmark::State& s) { runPass(s, "assign-streams"); }
void BM_PlanEvents(benchmark::State& s) { runPass(s, "plan-events"); }
void BM_PlanMemory(benchmark::State& s) { runPass(s, "plan-memory"); }
void BM_Pipeline(benchmark::State& s) { runStages(s, 0, pipelineFor(2).size()); }

BENCHMARK(BM_Autodiff)->Apply(configure);
BENCHMARK(BM_FuseConvBnRelu)->Apply(configure);
BENCHMARK(BM_Replicate)->Apply(configure);
BENCHMARK(BM_InsertCollectives)->Apply(configure);
BENCHMARK(BM_RecomputeBnRelu)->Apply(configure);
BENCHMARK(BM_Dce)->Apply(configure);
BENCHMARK(BM_Schedule)->Apply(configure);
BENCHMARK(BM_AssignStreams)->Apply(configure);
BENCHMARK(BM_PlanEvents)->Apply(configure);
BENCHMARK(BM_PlanMemory)->Apply(configure);
BENCHMARK(BM_Pipeline)->Apply(configure);

}  // namespace

BENCHMARK_MAIN();
