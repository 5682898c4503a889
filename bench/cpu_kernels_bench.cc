// The convolution, pooling and batch-norm CPU kernels on the shapes of LeNet (N=128)
// and ResNet-18 on 28x28 inputs (N=32 and 64), single thread as the runtime runs them.
// Every convolution pass runs with each strategy (Plain: the NCHW/OIHW tensors handed to
// oneDNN as they are; Blocked: format_tag::any with reorders inside the kernel;
// Winograd: the same with algorithm::convolution_winograd, skipped where oneDNN has none;
// Gemm: im2col + oneDNN matmul over chunks of images, gemm_conv.h; Taps: few input
// channels tap by tap, tap_conv.h, the direct rule where it does not apply) and with the kernel
// table's rule (Auto); the label names the oneDNN implementations that ran (reorders
// included; none for Gemm).
//
//   build/bench/cpu_kernels_bench --benchmark_filter=N:128
//   build/bench/cpu_kernels_bench --benchmark_filter='Conv.*/s:1/p:[01]' --benchmark_repetitions=4
//   ONEDNN_VERBOSE=1 build/bench/cpu_kernels_bench --benchmark_filter=Conv.*kAuto
//
// Convolution arguments are {N, C, H, O, K, stride, pad, groups} (square images and
// filters). Depthwise.* are MobileNet v2's depthwise 3x3 convolutions (groups = C = O) at
// 224x224 and 8 images a device, which bench/depthwise_vs_pytorch.sh compares with PyTorch.

#include <omp.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/bf16.h"
#include "backend/cpu/avx512_rows.h"
#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/im2col.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/tap_conv.h"
#include "benchmark/benchmark.h"
#include "ir/ir.h"

namespace tandem::backend::cpu {
namespace {

using Attrs = std::vector<std::pair<std::string, ir::AttrValue>>;
using Factory = KernelOr (*)(const KernelInit&, ConvStrategy);

ir::TensorType f32(ir::Shape s) { return {ir::DType::kF32, std::move(s)}; }

/// One node over graph inputs (running statistics from param nodes, as batch_norm in
/// training mode requires), its kernel and 64-byte aligned host buffers.
class Harness {
 public:
  Harness(ir::Op op, const std::vector<ir::TensorType>& operands, Attrs attrs,
          size_t param_operands = 0)
      : module_("bench"),
        ctx_(ir::Device{}, 1) {  // cpu:0
    omp_set_num_threads(1);
  ir::Graph* g = *module_.addGraph("g");
  ir::NodeSpec spec{.op = op, .attrs = std::move(attrs), .device = ctx_.device()};
  for (size_t i = 0; i < operands.size(); ++i) {
    ir::NodeSpec in{.device = ctx_.device()};
    if (i + param_operands >= operands.size()) {
      std::string var = absl::StrCat("v", i);
      (void)module_.addVar({var, operands[i], ir::VarRole::kBuffer, {}});
      in.op = ir::Op::kParam;
      in.attrs = {{"var", ir::Symbol{var}}};
    } else {
      in.op = ir::Op::kInput;
      in.declared_types = {operands[i]};
    }
    spec.operands.push_back((*g->create(std::move(in)))->result());
    }
    auto n = g->create(std::move(spec));
    if (!n.ok()) {
      std::fprintf(stderr, "%s\n", n.status().ToString().c_str());
      std::abort();
    }
    node_ = *n;
    std::mt19937 rng(1);
    for (const ir::TensorType& t : operands) in_.push_back(buffer(t, rng));
    for (size_t i = 0; i < node_->numResults(); ++i)
      out_.push_back(buffer(node_->result(i)->type(), rng));
  }

  /// Makes the kernel (the table's when `factory` is null, else with `strategy`) and
  /// times its runs.
  void time(benchmark::State& state, Factory factory, ConvStrategy strategy, double flops) {
    KernelOr k =
        factory == nullptr ? makeKernel(*node_, ctx_) : factory(KernelInit{*node_, ctx_}, strategy);
    if (!k.ok()) {
      state.SkipWithError(k.status().ToString().c_str());
      return;
    }
    std::vector<TensorView> in, out;
    for (size_t i = 0; i < in_.size(); ++i) in.push_back({in_[i].get(), node_->operand(i)->type()});
    for (size_t i = 0; i < out_.size(); ++i)
      out.push_back({out_[i].get(), node_->result(i)->type()});
    auto* program = dynamic_cast<ProgramKernel*>(k->get());
    if (strategy == ConvStrategy::kWinograd &&
        (program == nullptr ||
         program->program().implementations().find("wino") == std::string::npos)) {
      state.SkipWithError("no Winograd implementation for this shape");  // it fell back
      return;
    }
    if (!(*k)->runHere(in, out).ok()) {  // warm-up: first-touch of the arena and buffers
      state.SkipWithError("kernel failed");
      return;
    }
    for (auto _ : state) benchmark::DoNotOptimize((*k)->runHere(in, out));
    if (program != nullptr) state.SetLabel(program->program().implementations());
    if (flops > 0)
      state.counters["GFLOP/s"] = benchmark::Counter(
          flops * static_cast<double>(state.iterations()) * 1e-9, benchmark::Counter::kIsRate);
  }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  using Buf = std::unique_ptr<float, Free>;
  /// Values in [0.5, 1.5) (positive: valid variances) of t's dtype (f32, bf16 or f64:
  /// batch norm's statistics; an f64 "count" of about 1 makes a valid mean and variance).
  static Buf buffer(const ir::TensorType& t, std::mt19937& rng) {
    size_t n = static_cast<size_t>(t.numElements());
    size_t bytes = static_cast<size_t>(t.bytes());
    Buf b(static_cast<float*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
    std::uniform_real_distribution<float> d(0.5f, 1.5f);
    for (size_t i = 0; i < n; ++i) {
      if (t.dtype == ir::DType::kBF16)
        reinterpret_cast<bf16*>(b.get())[i] = d(rng);
      else if (t.dtype == ir::DType::kF64)
        reinterpret_cast<double*>(b.get())[i] = d(rng);
      else
        b.get()[i] = d(rng);
    }
    return b;
  }

  ir::Module module_;
  CpuContext ctx_;
  ir::Node* node_ = nullptr;
  std::vector<Buf> in_, out_;
};

struct Conv {
  int64_t n, c, h, o, k, stride, pad, groups;
  explicit Conv(const benchmark::State& s)
      : n(s.range(0)),
        c(s.range(1)),
        h(s.range(2)),
        o(s.range(3)),
        k(s.range(4)),
        stride(s.range(5)),
        pad(s.range(6)),
        groups(s.range(7)) {}
  int64_t oh() const { return (h + 2 * pad - k) / stride + 1; }
  ir::TensorType x() const { return f32({n, c, h, h}); }
  ir::TensorType w() const { return f32({o, c / groups, k, k}); }
  ir::TensorType y() const { return f32({n, o, oh(), oh()}); }
  double flops() const { return 2.0 * double(n * o * oh() * oh() * (c / groups) * k * k); }
  Attrs attrs() const { return {{"stride", stride}, {"pad", pad}, {"groups", groups}}; }
};

template <ConvStrategy kStrategy>
void ConvForward(benchmark::State& state) {
  Conv c(state);
  Harness h(ir::Op::kConv2d, {c.x(), c.w(), f32({c.o})}, c.attrs());
  h.time(state, kStrategy == ConvStrategy::kAuto ? nullptr : makeConv2dKernelWithStrategy,
         kStrategy, c.flops());
}

template <ConvStrategy kStrategy>
void ConvBackwardData(benchmark::State& state) {
  Conv c(state);
  Harness h(ir::Op::kConv2dBackwardData, {c.y(), c.w(), c.x()}, c.attrs());
  h.time(state,
         kStrategy == ConvStrategy::kAuto ? nullptr : makeConv2dBackwardDataKernelWithStrategy,
         kStrategy, c.flops());
}

template <ConvStrategy kStrategy>
void ConvBackwardFilter(benchmark::State& state) {
  Conv c(state);
  Attrs attrs = c.attrs();
  attrs.emplace_back("bias", true);
  Harness h(ir::Op::kConv2dBackwardFilter, {c.y(), c.x(), c.w()}, attrs);
  h.time(state,
         kStrategy == ConvStrategy::kAuto ? nullptr : makeConv2dBackwardFilterKernelWithStrategy,
         kStrategy, c.flops());
}

void convShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N", "C", "H", "O", "K", "s", "p", "g"});
  b->Args({128, 1, 28, 20, 3, 1, 0, 1});    // LeNet conv1
  b->Args({32, 1, 28, 64, 3, 1, 1, 1});     // ResNet-18 stem (one input channel)
  b->Args({128, 20, 13, 50, 5, 1, 0, 1});   // LeNet conv2
  b->Args({32, 64, 28, 64, 3, 1, 1, 1});    // ResNet-18 stage 1
  b->Args({32, 64, 28, 128, 3, 2, 1, 1});   // stage 2, first conv (downsampling)
  b->Args({32, 64, 28, 128, 1, 2, 0, 1});   // stage 2 shortcut
  b->Args({32, 128, 14, 128, 3, 1, 1, 1});  // stage 2
  b->Args({32, 128, 14, 256, 3, 2, 1, 1});  // stage 3, first conv
  b->Args({32, 256, 7, 256, 3, 1, 1, 1});   // stage 3
  b->Args({32, 256, 7, 512, 3, 2, 1, 1});   // stage 4, first conv
  b->Args({32, 512, 4, 512, 3, 1, 1, 1});   // stage 4
  // ResNet-18's stride-1 3x3 convolutions at 64 per device (Winograd's candidates).
  b->Args({64, 1, 28, 64, 3, 1, 1, 1});
  b->Args({64, 64, 28, 64, 3, 1, 1, 1});
  b->Args({64, 128, 14, 128, 3, 1, 1, 1});
  b->Args({64, 256, 7, 256, 3, 1, 1, 1});
  b->Args({64, 512, 4, 512, 3, 1, 1, 1});
  b->Unit(benchmark::kMillisecond);
}

/// MobileNet v2's depthwise 3x3 convolutions at 224x224 (pad 1), 8 images a device:
/// {C, input H, stride} of its 17 blocks' distinct shapes.
void depthwiseShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N", "C", "H", "O", "K", "s", "p", "g"});
  for (auto [c, h, s] : {std::array<int64_t, 3>{32, 112, 1},
                         {96, 112, 2},
                         {144, 56, 1},
                         {144, 56, 2},
                         {192, 28, 1},
                         {192, 28, 2},
                         {384, 14, 1},
                         {576, 14, 1},
                         {576, 14, 2},
                         {960, 7, 1}})
    b->Args({8, c, h, c, 3, s, 1, c});
  b->Unit(benchmark::kMillisecond);
}

#define CONV_BENCH(Pass, Strategy) \
  BENCHMARK_TEMPLATE(Pass, ConvStrategy::Strategy)->Apply(convShapes);
CONV_BENCH(ConvForward, kPlain)
CONV_BENCH(ConvForward, kBlocked)
CONV_BENCH(ConvForward, kWinograd)
CONV_BENCH(ConvForward, kGemm)
CONV_BENCH(ConvForward, kTaps)
CONV_BENCH(ConvForward, kAuto)
CONV_BENCH(ConvBackwardData, kPlain)
CONV_BENCH(ConvBackwardData, kBlocked)
CONV_BENCH(ConvBackwardData, kWinograd)
CONV_BENCH(ConvBackwardData, kGemm)
CONV_BENCH(ConvBackwardData, kAuto)
CONV_BENCH(ConvBackwardFilter, kPlain)
CONV_BENCH(ConvBackwardFilter, kBlocked)
CONV_BENCH(ConvBackwardFilter, kWinograd)
CONV_BENCH(ConvBackwardFilter, kGemm)
CONV_BENCH(ConvBackwardFilter, kTaps)
CONV_BENCH(ConvBackwardFilter, kAuto)

#define DEPTHWISE_BENCH(Pass, Strategy)                  \
  BENCHMARK_TEMPLATE(Conv##Pass, ConvStrategy::Strategy) \
      ->Name("Depthwise" #Pass "<" #Strategy ">")        \
      ->Apply(depthwiseShapes);
DEPTHWISE_BENCH(Forward, kPlain)
DEPTHWISE_BENCH(Forward, kAuto)
DEPTHWISE_BENCH(BackwardData, kPlain)
DEPTHWISE_BENCH(BackwardData, kAuto)
DEPTHWISE_BENCH(BackwardFilter, kPlain)
DEPTHWISE_BENCH(BackwardFilter, kAuto)

/// kGemm's copies alone, a chunk of images side by side as gemm_conv.cc lays them out:
/// Arguments {images, C, H, K, backward (col2im), loops (the portable loops, not the
/// vector lines)}; stride 1, no padding.
void Im2col(benchmark::State& state) {
  const int64_t n = state.range(0), c = state.range(1), h = state.range(2), k = state.range(3);
  const ConvWindow g{.c = c,
                     .h = h,
                     .w = h,
                     .kh = k,
                     .kw = k,
                     .oh = h - k + 1,
                     .ow = h - k + 1,
                     .stride_h = 1,
                     .stride_w = 1,
                     .pad_h = 0,
                     .pad_w = 0};
  const bool backward = state.range(4) != 0, loops = state.range(5) != 0;
  std::vector<float> x(static_cast<size_t>(n * c * h * h), 1.0f);
  std::vector<float> cols(static_cast<size_t>(n * g.rows() * g.pixels()), 1.0f);
  const int64_t row_stride = n * g.pixels();
  for (auto _ : state) {
    for (int64_t i = 0; i < n; ++i) {
      float* image = x.data() + i * c * h * h;
      float* columns = cols.data() + i * g.pixels();
      if (backward) {
        (loops ? col2imAddLoops : col2imAdd)(g, columns, row_stride, image);
      } else {
        (loops ? im2colLoops : im2col)(g, image, columns, row_stride);
      }
    }
    benchmark::DoNotOptimize(cols.data());
    benchmark::DoNotOptimize(x.data());
  }
  state.SetBytesProcessed(state.iterations() * int64_t(cols.size() * sizeof(float)));
}
BENCHMARK(Im2col)
    ->ArgNames({"N", "C", "H", "K", "bwd", "loops"})
    ->ArgsProduct({{1, 2, 6}, {20}, {13}, {5}, {0, 1}, {0, 1}})  // LeNet conv2, a chunk
    ->ArgsProduct({{40}, {1}, {28}, {3}, {0, 1}, {0, 1}})        // LeNet conv1
    ->Unit(benchmark::kMicrosecond);

/// tap_conv.h's backward filter alone, one thread: {N, C, H, O, K, pad}, stride 1.
void TapFilter(benchmark::State& state) {
  omp_set_num_threads(1);
  const int64_t n = state.range(0), c = state.range(1), h = state.range(2), o = state.range(3),
                k = state.range(4), p = state.range(5), oh = h + 2 * p - k + 1;
  const ConvWindow g{.c = c,
                     .h = h,
                     .w = h,
                     .kh = k,
                     .kw = k,
                     .oh = oh,
                     .ow = oh,
                     .stride_h = 1,
                     .stride_w = 1,
                     .pad_h = p,
                     .pad_w = p};
  if (!avx512Runs()) {
    state.SkipWithError("tap_conv.h runs on AVX-512 hosts only");
    return;
  }
  std::vector<float> x(static_cast<size_t>(n * c * h * h), 0.5f);
  std::vector<float> dy(static_cast<size_t>(n * o * oh * oh), 0.25f);
  std::vector<float> dw(static_cast<size_t>(o * g.rows())), db(static_cast<size_t>(o));
  for (auto _ : state) {
    tapFilterGradient(g, n, o, x.data(), dy.data(), dw.data(), db.data());
    benchmark::DoNotOptimize(dw.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(n * o * oh * oh * g.rows()),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(TapFilter)
    ->ArgNames({"N", "C", "H", "O", "K", "p"})
    ->Args({128, 1, 28, 20, 3, 0})  // LeNet conv1
    ->Args({32, 1, 28, 64, 3, 1})   // ResNet-18's stem
    ->Args({64, 1, 28, 64, 3, 1})
    ->Unit(benchmark::kMillisecond);

/// fuse-conv-relu-pool's pair, one thread: conv2d_relu_avg_pool (bwd 0) and its filter
/// gradient (bwd 1), against which the unfused ops' sum is ConvForward<kTaps> + Pool/AvgRelu
/// (bwd 0) and Pool/AvgRelu + ConvBackwardFilter<kTaps> (bwd 1). {N, C, H, O, K, bwd}.
void ConvReluPool(benchmark::State& state) {
  const int64_t n = state.range(0), c = state.range(1), h = state.range(2), o = state.range(3),
                k = state.range(4), oh = h - k + 1;
  const ir::TensorType x = f32({n, c, h, h}), w = f32({o, c, k, k}), b = f32({o}),
                       pooled = f32({n, o, oh / 2, oh / 2});
  const Attrs attrs{{"stride", int64_t{1}}, {"pad", int64_t{0}}};
  const double flops = 2.0 * double(n * o * oh * oh * c * k * k);
  if (state.range(5) == 0) {
    Harness(ir::Op::kConv2dReluAvgPool, {x, w, b}, attrs)
        .time(state, nullptr, ConvStrategy::kAuto, flops);
  } else {  // the filter's products over the pooled gradient's shares
    Attrs filter_attrs = attrs;
    filter_attrs.emplace_back("bias", true);
    const ir::TensorType mask{ir::DType::kI32, {n, o, oh}};
    Harness(ir::Op::kConv2dReluAvgPoolBackwardFilter, {pooled, x, w, mask}, filter_attrs)
        .time(state, nullptr, ConvStrategy::kAuto, flops);
  }
}
BENCHMARK(ConvReluPool)
    ->ArgNames({"N", "C", "H", "O", "K", "bwd"})
    ->Args({128, 1, 28, 20, 3, 0})  // LeNet conv1 + pool1
    ->Args({128, 1, 28, 20, 3, 1})
    ->Unit(benchmark::kMillisecond);

/// Arguments {N, C, H, kernel, stride, pad, backward}.
/// `relu`: average pooling of relu(x) and its masked backward (fuse-relu-pool's).
void Pool(benchmark::State& state, ir::Op forward, ir::Op backward, bool relu = false) {
  int64_t n = state.range(0), c = state.range(1), hw = state.range(2), k = state.range(3),
          s = state.range(4), p = state.range(5);
  int64_t o = (hw + 2 * p - k) / s + 1;
  Attrs attrs{{"kernel", k}, {"stride", s}, {"pad", p}};
  if (relu) attrs.emplace_back("relu", true);
  ir::TensorType x = f32({n, c, hw, hw}), y = f32({n, c, o, o});
  if (state.range(6) == 0) {
    Harness(forward, {x}, attrs).time(state, nullptr, ConvStrategy::kAuto, 0);
  } else {
    Harness(backward, {y, x}, attrs).time(state, nullptr, ConvStrategy::kAuto, 0);
  }
}

void poolShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N", "C", "H", "k", "s", "p", "bwd"});
  for (int64_t bwd : {0, 1}) {
    b->Args({128, 20, 26, 2, 2, 0, bwd});  // LeNet pool1
    b->Args({128, 50, 9, 2, 2, 0, bwd});   // LeNet pool2
    b->Args({32, 64, 28, 3, 2, 1, bwd});
  }
  b->Unit(benchmark::kMillisecond);
}
BENCHMARK_CAPTURE(Pool, Avg, ir::Op::kAvgPool2d, ir::Op::kAvgPool2dBackward)->Apply(poolShapes);
BENCHMARK_CAPTURE(Pool, AvgRelu, ir::Op::kAvgPool2d, ir::Op::kAvgPool2dBackward, true)
    ->Apply(poolShapes);
BENCHMARK_CAPTURE(Pool, Max, ir::Op::kMaxPool2d, ir::Op::kMaxPool2dBackward)->Apply(poolShapes);

void GlobalAvgPool(benchmark::State& state) {
  ir::TensorType x = f32({32, 512, 4, 4}), y = f32({32, 512, 1, 1});
  if (state.range(0) == 0) {
    Harness(ir::Op::kGlobalAvgPool, {x}, {}).time(state, nullptr, ConvStrategy::kAuto, 0);
  } else {
    Harness(ir::Op::kGlobalAvgPoolBackward, {y, x}, {})
        .time(state, nullptr, ConvStrategy::kAuto, 0);
  }
}
BENCHMARK(GlobalAvgPool)->ArgName("bwd")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

/// Arguments {N, C, H, pass}: pass 0 training forward, 1 inference, 2 backward.
void BatchNorm(benchmark::State& state) {
  int64_t n = state.range(0), c = state.range(1), hw = state.range(2);
  ir::TensorType x = f32({n, c, hw, hw}), ch = f32({c});
  switch (state.range(3)) {
    case 0:
      Harness(ir::Op::kBatchNorm, {x, ch, ch, ch, ch},
              {{"training", true}, {"momentum", 0.1}, {"eps", 1e-5}}, /*param_operands=*/2)
          .time(state, nullptr, ConvStrategy::kAuto, 0);
      break;
    case 1:
      Harness(ir::Op::kBatchNorm, {x, ch, ch, ch, ch},
              {{"training", false}, {"momentum", 0.1}, {"eps", 1e-5}})
          .time(state, nullptr, ConvStrategy::kAuto, 0);
      break;
    default:
      Harness(ir::Op::kBatchNormBackward, {x, x, ch, ch, ch}, {{"eps", 1e-5}})
          .time(state, nullptr, ConvStrategy::kAuto, 0);
  }
}
BENCHMARK(BatchNorm)
    ->ArgNames({"N", "C", "H", "pass"})
    ->ArgsProduct({{32}, {64}, {28}, {0, 1, 2}})
    ->ArgsProduct({{32}, {512}, {4}, {0, 2}})
    ->Unit(benchmark::kMillisecond);

/// relu and relu_backward over ResNet-18's stage-1 activations (memory bound), f32 and
/// bf16. Arguments {backward, bf16}.
void Relu(benchmark::State& state) {
  const ir::TensorType x{state.range(1) != 0 ? ir::DType::kBF16 : ir::DType::kF32,
                         {32, 64, 28, 28}};
  if (state.range(0) == 0)
    Harness(ir::Op::kRelu, {x}, {}).time(state, nullptr, ConvStrategy::kAuto, 0);
  else
    Harness(ir::Op::kReluBackward, {x, x}, {}).time(state, nullptr, ConvStrategy::kAuto, 0);
}
BENCHMARK(Relu)
    ->ArgNames({"bwd", "bf16"})
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

/// fuse-conv-bn-relu's batch norm + relu after ResNet-18's stage-1 convolutions (plain
/// NCHW): pass 0 batch_norm_apply (relu), 1 batch_norm_backward_reduce and 2
/// batch_norm_backward_apply (both with relu's mask from the output).
void FusedBnRelu(benchmark::State& state) {
  const int64_t n = 32, c = 64, hw = 28;
  const ir::TensorType x = f32({n, c, hw, hw}), ch = f32({c});
  const ir::TensorType stats{ir::DType::kF64, {3, c}}, sums{ir::DType::kF64, {2, c}};
  switch (state.range(0)) {
    case 0:
      Harness(ir::Op::kBatchNormApply, {x, stats, ch, ch, ch, ch},
              {{"momentum", 0.1}, {"eps", 1e-5}, {"relu", true}}, /*param_operands=*/2)
          .time(state, nullptr, ConvStrategy::kAuto, 0);
      break;
    case 1:
      Harness(ir::Op::kBatchNormBackwardReduce, {x, x, ch, ch, x}, {})
          .time(state, nullptr, ConvStrategy::kAuto, 0);
      break;
    default:
      Harness(ir::Op::kBatchNormBackwardApply, {x, x, ch, ch, ch, sums, stats, x},
              {{"residual", false}})
          .time(state, nullptr, ConvStrategy::kAuto, 0);
  }
}
BENCHMARK(FusedBnRelu)->ArgName("pass")->DenseRange(0, 2)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tandem::backend::cpu

BENCHMARK_MAIN();
