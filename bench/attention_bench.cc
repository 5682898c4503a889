// The fused attention op (issue 43) in three views:
//  - AttentionCore/<shape>/<pass>: the CPU core (backend/cpu/attention_core.h) alone on one
//    thread at a device's share of the GPT (batch 32 of 128 tokens, 4 heads of 32, causal)
//    and of the ViT (batch 128 of 50 tokens, 4 heads of 16);
//  - Step/vit/<fused|unfused>: a whole ViT training step on one CPU device at batch 128,
//    attention as the fused op or as matmul, scale, softmax, matmul and the heads'
//    transposes (zoo::VitOptions): images_per_s, the figure docs/PERF.md compares;
//  - Step/gpt/<context>: a GPT training step (batch 32 of `context` tokens, the zoo's
//    default size) on one device: tokens_per_s, and the step's arena (bytes, live peak)
//    as the plan places it, which the fused op keeps linear in the context (its
//    [T, T] scores are never stored): the arena at 1024 over the one at 128 is the ratio
//    issue 43 bounds at 9 (a [T, T] score tensor would make it about 64).
//  - Generate/gpt: the zoo's GPT (random weights) drawing 127 tokens after a one-token prompt
//    on one thread, a step per token over its KV cache: the milliseconds of the step at
//    position 8 and at 120 (medians over the runs) and their ratio, which issue 43 bounds
//    at 1.5 (without a cache the step at 120 would compute 15 times the tokens).
//
//   build/bench/attention_bench
//   build/bench/attention_bench --benchmark_filter='Step/vit'

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attention_core.h"
#include "benchmark/benchmark.h"
#include "frontend/zoo/zoo.h"
#include "ir/plan.h"
#include "runtime/measure_step.h"
#include "train/compile.h"
#include "train/generation.h"

namespace tandem {
namespace {

using backend::AttentionSizes;

std::vector<float> randomValues(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> v(n);
  for (float& x : v) x = normal(gen);
  return v;
}

void attentionCore(benchmark::State& state, AttentionSizes d, bool backward) {
  omp_set_num_threads(1);
  const size_t qn = static_cast<size_t>(d.batch * d.queries * d.heads * d.depth);
  const std::vector<float> q = randomValues(qn, 1), k = randomValues(qn, 2),
                           v = randomValues(qn, 3), dy = randomValues(qn, 4);
  std::vector<float> y(qn), lse(static_cast<size_t>(d.batch * d.heads * d.queries)), dq(qn), dk(qn),
      dv(qn);
  backend::cpu::attentionForward(d, {}, q.data(), k.data(), v.data(), y.data(), lse.data());
  for (auto _ : state) {
    if (backward)
      backend::cpu::attentionBackward(d, {}, dy.data(), q.data(), k.data(), v.data(), y.data(),
                                      lse.data(), dq.data(), dk.data(), dv.data());
    else
      backend::cpu::attentionForward(d, {}, q.data(), k.data(), v.data(), y.data(), lse.data());
    benchmark::ClobberMemory();
  }
  state.counters["rows_per_s"] =
      benchmark::Counter(static_cast<double>(d.batch * d.heads * d.queries),
                         benchmark::Counter::kIsIterationInvariantRate);
}

constexpr AttentionSizes kGpt{.batch = 32,
                             .heads = 4,
                             .queries = 128,
                             .keys = 128,
                             .depth = 32,
                             .value_depth = 32,
                             .scale = 0.17677669f,
                             .causal = true};
constexpr AttentionSizes kVit{.batch = 128,
                             .heads = 4,
                             .queries = 50,
                             .keys = 50,
                             .depth = 16,
                             .value_depth = 16,
                             .scale = 0.25f,
                             .causal = false};

/// A compiled module's training step on one CPU device, timed by runtime::measureStep.
void trainingStep(benchmark::State& state, const ModelSpec& spec, int64_t batch,
                  double examples_per_step, const char* rate) {
  omp_set_num_threads(1);
  training::CompileOptions o = training::withModelDefaults(spec);
  o.build.batch = batch;
  absl::StatusOr<std::unique_ptr<ir::Module>> m = training::compileModel(spec, o);
  if (!m.ok()) {
    state.SkipWithError(std::string(m.status().message()).c_str());
    return;
  }
  const ir::GraphPlan* plan = (*m)->graph(ir::kTrainGraph)->plan();
  const ir::ArenaPlan arena =
      plan != nullptr && !plan->arenas.empty() ? plan->arenas[0] : ir::ArenaPlan{};
  // One measurement of a few steps (the module is compiled once: a step takes seconds).
  for (auto _ : state) {
    absl::StatusOr<runtime::StepMeasurement> s =
        runtime::measureStep(*std::move(m), /*warmup=*/1, /*steps=*/4);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.status().message()).c_str());
      return;
    }
    state.SetIterationTime(s->step_s);
    state.counters[rate] = examples_per_step / s->step_s;
  }
  state.counters["arena_MiB"] = static_cast<double>(arena.bytes) / (1 << 20);
  state.counters["live_peak_MiB"] = static_cast<double>(arena.live_peak_bytes) / (1 << 20);
}

void generate(benchmark::State& state) {
  omp_set_num_threads(1);
  std::mt19937 rng(5);
  auto value_of = [&](const ir::Var& var) -> absl::StatusOr<runtime::HostTensor> {
    runtime::HostTensor t(var.type);
    std::normal_distribution<float> normal(0, 0.05f);
    float* x = reinterpret_cast<float*>(t.buffer.data());
    for (int64_t i = 0; i < var.type.numElements(); ++i) x[i] = normal(rng);
    return t;
  };
  absl::StatusOr<std::unique_ptr<training::Generator>> gen =
      training::Generator::create(zoo::gpt(), ir::Device{}, value_of);
  if (!gen.ok()) {
    state.SkipWithError(std::string(gen.status().message()).c_str());
    return;
  }
  std::vector<std::vector<double>> at(128);
  double seconds = 0;
  int64_t tokens = 0;
  for (auto _ : state) {
    const int32_t prompt[] = {0};
    absl::StatusOr<std::vector<int32_t>> drawn = (*gen)->generate(prompt, 127, {.seed = 1});
    if (!drawn.ok()) {
      state.SkipWithError(std::string(drawn.status().message()).c_str());
      return;
    }
    for (const auto& [position, s] : (*gen)->stepSeconds()) {
      at[static_cast<size_t>(position)].push_back(s);
      seconds += s;
      ++tokens;
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  const double at8 = median(at[8]), at120 = median(at[120]);
  state.counters["ms_at_8"] = at8 * 1e3;
  state.counters["ms_at_120"] = at120 * 1e3;
  state.counters["ratio_120_to_8"] = at8 > 0 ? at120 / at8 : 0;
  state.counters["tokens_per_s"] = seconds > 0 ? static_cast<double>(tokens) / seconds : 0;
}

void registerAll() {
  benchmark::RegisterBenchmark("Generate/gpt", generate)->Iterations(5)->Unit(benchmark::kMillisecond);
  for (bool backward : {false, true}) {
    const char* pass = backward ? "bwd" : "fwd";
    benchmark::RegisterBenchmark(
        ("AttentionCore/gpt/" + std::string(pass)).c_str(),
        [backward](benchmark::State& s) { attentionCore(s, kGpt, backward); })
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(
        ("AttentionCore/vit/" + std::string(pass)).c_str(),
        [backward](benchmark::State& s) { attentionCore(s, kVit, backward); })
        ->Unit(benchmark::kMillisecond);
  }
  for (bool fused : {true, false})
    benchmark::RegisterBenchmark(fused ? "Step/vit/fused" : "Step/vit/unfused",
                                 [fused](benchmark::State& s) {
                                   trainingStep(s, zoo::vit({}, {.fused_attention = fused}), 128,
                                                128, "images_per_s");
                                 })
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  for (int64_t context : {128, 1024})
    benchmark::RegisterBenchmark(
        ("Step/gpt/" + std::to_string(context)).c_str(),
        [context](benchmark::State& s) {
          zoo::GptShape shape;
          shape.context = context;
          trainingStep(s, zoo::gpt(shape), 32, 32.0 * static_cast<double>(context), "tokens_per_s");
        })
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  tandem::registerAll();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
