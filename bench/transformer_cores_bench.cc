// The transformer compute cores (backend/cpu/*_core.h) and gelu's op kernels (gelu has no
// core: backend/cpu/elementwise_kernels.cc) at the shapes of the ViT of issue 24 on one
// device: batch 128 per device, 50 tokens (49 patches and the class token), width 64, 4
// heads of 16, MLP 128. Single thread, as the runtime runs a device (one core each).
// bench/transformer_cores_vs_pytorch.sh runs these and PyTorch 1.13 on the same shapes in
// one run and prints the ratios.
//
//   build/bench/transformer_cores_bench
//   build/bench/transformer_cores_bench --benchmark_filter='Matmul/.*/f32'
//   ONEDNN_VERBOSE=1 build/bench/transformer_cores_bench --benchmark_filter=LayerNorm
//
// Names: Matmul/<layer>/<pass>/<dtype> with pass fwd (C = op(A) op(B) [+ bias]), dA or
// dB (the products of matmulGradA/B); the label names oneDNN's implementation. Layers:
// qkv, proj, mlp_up and mlp_down are token-wise linear layers (x[6400, in] times the
// transposed weight [out, in], as nn.Linear stores it, + bias); scores is Q K^T per head
// (512 batches of 50x16 by 16x50, scaled by 1/4) and context is P V (512 of 50x50 by 50x16).

#include <omp.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/bf16.h"
#include "backend/cpu/adamw_core.h"
#include "backend/cpu/cpu_context.h"
#include "backend/cpu/dropout_core.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/layer_norm_core.h"
#include "backend/cpu/matmul_core.h"
#include "backend/cpu/softmax_core.h"
#include "backend/matmul_shape.h"
#include "benchmark/benchmark.h"
#include "ir/ir.h"

namespace tandem::backend::cpu {
namespace {

constexpr int64_t kBatch = 128, kTokens = 50, kWidth = 64, kHeads = 4, kMlp = 128;
constexpr int64_t kRows = kBatch * kTokens;  // 6400 token rows
constexpr int64_t kHeadDim = kWidth / kHeads;

CpuContext& context() {
  static CpuContext* ctx = [] {
    omp_set_num_threads(1);  // before any primitive is made: oneDNN fixes its threads then
    return new CpuContext(ir::Device{}, 1);
  }();
  return *ctx;
}

/// Host memory of n elements of `type`, filled with N(0, 1) values.
class Tensor {
 public:
  Tensor(ir::DType type, int64_t n) : bytes_(size_t(n) * (type == ir::DType::kBF16 ? 2 : 4)) {
    storage_.resize((bytes_ + 63) / 64 + 1);
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::normal_distribution<float> d;
    for (int64_t i = 0; i < n; ++i) {
      if (type == ir::DType::kBF16)
        static_cast<bf16*>(data())[i] = d(rng);
      else
        static_cast<float*>(data())[i] = d(rng);
    }
  }
  void* data() { return storage_.data(); }

 private:
  struct alignas(64) Line {
    char b[64];
  };
  size_t bytes_;
  std::vector<Line> storage_;
};

struct Layer {
  const char* name;
  MatmulShape shape;
  bool bias;
  float scale;
};

const Layer kLayers[] = {
    {"qkv", {1, kRows, 3 * kWidth, kWidth, false, true}, true, 1.0f},
    {"scores", {kBatch * kHeads, kTokens, kTokens, kHeadDim, false, true}, false, 0.25f},
    {"context", {kBatch * kHeads, kTokens, kHeadDim, kTokens}, false, 1.0f},
    {"proj", {1, kRows, kWidth, kWidth, false, true}, true, 1.0f},
    {"mlp_up", {1, kRows, kMlp, kWidth, false, true}, true, 1.0f},
    {"mlp_down", {1, kRows, kWidth, kMlp, false, true}, true, 1.0f},
    // The same linear layers with the weight stored [in, out] (no transpose), to compare
    // oneDNN's handling of the transposed weight (docs/PERF.md).
    {"qkv_w_in_out", {1, kRows, 3 * kWidth, kWidth}, true, 1.0f},
    {"mlp_up_w_in_out", {1, kRows, kMlp, kWidth}, true, 1.0f},
};

enum class Pass { kForward, kGradA, kGradB };

void BM_Matmul(benchmark::State& state, Layer layer, Pass pass, ir::DType type) {
  MatmulSpec spec;
  spec.a = spec.b = spec.c = type;
  if (pass == Pass::kForward) {
    spec.shape = layer.shape;
    spec.scale = layer.scale;
    if (layer.bias) spec.bias = ir::DType::kF32;
  } else {
    auto g = pass == Pass::kGradA ? matmulGradA(layer.shape) : matmulGradB(layer.shape);
    if (!g.ok()) return state.SkipWithError(std::string(g.status().message()).c_str());
    spec.shape = g->shape;
    // A weight's gradient comes out f32 (mixed precision keeps f32 masters).
    if (pass == Pass::kGradB && layer.bias) spec.c = ir::DType::kF32;
  }
  auto core = MatmulCore::make(context(), spec, "bench");
  if (!core.ok()) return state.SkipWithError(std::string(core.status().message()).c_str());
  const MatmulShape& s = spec.shape;
  Tensor a(type, s.aBatch() * s.m * s.k), b(type, s.bBatch() * s.k * s.n),
      c(spec.c, s.batch * s.m * s.n), bias(ir::DType::kF32, s.n);
  for (auto _ : state) core->run(a.data(), b.data(), bias.data(), c.data());
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * double(s.macs()), benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
  state.SetLabel(core->implementations());
}

void BM_LayerNorm(benchmark::State& state, bool backward, ir::DType type) {
  const LayerNormSpec spec{kRows, kWidth, type, 1e-6f};
  Tensor x(type, kRows * kWidth), dy(type, kRows * kWidth), y(type, kRows * kWidth);
  Tensor gamma(ir::DType::kF32, kWidth), beta(ir::DType::kF32, kWidth), dg(ir::DType::kF32, kWidth),
      db(ir::DType::kF32, kWidth);
  std::vector<float> mean(kRows), var(kRows, 1.0f);
  auto* g = static_cast<float*>(gamma.data());
  if (!backward) {
    auto core = LayerNormForward::make(context(), spec, "bench");
    if (!core.ok()) return state.SkipWithError(std::string(core.status().message()).c_str());
    for (auto _ : state)
      core->run(x.data(), g, static_cast<float*>(beta.data()), y.data(), mean.data(), var.data());
    state.SetLabel(core->implementations());
  } else {
    auto core = LayerNormBackward::make(context(), spec, "bench");
    if (!core.ok()) return state.SkipWithError(std::string(core.status().message()).c_str());
    for (auto _ : state)
      core->run(x.data(), dy.data(), mean.data(), var.data(), g, y.data(),
                static_cast<float*>(dg.data()), static_cast<float*>(db.data()));
    state.SetLabel(core->implementations());
  }
}

void BM_Softmax(benchmark::State& state, bool backward, ir::DType type) {
  // Attention's probabilities: 512 heads x 50 query rows, over 50 keys.
  const SoftmaxSpec spec{{kBatch * kHeads * kTokens, kTokens, 1}, type, false};
  const int64_t n = spec.dims.numElements();
  Tensor x(type, n), y(type, n), dy(type, n);
  if (!backward) {
    auto core = SoftmaxForward::make(context(), spec, "bench");
    if (!core.ok()) return state.SkipWithError(std::string(core.status().message()).c_str());
    for (auto _ : state) core->run(x.data(), y.data());
    state.SetLabel(core->implementations());
  } else {
    auto core = SoftmaxBackward::make(context(), spec, "bench");
    if (!core.ok()) return state.SkipWithError(std::string(core.status().message()).c_str());
    for (auto _ : state) core->run(y.data(), dy.data(), x.data());
    state.SetLabel(core->implementations());
  }
}

/// gelu's op kernel (the kernel table's, as the runtime makes it: oneDNN's eltwise
/// primitive) over the MLP's hidden activations; backward is gelu_backward(dy, x).
void BM_Gelu(benchmark::State& state, bool backward, ir::DType type) {
  const int64_t n = kRows * kMlp;  // the MLP's hidden activations
  const ir::TensorType t{type, {kRows, kMlp}};
  ir::Module module("bench");
  ir::Graph* g = *module.addGraph("g");
  ir::NodeSpec spec{.op = backward ? ir::Op::kGeluBackward : ir::Op::kGelu,
                    .device = context().device()};
  for (int i = 0; i < (backward ? 2 : 1); ++i) {
    auto in =
        g->create({.op = ir::Op::kInput, .device = context().device(), .declared_types = {t}});
    if (!in.ok()) return state.SkipWithError(std::string(in.status().message()).c_str());
    spec.operands.push_back((*in)->result());
  }
  auto node = g->create(std::move(spec));
  if (!node.ok()) return state.SkipWithError(std::string(node.status().message()).c_str());
  KernelOr kernel = makeKernel(**node, context());
  if (!kernel.ok()) return state.SkipWithError(std::string(kernel.status().message()).c_str());
  Tensor x(type, n), dy(type, n), y(type, n);
  std::vector<TensorView> in{{backward ? dy.data() : x.data(), t}};
  if (backward) in.push_back({x.data(), t});
  const std::vector<TensorView> out{{y.data(), t}};
  for (auto _ : state) benchmark::DoNotOptimize((*kernel)->runHere(in, out));
  if (auto* program = dynamic_cast<ProgramKernel*>(kernel->get()))
    state.SetLabel(program->program().implementations());
  state.SetBytesProcessed(state.iterations() * n * (backward ? 3 : 2) *
                          (type == ir::DType::kBF16 ? 2 : 4));
}

void BM_Dropout(benchmark::State& state) {
  // After the MLP's GELU: 6400 x 128 values, 128 samples of 50 x 128.
  const DropoutMask mask = dropoutMask(1, 2, 3, 0.1);
  const DropoutSlice slice{128, kBatch, kTokens * kMlp};
  Tensor x(ir::DType::kF32, kRows * kMlp), y(ir::DType::kF32, kRows * kMlp);
  for (auto _ : state)
    dropoutApply(mask, slice, static_cast<float*>(x.data()), static_cast<float*>(y.data()));
  state.SetItemsProcessed(state.iterations() * kRows * kMlp);
}

void BM_AdamW(benchmark::State& state) {
  // Every parameter of the ViT (about 208k) in one call.
  const int64_t n = state.range(0);
  Tensor w(ir::DType::kF32, n), g(ir::DType::kF32, n), m(ir::DType::kF32, n), v(ir::DType::kF32, n);
  const AdamWScalars s = adamwScalars({}, 10);
  for (auto _ : state)
    adamwUpdate(static_cast<float*>(w.data()), static_cast<float*>(g.data()),
                static_cast<float*>(m.data()), static_cast<float*>(v.data()), n, s);
  state.SetItemsProcessed(state.iterations() * n);
}

void registerAll() {
  const std::pair<ir::DType, const char*> types[] = {{ir::DType::kF32, "f32"},
                                                     {ir::DType::kBF16, "bf16"}};
  const std::pair<Pass, const char*> passes[] = {
      {Pass::kForward, "fwd"}, {Pass::kGradA, "dA"}, {Pass::kGradB, "dB"}};
  for (const auto& [type, tname] : types) {
    for (const Layer& layer : kLayers)
      for (const auto& [pass, pname] : passes)
        benchmark::RegisterBenchmark(
            absl::StrCat("Matmul/", layer.name, "/", pname, "/", tname).c_str(), BM_Matmul, layer,
            pass, type);
    for (bool bwd : {false, true}) {
      const char* p = bwd ? "bwd" : "fwd";
      benchmark::RegisterBenchmark(absl::StrCat("LayerNorm/", p, "/", tname).c_str(), BM_LayerNorm,
                                   bwd, type);
      benchmark::RegisterBenchmark(absl::StrCat("Softmax/", p, "/", tname).c_str(), BM_Softmax, bwd,
                                   type);
      benchmark::RegisterBenchmark(absl::StrCat("Gelu/", p, "/", tname).c_str(), BM_Gelu, bwd,
                                   type);
    }
  }
  benchmark::RegisterBenchmark("Dropout/fwd/f32", BM_Dropout);
  benchmark::RegisterBenchmark("AdamW/f32", BM_AdamW)->Arg(208000);
}

}  // namespace
}  // namespace tandem::backend::cpu

int main(int argc, char** argv) {
  tandem::backend::cpu::registerAll();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
