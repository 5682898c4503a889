// The CUDA kernels that take NHWC activations (backend/cuda/layout_plan.h). Without a GPU:
// each own kernel's host-compiled math, driven in the kernel's loop order over an NHWC
// copy of random input, gives the NCHW result transposed, bit for bit: every NHWC path
// adds the same numbers in the same order (batch norm's per-channel sums, the bias
// gradient, pooling windows, the global pool's planes), so no tolerance is needed. The
// NCHW math itself is checked against the CPU backend in the other files of this folder.
// Also the plan on small graphs, and the check that refuses a layout a kernel cannot
// take. With a GPU: the NHWC kernels against the CPU backend and against NCHW on the GPU.

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cpu/cpu_info.h"
#include "backend/cuda/conv_math.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/elementwise_math.h"
#include "backend/cuda/layout_plan.h"
#include "backend/cuda/norm_math.h"
#include "backend/cuda/pool_params.h"
#include "backend/cuda/target_info.h"
#include "gtest/gtest.h"
#include "passes/assign_layouts.h"
#include "tests/backend/kernel_test_util.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/device_kinds.h"

namespace tandem::testing {
namespace {

namespace cu = backend::cuda;
using ir::Op;

/// Activations as the CUDA math reads them: float, or bf16 bits (uint16_t).
template <typename T>
std::vector<T> randomAct(int64_t n, std::mt19937& rng, float lo = -2, float hi = 3) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<T> v(static_cast<size_t>(n));
  for (T& e : v) cu::store(&e, 0, d(rng));
  return v;
}

/// An [n, c, hw] tensor stored [n, hw, c], by the definition (not by nhwcIndexOf).
template <typename T>
std::vector<T> toNhwc(const std::vector<T>& x, int64_t n, int64_t c, int64_t hw) {
  std::vector<T> y(x.size());
  for (int64_t img = 0; img < n; ++img)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p)
        y[static_cast<size_t>((img * hw + p) * c + ch)] =
            x[static_cast<size_t>((img * c + ch) * hw + p)];
  return y;
}

template <typename T>
bool sameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

struct Shape4 {
  int64_t n, c, h, w;
  int64_t hw() const { return h * w; }
  int64_t size() const { return n * c * h * w; }
};
const Shape4 kShapes[] = {{2, 16, 7, 7}, {4, 8, 5, 5}, {3, 24, 1, 1}, {2, 4, 17, 19}};

TEST(CudaNhwcMath, IndexOfIsTheChannelsLastPlace) {
  for (const Shape4& s : kShapes) {
    std::vector<int64_t> nchw(static_cast<size_t>(s.size()));
    for (int64_t i = 0; i < s.size(); ++i) nchw[static_cast<size_t>(i)] = i;
    const std::vector<int64_t> nhwc = toNhwc(nchw, s.n, s.c, s.hw());
    for (int64_t o = 0; o < s.size(); ++o)  // nhwc[o] is the NCHW index stored at o
      ASSERT_EQ(cu::nhwcIndexOf(nhwc[static_cast<size_t>(o)], s.c, s.hw()), o);
  }
}

// --- batch norm: NHWC is [N*H*W, C, 1] (norm_launch.h) -------------------------------

/// What one block of norm.cu's per-channel reductions sums for channel ch of [n, c, hw]:
/// thread t adds term(at) in double along its ChannelWalk, then the block's fixed tree.
template <typename F>
double channelSum(int64_t n, int64_t c, int64_t hw, int64_t ch, F term) {
  std::vector<double> part(cu::kNormReduceThreads, 0.0);
  const int64_t m = n * hw;
  for (int64_t t = 0; t < cu::kNormReduceThreads && t < m; ++t) {
    cu::ChannelWalk w(t, ch, c, hw, cu::kNormReduceThreads);
    for (int64_t k = t; k < m; k += cu::kNormReduceThreads, w.next()) part[t] += term(w.at);
  }
  for (int s = cu::kNormReduceThreads / 2; s > 0; s >>= 1)
    for (int t = 0; t < s; ++t) part[t] += part[t + s];
  return part[0];
}

/// The per-channel sums of the family (statistics, backward sums) and one elementwise pass
/// (normalize with residual and relu, then the backward apply) over `x`, `dy` laid out as
/// [n, c, hw]; the elementwise results in the same layout.
template <typename T>
struct NormOutputs {
  std::vector<double> sums;
  std::vector<T> out, dx;
};
template <typename T>
NormOutputs<T> normPasses(const std::vector<T>& x, const std::vector<T>& dy,
                          const std::vector<T>& res, int64_t n, int64_t c, int64_t hw) {
  NormOutputs<T> r;
  std::vector<float> coef(3 * c), mean(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    const double sum =
        channelSum(n, c, hw, ch, [&](int64_t at) { return double(cu::load(x.data(), at)); });
    const float fmean = static_cast<float>(sum / double(n * hw));
    const double sq = channelSum(n, c, hw, ch, [&](int64_t at) {
      const float d = cu::load(x.data(), at) - fmean;
      return double(d * d);
    });
    const double dz =
        channelSum(n, c, hw, ch, [&](int64_t at) { return double(cu::load(dy.data(), at)); });
    const double dzyc = channelSum(n, c, hw, ch, [&](int64_t at) {
      return double(cu::load(dy.data(), at) * (cu::load(x.data(), at) - fmean));
    });
    r.sums.insert(r.sums.end(), {sum, sq, dz, dzyc});
    const cu::NormAffine a = cu::normAffine(
        sum / double(n * hw), cu::momentsVar(double(n * hw), sum, sq, fmean), 1.25f, -0.5f, 1e-5);
    const cu::NormBackward k = cu::normBackward(double(n * hw), dz, dzyc, 1.25f, float(a.invstd));
    coef[ch] = a.scale, coef[c + ch] = a.shift, mean[ch] = fmean;
    coef[2 * c + ch] = k.c;  // k.a, k.b recomputed below from the same inputs
  }
  r.out.resize(x.size());
  r.dx.resize(x.size());
  const int64_t total = n * c * hw, threads = 3 * 256;
  for (int64_t g = 0; g < threads && g < total; ++g) {
    cu::ChannelOf w(g, c, hw, threads);
    for (int64_t l = g; l < total; l += threads, w.next()) {
      cu::store(r.out.data(), l,
                cu::normalizeOne(cu::load(x.data(), l), coef[w.ch], coef[c + w.ch], true,
                                 cu::load(res.data(), l), true));
      const cu::NormBackward k{coef[w.ch], coef[c + w.ch], coef[2 * c + w.ch]};
      cu::store(r.dx.data(), l,
                cu::normBackwardOne(
                    k, cu::maskedGrad(cu::load(dy.data(), l), true, cu::load(r.out.data(), l)),
                    cu::load(x.data(), l), mean[w.ch]));
    }
  }
  return r;
}

template <typename T>
void normSameBitsInNhwc() {
  std::mt19937 rng(1);
  for (const Shape4& s : kShapes) {
    SCOPED_TRACE(::testing::PrintToString(std::vector<int64_t>{s.n, s.c, s.h, s.w}));
    const auto x = randomAct<T>(s.size(), rng), dy = randomAct<T>(s.size(), rng, -1, 1),
               res = randomAct<T>(s.size(), rng, -1, 1);
    const NormOutputs<T> nchw = normPasses(x, dy, res, s.n, s.c, s.hw());
    const NormOutputs<T> nhwc =
        normPasses(toNhwc(x, s.n, s.c, s.hw()), toNhwc(dy, s.n, s.c, s.hw()),
                   toNhwc(res, s.n, s.c, s.hw()), s.n * s.hw(), s.c, 1);
    EXPECT_TRUE(sameBits(nchw.sums, nhwc.sums));
    EXPECT_TRUE(sameBits(toNhwc(nchw.out, s.n, s.c, s.hw()), nhwc.out));
    EXPECT_TRUE(sameBits(toNhwc(nchw.dx, s.n, s.c, s.hw()), nhwc.dx));
  }
}
TEST(CudaNhwcMath, BatchNormGivesTheSameBits) { normSameBitsInNhwc<float>(); }
TEST(CudaNhwcMath, BatchNormGivesTheSameBitsBf16) { normSameBitsInNhwc<uint16_t>(); }

// --- the convolution's epilogue and bias gradient: NHWC as [N*H*W, C, 1] (conv_math.h) --

template <typename T, typename B>
void convOwnKernelsSameBitsInNhwc() {
  std::mt19937 rng(2);
  for (const Shape4& s : kShapes) {
    const auto y = randomAct<T>(s.size(), rng), res = randomAct<T>(s.size(), rng);
    const auto bias = randomAct<B>(s.c, rng);
    const auto yn = toNhwc(y, s.n, s.c, s.hw()), resn = toNhwc(res, s.n, s.c, s.hw());
    for (bool relu : {false, true})
      for (bool residual : {false, true}) {
        std::vector<T> a(y.size()), b(y.size());
        for (int64_t i = 0; i < s.size(); ++i) {
          cu::store(a.data(), i,
                    cu::convEpilogueAt(y.data(), bias.data(), residual ? res.data() : nullptr, relu,
                                       i, s.c, s.hw()));
          cu::store(b.data(), i,
                    cu::convEpilogueAt(yn.data(), bias.data(), residual ? resn.data() : nullptr,
                                       relu, i, s.c, 1));
        }
        EXPECT_TRUE(sameBits(toNhwc(a, s.n, s.c, s.hw()), b)) << relu << residual;
      }
    // conv.cu's bias gradient: partials per thread, then the block's tree.
    auto grad = [&](const std::vector<T>& dy, int64_t n, int64_t hw) {
      std::vector<float> db(static_cast<size_t>(s.c));
      for (int64_t c = 0; c < s.c; ++c) {
        std::vector<float> p(cu::kBiasGradThreads);
        for (int t = 0; t < cu::kBiasGradThreads; ++t)
          p[t] = cu::biasGradPartial(dy.data(), n, s.c, hw, c, t);
        for (int st = cu::kBiasGradThreads / 2; st > 0; st /= 2)
          for (int t = 0; t < st; ++t) p[t] = p[t] + p[t + st];
        db[static_cast<size_t>(c)] = p[0];
      }
      return db;
    };
    EXPECT_TRUE(sameBits(grad(y, s.n, s.hw()), grad(yn, s.n * s.hw(), 1)));
  }
}
TEST(CudaNhwcMath, ConvEpilogueAndBiasGradientGiveTheSameBits) {
  convOwnKernelsSameBitsInNhwc<float, float>();
  convOwnKernelsSameBitsInNhwc<uint16_t, float>();
  convOwnKernelsSameBitsInNhwc<uint16_t, uint16_t>();
}

// --- pooling: planes walked with a pixel step (pool_math.h) ----------------------------

/// pool.cu's loops: forward over the outputs, backward over dx, in memory order.
template <typename T>
std::vector<T> hostPool(Op op, const cu::PoolParams& p, const std::vector<T>& in0,
                        const std::vector<T>& in1) {
  const int64_t in_px = p.h * p.w, out_px = p.oh * p.ow;
  const bool backward = op == Op::kMaxPool2dBackward || op == Op::kAvgPool2dBackward;
  std::vector<T> out(static_cast<size_t>(p.planes * (backward ? in_px : out_px)));
  for (int64_t e = 0; e < static_cast<int64_t>(out.size()); ++e) {
    if (!backward) {
      const cu::PlanePixel at = cu::poolElement(p, e, out_px);
      const T* xp = in0.data() + cu::poolPlaneBase(p, at.plane, in_px);
      const int64_t i = at.pixel / p.ow, j = at.pixel % p.ow;
      cu::store(out.data(), e,
                op == Op::kMaxPool2d ? cu::maxPoolAt(xp, p, i, j) : cu::avgPoolAt(xp, p, i, j));
      continue;
    }
    const cu::PlanePixel at = cu::poolElement(p, e, in_px);
    const T* dyp = in0.data() + cu::poolPlaneBase(p, at.plane, out_px);
    const int64_t r = at.pixel / p.w, c = at.pixel % p.w;
    const T* xp = in1.data() + cu::poolPlaneBase(p, at.plane, in_px);
    cu::store(out.data(), e,
              op == Op::kMaxPool2dBackward ? cu::maxPoolBackwardAt(dyp, xp, p, r, c)
                                           : cu::avgPoolBackwardAt(dyp, xp, p, r, c));
  }
  return out;
}

template <typename T>
void poolsSameBitsInNhwc() {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> quarter(-8, 8);  // ties, so "first maximum" matters
  struct Case {
    int64_t n, c, h, w;
    ir::Hw k, stride, pad;
  };
  for (const Case& k : {Case{2, 16, 8, 8, 2, 2, 0}, Case{2, 8, 9, 11, 3, 2, 1},
                        Case{1, 4, 6, 6, 3, 1, 1}, Case{2, 8, 9, 7, {3, 2}, {2, 1}, {1, 0}}}) {
    const ir::Shape x_shape{k.n, k.c, k.h, k.w};
    const ir::Shape y_shape{k.n, k.c, (k.h + 2 * k.pad.h - k.k.h) / k.stride.h + 1,
                            (k.w + 2 * k.pad.w - k.k.w) / k.stride.w + 1};
    cu::PoolParams p = cu::poolParams(x_shape, y_shape, k.k, k.stride, k.pad);
    std::vector<T> x(static_cast<size_t>(k.n * k.c * k.h * k.w));
    for (size_t i = 0; i < x.size(); ++i)
      cu::store(x.data(), int64_t(i), 0.25f * float(quarter(rng)));
    const auto dy = randomAct<T>(k.n * k.c * p.oh * p.ow, rng);
    cu::PoolParams q = p;
    q.step = k.c;
    const auto xn = toNhwc(x, k.n, k.c, k.h * k.w), dyn = toNhwc(dy, k.n, k.c, p.oh * p.ow);
    for (Op op : {Op::kMaxPool2d, Op::kAvgPool2d}) {
      EXPECT_TRUE(
          sameBits(toNhwc(hostPool(op, p, x, x), k.n, k.c, p.oh * p.ow), hostPool(op, q, xn, xn)))
          << ir::opInfo(op).name << " " << k.k.h << "x" << k.k.w;
    }
    for (Op op : {Op::kMaxPool2dBackward, Op::kAvgPool2dBackward}) {
      EXPECT_TRUE(
          sameBits(toNhwc(hostPool(op, p, dy, x), k.n, k.c, k.h * k.w), hostPool(op, q, dyn, xn)))
          << ir::opInfo(op).name << " " << k.k.h << "x" << k.k.w;
    }
  }
}
TEST(CudaNhwcMath, PoolingGivesTheSameBits) { poolsSameBitsInNhwc<float>(); }
TEST(CudaNhwcMath, PoolingGivesTheSameBitsBf16) { poolsSameBitsInNhwc<uint16_t>(); }

TEST(CudaNhwcMath, GlobalPoolGivesTheSameBits) {
  std::mt19937 rng(4);
  for (const Shape4& s : kShapes) {
    const auto x = randomAct<float>(s.size(), rng), dy = randomAct<float>(s.n * s.c, rng);
    const auto xn = toNhwc(x, s.n, s.c, s.hw());
    const float scale = cu::globalPoolScale(s.hw());
    std::vector<float> y(static_cast<size_t>(s.n * s.c)), yn(y.size());
    for (int64_t p = 0; p < s.n * s.c; ++p) {
      y[static_cast<size_t>(p)] = cu::planeMean(x.data(), p, s.hw(), scale);
      yn[static_cast<size_t>(p)] = cu::planeMean(xn.data(), p, s.hw(), scale, s.c);
    }
    EXPECT_TRUE(sameBits(y, yn));  // [N,C,1,1]: the same bytes in both layouts
    std::vector<float> dx(x.size()), dxn(x.size());
    for (int64_t i = 0; i < s.size(); ++i) {
      dx[static_cast<size_t>(i)] = cu::globalPoolGrad(dy.data(), i, s.hw(), scale);
      dxn[static_cast<size_t>(i)] = cu::globalPoolGrad(dy.data(), i, s.hw(), scale, s.c);
    }
    EXPECT_TRUE(sameBits(toNhwc(dx, s.n, s.c, s.hw()), dxn));
  }
}

// --- the plan and its check -----------------------------------------------------------

struct SmallGraph {
  ir::Module m{"t"};
  ir::Graph* g = *m.addGraph("g");
  ir::Value* input(const char* name, ir::TensorType t) {
    return (*g->create({.op = Op::kInput, .names = {name}, .declared_types = {t}}))->result();
  }
  ir::Node* node(Op op, std::vector<ir::Value*> operands,
                 std::vector<std::pair<std::string, ir::AttrValue>> attrs = {}) {
    auto n = g->create({.op = op, .operands = std::move(operands), .attrs = std::move(attrs)});
    EXPECT_TRUE(n.ok()) << n.status();
    return *n;
  }
};

TEST(CudaNhwcPlan, KeepsBordersAndNchwOnlyKernelsPlain) {
  // image (3 channels) -> conv -> relu -> max pool -> conv -> add -> global pool -> flatten
  SmallGraph s;
  const std::vector<std::pair<std::string, ir::AttrValue>> conv = {{"stride", int64_t{1}},
                                                                   {"pad", int64_t{1}}};
  ir::Value* x = s.input("x", f32({2, 3, 8, 8}));
  ir::Value* w1 = s.input("w1", f32({16, 3, 3, 3}));
  ir::Value* w2 = s.input("w2", f32({16, 16, 3, 3}));
  ir::Value* y1 = s.node(Op::kConv2d, {x, w1}, conv)->result();
  ir::Value* r = s.node(Op::kRelu, {y1})->result();
  ir::Value* p = s.node(Op::kMaxPool2d, {r},
                        {{"kernel", int64_t{2}}, {"stride", int64_t{2}}, {"pad", int64_t{0}}})
                     ->result();
  ir::Value* y2 = s.node(Op::kConv2d, {p, w2}, conv)->result();
  ir::Value* sum = s.node(Op::kAdd, {y2, p})->result();
  ir::Value* gp = s.node(Op::kGlobalAvgPool, {sum})->result();
  ir::Value* f = s.node(Op::kFlatten, {gp})->result();
  s.g->setOutputs({f});
  const auto nhwc = passes::valuesKeptUnder(*s.g, cu::targetInfo());
  EXPECT_FALSE(nhwc.contains(x));  // graph input (and 3 channels)
  EXPECT_FALSE(nhwc.contains(w1));
  for (const ir::Value* v : {y1, r, p, y2, sum}) EXPECT_TRUE(nhwc.contains(v));
  EXPECT_FALSE(nhwc.contains(gp));  // global_avg_pool's output is plain
  EXPECT_FALSE(nhwc.contains(f));
  for (const auto& n : s.g->nodes())
    EXPECT_TRUE(cu::checkNhwcSlots(*n, nhwc).ok()) << n->describe();
}

TEST(CudaNhwcPlan, NarrowChannelsAndNchwReadersStayPlain) {
  SmallGraph s;
  const std::vector<std::pair<std::string, ir::AttrValue>> conv = {{"stride", int64_t{1}},
                                                                   {"pad", int64_t{0}}};
  ir::Value* x = s.input("x", bf16({2, 8, 6, 6}));
  ir::Value* y4 =
      s.node(Op::kConv2d, {x, s.input("w", bf16({4, 8, 1, 1}))}, conv)->result();  // bf16, C = 4
  ir::Value* y8 =
      s.node(Op::kConv2d, {x, s.input("v", bf16({8, 8, 1, 1}))}, conv)->result();  // bf16, C = 8
  ir::Value* fl = s.node(Op::kFlatten, {s.node(Op::kRelu, {y8})->result()})->result();
  ir::Value* z = s.node(Op::kRelu, {y4})->result();
  s.g->setOutputs({fl, s.node(Op::kFlatten, {s.node(Op::kRelu, {z})->result()})->result()});
  const auto nhwc = passes::valuesKeptUnder(*s.g, cu::targetInfo());
  EXPECT_TRUE(nhwc.empty()) << "bf16 with 4 channels is narrower than 16 bytes; flatten reads NCHW";
}

TEST(CudaNhwcPlan, KernelsRefuseALayoutTheyCannotTake) {
  SmallGraph s;
  ir::Value* a = s.input("a", f32({2, 16, 4, 4}));
  ir::Value* b = s.input("b", f32({2, 16, 4, 4}));
  ir::Node* add = s.node(Op::kAdd, {a, b});
  ir::Node* flat = s.node(Op::kFlatten, {a});
  absl::flat_hash_set<const ir::Value*> bad = {a};
  absl::Status mixed = cu::checkNhwcSlots(*add, bad);  // add's operands in two layouts
  EXPECT_EQ(mixed.code(), absl::StatusCode::kInternal);
  EXPECT_NE(mixed.message().find(add->describe()), std::string::npos) << mixed;
  absl::Status nchw_only = cu::checkNhwcSlots(*flat, bad);
  EXPECT_EQ(nchw_only.code(), absl::StatusCode::kInternal);
  EXPECT_NE(nchw_only.message().find("operand 0 %a in nhwc"), std::string::npos) << nchw_only;
  bad.insert(b);
  bad.insert(add->result());
  EXPECT_TRUE(cu::checkNhwcSlots(*add, bad).ok());
}

// --- on a GPU ---------------------------------------------------------------------------

/// A Buffer's elements moved between NCHW and NHWC on the host (f32 or bf16).
Buffer relayout(Buffer& b, bool to_nhwc) {
  Buffer out(b.type());
  const ir::Shape& s = b.type().shape;
  const int64_t c = s[1], hw = s[2] * s[3], elem = ir::dtypeBytes(b.type().dtype);
  const char* src = static_cast<const char*>(b.view().data);
  char* dst = static_cast<char*>(out.view().data);
  for (int64_t i = 0; i < b.size(); ++i) {
    const int64_t o = cu::nhwcIndexOf(i, c, hw);
    std::memcpy(dst + (to_nhwc ? o : i) * elem, src + (to_nhwc ? i : o) * elem,
                static_cast<size_t>(elem));
  }
  return out;
}

/// Runs op's node on cuda:0 with the 4-D values in `nhwc` kept NHWC (inputs transposed in,
/// results transposed back): every result, in NCHW.
std::vector<Buffer> runWithLayout(SingleOp& op, const absl::flat_hash_set<const ir::Value*>& nhwc,
                                  backend::DeviceOptions options) {
  std::vector<Buffer> results;
  auto device = backend::cuda::cudaBackend().createDevice(
      ir::Device{::tandem::testing::kind("cuda"), 0}, options);
  EXPECT_TRUE(device.ok()) << device.status();
  if (!device.ok()) return results;
  auto& d = static_cast<cu::CudaDevice&>(**device);
  auto kernel = cu::makeKernel(op.node(), d.context(), &nhwc);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  if (!kernel.ok()) return results;
  std::vector<backend::DeviceBuffer> mem;
  std::vector<backend::TensorView> in, out;
  auto place = [&](Buffer* host, const ir::TensorType& t) -> backend::TensorView {
    auto m = d.allocate(t.bytes());
    EXPECT_TRUE(m.ok());
    backend::TensorView v = m->view(t);
    if (host != nullptr) {
      EXPECT_TRUE(d.copyFromHost(host->view(), v, d.computeStream()).ok());
    }
    mem.push_back(std::move(*m));
    return v;
  };
  std::vector<Buffer> staged;
  staged.reserve(op.node().numOperands());
  for (size_t i = 0; i < op.node().numOperands(); ++i) {
    staged.push_back(nhwc.contains(op.node().operand(i)) ? relayout(op.in(i), true)
                                                         : cloneBuffer(op.in(i)));
    in.push_back(place(&staged.back(), op.in(i).type()));
  }
  for (size_t r = 0; r < op.node().numResults(); ++r)
    out.push_back(place(nullptr, op.node().result(r)->type()));
  EXPECT_TRUE(d.computeStream().synchronize().ok());
  absl::Status s = (*kernel)->launch(d.computeStream(), in, out);
  EXPECT_TRUE(s.ok()) << s;
  for (size_t r = 0; r < out.size(); ++r) {
    Buffer b(out[r].type);
    EXPECT_TRUE(d.copyToHost(out[r], b.view(), d.computeStream()).ok());
    EXPECT_TRUE(d.computeStream().synchronize().ok());
    results.push_back(nhwc.contains(op.node().result(r)) ? relayout(b, false) : std::move(b));
  }
  return results;
}

/// Every 4-D operand and result of op's node in a slot that takes NHWC (the CUDA rules).
absl::flat_hash_set<const ir::Value*> all4d(SingleOp& op) {
  absl::flat_hash_set<const ir::Value*> s;
  const ir::Node& n = op.node();
  static const ir::TargetInfo target = cu::targetInfo();
  const auto& slot = target.layout_rules.slot;
  for (size_t i = 0; i < n.numOperands(); ++i)
    if (n.operand(i)->type().rank() == 4 && slot(n, false, i)) s.insert(n.operand(i));
  for (size_t r = 0; r < n.numResults(); ++r)
    if (n.result(r)->type().rank() == 4 && slot(n, true, r)) s.insert(n.result(r));
  return s;
}

void fillFloats(SingleOp& op, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1, 1);
  for (size_t i = 0; i < op.node().numOperands(); ++i) {
    Buffer& b = op.in(i);
    for (int64_t k = 0; k < b.size(); ++k) {
      if (b.type().dtype == ir::DType::kF32) b.f32()[k] = d(rng);
      if (b.type().dtype == ir::DType::kBF16) b.bf16()[k] = d(rng);
    }
  }
}

TEST(CudaNhwcKernels, ConvolutionsMatchCpu) {
  // Every combination of the x side's and the y side's layouts (the stem: NCHW x, NHWC y),
  // f32 without TF32 (1e-4, as conv_kernels_test.cc) and bf16 with f32 master weights (2e-2).
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  const std::vector<std::pair<std::string, ir::AttrValue>> attrs = {{"stride", int64_t{2}},
                                                                    {"pad", int64_t{1}}};
  for (ir::DType act : {ir::DType::kF32, ir::DType::kBF16}) {
    if (act == ir::DType::kBF16 && !backend::cpu::hostCpuInfo().bf16) continue;
    const double tol = act == ir::DType::kF32 ? 1e-4 : 2e-2;
    const ir::TensorType x{act, {2, 16, 9, 9}}, y{act, {2, 32, 5, 5}};
    std::vector<std::unique_ptr<SingleOp>> ops;
    ops.push_back(std::make_unique<SingleOp>(
        Op::kConv2d, std::vector<ir::TensorType>{x, f32({32, 16, 3, 3}), f32({32})}, attrs));
    ops.push_back(std::make_unique<SingleOp>(
        Op::kConv2dStats, std::vector<ir::TensorType>{x, f32({32, 16, 3, 3})}, attrs));
    ops.push_back(std::make_unique<SingleOp>(
        Op::kConv2dBackwardData, std::vector<ir::TensorType>{y, f32({32, 16, 3, 3}), x}, attrs));
    auto battrs = attrs;
    battrs.emplace_back("bias", true);
    ops.push_back(std::make_unique<SingleOp>(
        Op::kConv2dBackwardFilter, std::vector<ir::TensorType>{y, x, f32({32, 16, 3, 3})}, battrs));
    for (auto& owned : ops) {
      SingleOp& op = *owned;
      fillFloats(op, rng);
      op.run();
      const ir::Node& n = op.node();
      const bool fwd = n.op() == Op::kConv2d || n.op() == Op::kConv2dStats;
      const ir::Value* x_side =
          n.op() == Op::kConv2dBackwardData ? n.result(0) : n.operand(fwd ? 0 : 1);
      const ir::Value* y_side = fwd ? n.result(0) : n.operand(0);
      for (int combo = 1; combo < 4; ++combo) {
        absl::flat_hash_set<const ir::Value*> nhwc;
        if (combo & 1) nhwc.insert(x_side);
        if (combo & 2) nhwc.insert(y_side);
        std::vector<Buffer> got = runWithLayout(op, nhwc, tf32Options(false));
        ASSERT_EQ(got.size(), n.numResults());
        for (size_t r = 0; r < got.size(); ++r)
          EXPECT_LE(scaledError(got[r], op.out(r)), tol)
              << n.describe() << " layouts " << combo << " result " << r;
      }
    }
  }
}

TEST(CudaNhwcKernels, BatchNormPoolingAndGlobalPoolEqualNchwBitForBit) {
  // The own kernels add in the same order in both layouts: NHWC on the GPU equals NCHW on
  // the GPU bit for bit, and both are near the CPU.
  std::mt19937 rng(6);
  const ir::Shape s = {4, 16, 12, 12};
  const ir::TensorType c = f32({16}), st{ir::DType::kF64, {3, 16}}, sums{ir::DType::kF64, {2, 16}};
  const SingleOp::Attrs pool = {
      {"kernel", int64_t{3}}, {"stride", int64_t{2}}, {"pad", int64_t{1}}};
  std::vector<std::unique_ptr<SingleOp>> ops;
  ops.push_back(std::make_unique<SingleOp>(
      Op::kBatchNormApply, std::vector<ir::TensorType>{f32(s), st, c, c, c, c, f32(s)},
      SingleOp::Attrs{{"momentum", 0.1}, {"eps", 1e-5}, {"relu", true}}, std::vector<ir::Var>{},
      std::vector<ir::TensorType>{}, std::vector<size_t>{4, 5}));
  ops.push_back(std::make_unique<SingleOp>(
      Op::kBatchNormBackwardReduce, std::vector<ir::TensorType>{f32(s), f32(s), c, c, f32(s)}));
  ops.push_back(std::make_unique<SingleOp>(
      Op::kBatchNormBackwardApply,
      std::vector<ir::TensorType>{f32(s), f32(s), c, c, c, sums, st, f32(s)},
      SingleOp::Attrs{{"residual", true}}));
  ops.push_back(
      std::make_unique<SingleOp>(Op::kMaxPool2d, std::vector<ir::TensorType>{f32(s)}, pool));
  ops.push_back(std::make_unique<SingleOp>(
      Op::kMaxPool2dBackward, std::vector<ir::TensorType>{f32({4, 16, 6, 6}), f32(s)}, pool));
  ops.push_back(
      std::make_unique<SingleOp>(Op::kGlobalAvgPool, std::vector<ir::TensorType>{f32(s)}));
  // The nodes are built on the host: a refused one fails here without a GPU too.
  for (size_t i = 0; i < ops.size(); ++i) ASSERT_TRUE(ops[i]->built()) << "op " << i;
  TANDEM_SKIP_WITHOUT_GPU();
  for (auto& owned : ops) {
    SingleOp& op = *owned;
    fillFloats(op, rng);
    for (size_t i = 0; i < op.node().numOperands(); ++i)
      if (op.in(i).type().dtype == ir::DType::kF64)  // counts, sums: plausible statistics
        for (int64_t k = 0; k < op.in(i).size(); ++k)
          op.in(i).f64()[k] = k < 16 ? 576.0 : 0.1 * (k % 16);
    std::vector<Buffer> plain = runWithLayout(op, {}, {});
    std::vector<Buffer> nhwc = runWithLayout(op, all4d(op), {});
    ASSERT_EQ(plain.size(), nhwc.size());
    for (size_t r = 0; r < plain.size(); ++r)
      EXPECT_EQ(std::memcmp(plain[r].view().data, nhwc[r].view().data,
                            static_cast<size_t>(plain[r].type().bytes())),
                0)
          << op.node().describe() << " result " << r;
  }
}

}  // namespace
}  // namespace tandem::testing
