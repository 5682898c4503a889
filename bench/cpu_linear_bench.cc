// Which oneDNN primitive the CPU linear kernels should use: inner product or matmul, for
// the forward pass and both backward passes, on the fully connected shapes of LeNet and
// of the ResNet head. Single thread, as the runtime runs each device's kernels.
//
//   build/bench/cpu_linear_bench --benchmark_counters_tabular=true
//   ONEDNN_VERBOSE=1 build/bench/cpu_linear_bench --benchmark_filter=Ip   # implementations
//
// Arguments are {N, I, O}: x[N,I], w[O,I], y[N,O].

#include <omp.h>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "benchmark/benchmark.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Args = std::unordered_map<int, memory>;

struct Fixture {
  int64_t n, i, o;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::vector<float> x, w, b, y, dx, dw, db;

  explicit Fixture(const benchmark::State& state)
      : n(state.range(0)), i(state.range(1)), o(state.range(2)) {
    omp_set_num_threads(1);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> d(-1, 1);
    auto fill = [&](std::vector<float>& v, int64_t size) {
      v.resize(static_cast<size_t>(size));
      for (float& e : v) e = d(rng);
    };
    fill(x, n * i), fill(w, o * i), fill(b, o), fill(y, n * o);
    fill(dx, n * i), fill(dw, o * i), fill(db, o);
  }
  memory::desc md(memory::dims dims, Tag tag) const { return {dims, memory::data_type::f32, tag}; }
  memory mem(const memory::desc& d, std::vector<float>& v) { return {d, engine, v.data()}; }
  void loop(benchmark::State& state, dnnl::primitive& p, const Args& args, double flops) {
    for (auto _ : state) {
      p.execute(stream, args);
      stream.wait();
    }
    state.counters["GFLOP/s"] = benchmark::Counter(
        flops * static_cast<double>(state.iterations()) * 1e-9, benchmark::Counter::kIsRate);
  }
  double gemmFlops() const { return 2.0 * static_cast<double>(n * i * o); }
};

void IpForward(benchmark::State& state) {
  Fixture f(state);
  auto x = f.md({f.n, f.i}, Tag::ab), w = f.md({f.o, f.i}, Tag::ab), b = f.md({f.o}, Tag::a),
       y = f.md({f.n, f.o}, Tag::ab);
  dnnl::inner_product_forward::primitive_desc pd({dnnl::prop_kind::forward_training, x, w, b, y},
                                                 f.engine);
  dnnl::inner_product_forward p(pd);
  f.loop(state, p,
         {{DNNL_ARG_SRC, f.mem(x, f.x)},
          {DNNL_ARG_WEIGHTS, f.mem(w, f.w)},
          {DNNL_ARG_BIAS, f.mem(b, f.b)},
          {DNNL_ARG_DST, f.mem(y, f.y)}},
         f.gemmFlops());
}

void MmForward(benchmark::State& state) {
  Fixture f(state);
  // w[O,I] read as w^T[I,O] through its strides.
  auto x = f.md({f.n, f.i}, Tag::ab), wt = f.md({f.i, f.o}, Tag::ba), b = f.md({1, f.o}, Tag::ab),
       y = f.md({f.n, f.o}, Tag::ab);
  dnnl::matmul::primitive_desc pd({x, wt, b, y}, f.engine);
  dnnl::matmul p(pd);
  f.loop(state, p,
         {{DNNL_ARG_SRC, f.mem(x, f.x)},
          {DNNL_ARG_WEIGHTS, f.mem(wt, f.w)},
          {DNNL_ARG_BIAS, f.mem(b, f.b)},
          {DNNL_ARG_DST, f.mem(y, f.y)}},
         f.gemmFlops());
}

void IpBackwardData(benchmark::State& state) {
  Fixture f(state);
  auto x = f.md({f.n, f.i}, Tag::ab), w = f.md({f.o, f.i}, Tag::ab), y = f.md({f.n, f.o}, Tag::ab);
  dnnl::inner_product_forward::primitive_desc hint({dnnl::prop_kind::forward_training, x, w, y},
                                                   f.engine);
  dnnl::inner_product_backward_data::primitive_desc pd({x, w, y}, f.engine, hint);
  dnnl::inner_product_backward_data p(pd);
  f.loop(state, p,
         {{DNNL_ARG_DIFF_DST, f.mem(y, f.y)},
          {DNNL_ARG_WEIGHTS, f.mem(w, f.w)},
          {DNNL_ARG_DIFF_SRC, f.mem(x, f.dx)}},
         f.gemmFlops());
}

void MmBackwardData(benchmark::State& state) {
  Fixture f(state);
  auto dy = f.md({f.n, f.o}, Tag::ab), w = f.md({f.o, f.i}, Tag::ab),
       dx = f.md({f.n, f.i}, Tag::ab);
  dnnl::matmul::primitive_desc pd({dy, w, dx}, f.engine);
  dnnl::matmul p(pd);
  f.loop(state, p,
         {{DNNL_ARG_SRC, f.mem(dy, f.y)},
          {DNNL_ARG_WEIGHTS, f.mem(w, f.w)},
          {DNNL_ARG_DST, f.mem(dx, f.dx)}},
         f.gemmFlops());
}

void IpBackwardWeights(benchmark::State& state) {
  Fixture f(state);
  auto x = f.md({f.n, f.i}, Tag::ab), w = f.md({f.o, f.i}, Tag::ab), b = f.md({f.o}, Tag::a),
       y = f.md({f.n, f.o}, Tag::ab);
  dnnl::inner_product_forward::primitive_desc hint({dnnl::prop_kind::forward_training, x, w, b, y},
                                                   f.engine);
  dnnl::inner_product_backward_weights::primitive_desc pd({x, w, b, y}, f.engine, hint);
  dnnl::inner_product_backward_weights p(pd);
  f.loop(state, p,
         {{DNNL_ARG_SRC, f.mem(x, f.x)},
          {DNNL_ARG_DIFF_DST, f.mem(y, f.y)},
          {DNNL_ARG_DIFF_WEIGHTS, f.mem(w, f.dw)},
          {DNNL_ARG_DIFF_BIAS, f.mem(b, f.db)}},
         f.gemmFlops());
}

// matmul has no bias gradient: the column sums of dy are a plain loop after it.
void MmBackwardWeights(benchmark::State& state) {
  Fixture f(state);
  auto dyt = f.md({f.o, f.n}, Tag::ba), x = f.md({f.n, f.i}, Tag::ab),
       dw = f.md({f.o, f.i}, Tag::ab);
  dnnl::matmul::primitive_desc pd({dyt, x, dw}, f.engine);
  dnnl::matmul p(pd);
  Args args{{DNNL_ARG_SRC, f.mem(dyt, f.y)},
            {DNNL_ARG_WEIGHTS, f.mem(x, f.x)},
            {DNNL_ARG_DST, f.mem(dw, f.dw)}};
  for (auto _ : state) {
    p.execute(f.stream, args);
    f.stream.wait();
    for (int64_t c = 0; c < f.o; ++c) f.db[static_cast<size_t>(c)] = 0;
    for (int64_t r = 0; r < f.n; ++r)
      for (int64_t c = 0; c < f.o; ++c)
        f.db[static_cast<size_t>(c)] += f.y[static_cast<size_t>(r * f.o + c)];
    benchmark::DoNotOptimize(f.db.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      f.gemmFlops() * static_cast<double>(state.iterations()) * 1e-9, benchmark::Counter::kIsRate);
}

// {N, I, O}: LeNet's two hidden layers, then the ResNet-18 head over per-device batches.
void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N", "I", "O"});
  b->Args({128, 800, 128});
  b->Args({128, 128, 10});
  for (int64_t n : {64, 128, 256}) b->Args({n, 512, 10});
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(IpForward)->Apply(shapes);
BENCHMARK(MmForward)->Apply(shapes);
BENCHMARK(IpBackwardData)->Apply(shapes);
BENCHMARK(MmBackwardData)->Apply(shapes);
BENCHMARK(IpBackwardWeights)->Apply(shapes);
BENCHMARK(MmBackwardWeights)->Apply(shapes);

}  // namespace

BENCHMARK_MAIN();
