// Pooling on CUDA. Without a GPU: pool_math.h driven over whole tensors by a host loop
// that mirrors pool.cu (one output per thread forward, one input per thread backward),
// against the CPU kernels bit for bit: tie rule, NaN, overlapping windows, padding, the
// 2x2 path, f32 and bf16. With a GPU: every op through the CUDA kernel table against the
// CPU backend, exactly.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/cuda/pool_params.h"
#include "gtest/gtest.h"
#include "ir/attrs.h"
#include "tests/cuda/cuda_test_util.h"

namespace tandem::testing {
namespace {

using backend::cuda::PoolParams;
using ir::Op;

struct PoolCase {
  int64_t n, c, h, w;
  ir::Hw k, stride, pad;   // per axis: one int, or {h, w}
  bool ceil_mode = false;  // the extent rounded up, a window in the trailing padding dropped
  bool relu = false;       // average pooling of relu(x) (fuse-relu-pool)
  ir::Shape x() const { return {n, c, h, w}; }
  static int64_t extent(int64_t in, int64_t k, int64_t stride, int64_t pad, bool ceil_mode) {
    const int64_t span = in + 2 * pad - k;
    if (!ceil_mode) return span / stride + 1;
    const int64_t out = (span + stride - 1) / stride + 1;
    return (out - 1) * stride >= in + pad ? out - 1 : out;
  }
  int64_t oh() const { return extent(h, k.h, stride.h, pad.h, ceil_mode); }
  int64_t ow() const { return extent(w, k.w, stride.w, pad.w, ceil_mode); }
  ir::Shape y() const { return {n, c, oh(), ow()}; }
  SingleOp::Attrs attrs() const {
    SingleOp::Attrs a{{"kernel", k.toAttr()},
                      {"stride", stride.toAttr()},
                      {"pad", pad.toAttr()},
                      {"ceil_mode", ceil_mode}};
    if (relu) a.emplace_back("relu", true);  // average pooling only
    return a;
  }
  PoolParams params() const {
    PoolParams p = backend::cuda::poolParams(x(), y(), k, stride, pad);
    p.relu = relu;
    return p;
  }
  PoolCase withRelu() const {
    PoolCase c = *this;
    c.relu = true;
    return c;
  }
  std::string window() const {
    return absl::StrCat("k", ir::toString(k.toAttr()), " s", ir::toString(stride.toAttr()), " p",
                        ir::toString(pad.toAttr()));
  }
};

// LeNet's 2x2 (even and odd extents), ResNet's 3x3 stride 2 pad 1 (overlapping), 3x3
// stride 1 pad 1, a window without padding that leaves a border unread, 2x2 stride 1.
const PoolCase kCases[] = {{2, 3, 8, 8, 2, 2, 0},
                           {2, 3, 9, 7, 2, 2, 0},
                           {2, 4, 9, 9, 3, 2, 1},
                           {1, 3, 8, 10, 3, 2, 1},
                           {2, 2, 7, 7, 3, 1, 1},
                           {1, 2, 11, 9, 3, 3, 0},
                           {1, 3, 6, 5, 2, 1, 0},
                           // ceil_mode: LeNet's 2x2 on odd extents (partial windows, off
                           // the 2x2 path), GoogLeNet's 3x3 stride 2, padded ones whose
                           // average divides by less, and a window in the padding dropped.
                           {2, 3, 9, 7, 2, 2, 0, true},
                           {1, 2, 8, 10, 3, 2, 0, true},
                           {1, 2, 8, 8, 3, 2, 1, true},
                           {1, 2, 8, 8, 3, 3, 1, true},
                           // Height and width apart: kernel, stride and padding per axis,
                           // once with ceil_mode.
                           {2, 3, 9, 8, {3, 2}, {2, 1}, {1, 0}},
                           {1, 2, 8, 9, {3, 2}, {2, 2}, {1, 1}, true}};

/// Small integers (ties within windows are common) or uniform values, f32 or bf16 bits.
void fill(Buffer& b, std::mt19937& rng, bool ties) {
  std::uniform_real_distribution<float> u(-1, 1);
  std::uniform_int_distribution<int> small(-2, 2);
  for (int64_t i = 0; i < b.size(); ++i) {
    const float v = ties ? static_cast<float>(small(rng)) : u(rng);
    if (b.type().dtype == ir::DType::kBF16)
      reinterpret_cast<uint16_t*>(b.view().data)[i] = backend::cuda::floatToBf16(v);
    else
      b.f32()[i] = v;
  }
}

/// What pool.cu computes, element by element (plane-major, like its grid-stride loops).
template <typename T>
void hostPool(Op op, const PoolParams& p, const T* in0, const T* in1, T* out) {
  namespace cu = backend::cuda;
  const bool backward = op == Op::kMaxPool2dBackward || op == Op::kAvgPool2dBackward;
  if (!backward) {
    for (int64_t pl = 0; pl < p.planes; ++pl)
      for (int64_t i = 0; i < p.oh; ++i)
        for (int64_t j = 0; j < p.ow; ++j) {
          const T* x = in0 + pl * p.h * p.w;
          const float v =
              op == Op::kMaxPool2d ? cu::maxPoolAt(x, p, i, j) : cu::avgPoolAt(x, p, i, j);
          cu::store(out, (pl * p.oh + i) * p.ow + j, v);
        }
    return;
  }
  for (int64_t pl = 0; pl < p.planes; ++pl)
    for (int64_t r = 0; r < p.h; ++r)
      for (int64_t c = 0; c < p.w; ++c) {
        const T* dy = in0 + pl * p.oh * p.ow;
        const T* x = in1 + pl * p.h * p.w;
        const float v = op == Op::kMaxPool2dBackward ? cu::maxPoolBackwardAt(dy, x, p, r, c)
                                                     : cu::avgPoolBackwardAt(dy, x, p, r, c);
        cu::store(out, (pl * p.h + r) * p.w + c, v);
      }
}

/// The operand types of `op` on case `c` in `dtype`.
std::vector<ir::TensorType> operands(Op op, const PoolCase& c, ir::DType dtype) {
  if (op == Op::kMaxPool2d || op == Op::kAvgPool2d) return {{dtype, c.x()}};
  return {{dtype, c.y()}, {dtype, c.x()}};
}

/// Runs the host mirror and the CPU kernel on the same inputs; expects the same bytes.
void expectHostMatchesCpu(Op op, const PoolCase& c, ir::DType dtype, bool ties, std::mt19937& rng,
                          float nan_at = -1) {
  SingleOp cpu(op, operands(op, c, dtype), c.attrs());
  for (size_t i = 0; i < cpu.node().numOperands(); ++i) fill(cpu.in(i), rng, ties);
  if (nan_at >= 0) {  // a NaN in x (the last operand) at a fraction of its extent
    Buffer& x = cpu.in(cpu.node().numOperands() - 1);
    const int64_t at = static_cast<int64_t>(nan_at * static_cast<float>(x.size()));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    if (dtype == ir::DType::kBF16)
      reinterpret_cast<uint16_t*>(x.view().data)[at] = backend::cuda::floatToBf16(nan);
    else
      x.f32()[at] = nan;
  }
  cpu.run();
  Buffer mine(cpu.out(0).type());
  const bool two = cpu.node().numOperands() > 1;
  if (dtype == ir::DType::kBF16) {
    auto bits = [](Buffer& b) { return reinterpret_cast<uint16_t*>(b.view().data); };
    hostPool(op, c.params(), bits(cpu.in(0)), two ? bits(cpu.in(1)) : nullptr, bits(mine));
  } else {
    hostPool(op, c.params(), cpu.in(0).f32(), two ? cpu.in(1).f32() : nullptr, mine.f32());
  }
  ASSERT_EQ(mine.type().bytes(), cpu.out(0).type().bytes());
  const auto* a = static_cast<const unsigned char*>(mine.view().data);
  const auto* b = static_cast<const unsigned char*>(cpu.out(0).view().data);
  const size_t elem = dtype == ir::DType::kBF16 ? 2 : 4;
  int64_t first_diff = -1;
  for (int64_t i = 0; i < mine.size() && first_diff < 0; ++i)
    if (std::memcmp(a + i * elem, b + i * elem, elem) != 0) first_diff = i;
  EXPECT_EQ(first_diff, -1) << cpu.node().describe() << " " << c.window() << (ties ? " ties" : "")
                            << ": element " << first_diff << " is " << mine.at(first_diff)
                            << ", the CPU's " << cpu.out(0).at(first_diff);
}

const Op kOps[] = {Op::kMaxPool2d, Op::kAvgPool2d, Op::kMaxPool2dBackward, Op::kAvgPool2dBackward};

TEST(CudaPoolMath, MatchesCpuBitForBitF32) {
  std::mt19937 rng(11);
  for (Op op : kOps)
    for (const PoolCase& c : kCases)
      for (bool ties : {false, true}) expectHostMatchesCpu(op, c, ir::DType::kF32, ties, rng);
}

TEST(CudaPoolMath, MatchesCpuBitForBitBf16) {
  std::mt19937 rng(12);
  for (Op op : kOps)
    for (const PoolCase& c : kCases)
      for (bool ties : {false, true}) expectHostMatchesCpu(op, c, ir::DType::kBF16, ties, rng);
}

TEST(CudaPoolMath, NanWindowsMatchCpu) {
  // Max pooling propagates NaN and its backward routes to the NaN; average pooling just
  // adds it. One NaN early and one late in x, for every case and both dtypes.
  std::mt19937 rng(13);
  for (ir::DType dtype : {ir::DType::kF32, ir::DType::kBF16})
    for (Op op : kOps)
      for (const PoolCase& c : kCases)
        for (float at : {0.1f, 0.77f}) expectHostMatchesCpu(op, c, dtype, true, rng, at);
}

TEST(CudaPoolMath, ReluAverageMatchesCpuBitForBit) {
  // avg_pool2d{relu} and its backward (fuse-relu-pool): relu on load, the gradient masked
  // where x <= 0; NaN inputs too (relu passes them, and so does its mask).
  std::mt19937 rng(14);
  for (ir::DType dtype : {ir::DType::kF32, ir::DType::kBF16})
    for (Op op : {Op::kAvgPool2d, Op::kAvgPool2dBackward})
      for (const PoolCase& c : kCases) {
        for (bool ties : {false, true}) expectHostMatchesCpu(op, c.withRelu(), dtype, ties, rng);
        expectHostMatchesCpu(op, c.withRelu(), dtype, true, rng, 0.3f);
      }
}

TEST(CudaPoolMath, GatherVisitsEveryWindowOverAnInput) {
  // firstWindow/lastWindow against the windows' own extents, for overlapping, strided and
  // padded windows: each input row is covered by exactly the windows they name.
  for (int64_t k : {1, 2, 3, 5})
    for (int64_t stride : {1, 2, 3})
      for (int64_t pad = 0; 2 * pad <= k; ++pad)
        for (int64_t in : {5, 8, 13}) {
          if (in + 2 * pad < k) continue;
          const int64_t out = (in + 2 * pad - k) / stride + 1;
          for (int64_t r = 0; r < in; ++r) {
            std::vector<int64_t> want;
            for (int64_t i = 0; i < out; ++i)
              if (backend::cuda::windowBegin(i, stride, pad) <= r &&
                  r < backend::cuda::windowEnd(i, in, k, stride, pad))
                want.push_back(i);
            std::vector<int64_t> got;
            for (int64_t i = backend::cuda::firstWindow(r, k, stride, pad);
                 i <= backend::cuda::lastWindow(r, out, stride, pad); ++i)
              got.push_back(i);
            EXPECT_EQ(got, want) << "k" << k << " s" << stride << " p" << pad << " in" << in
                                 << " row " << r;
          }
        }
}

// --- on a GPU ---------------------------------------------------------------------------

void expectGpuMatchesCpu(Op op, ir::DType dtype, std::mt19937& rng, bool relu = false) {
  for (const PoolCase& plain : kCases)
    for (bool ties : {false, true}) {
      const PoolCase c = relu ? plain.withRelu() : plain;
      SingleOp op_(op, operands(op, c, dtype), c.attrs());
      for (size_t i = 0; i < op_.node().numOperands(); ++i) fill(op_.in(i), rng, ties);
      // The same math in the same order as the CPU's: the same bits.
      expectCudaMatchesCpu(op_, 0.0);
    }
}

TEST(CudaPoolKernels, ForwardMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(21);
  for (ir::DType dtype : {ir::DType::kF32, ir::DType::kBF16}) {
    expectGpuMatchesCpu(Op::kMaxPool2d, dtype, rng);
    expectGpuMatchesCpu(Op::kAvgPool2d, dtype, rng);
  }
}

TEST(CudaPoolKernels, BackwardMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(22);
  for (ir::DType dtype : {ir::DType::kF32, ir::DType::kBF16}) {
    expectGpuMatchesCpu(Op::kMaxPool2dBackward, dtype, rng);
    expectGpuMatchesCpu(Op::kAvgPool2dBackward, dtype, rng);
  }
}

TEST(CudaPoolKernels, ReluAverageMatchesCpu) {
  // avg_pool2d{relu} and its masked backward (fuse-relu-pool), both dtypes.
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(23);
  for (ir::DType dtype : {ir::DType::kF32, ir::DType::kBF16})
    for (Op op : {Op::kAvgPool2d, Op::kAvgPool2dBackward})
      expectGpuMatchesCpu(op, dtype, rng, /*relu=*/true);
}

TEST(CudaPoolKernels, LargeTensorCoversEveryElement) {
  // More elements than one grid covers (132 * 16 blocks of 256 threads): the grid-stride
  // loops must reach the end (results are poisoned before the run).
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(23);
  const PoolCase c{8, 64, 57, 57, 3, 2, 1};
  for (Op op : kOps) {
    SingleOp op_(op, operands(op, c, ir::DType::kF32), c.attrs());
    for (size_t i = 0; i < op_.node().numOperands(); ++i) fill(op_.in(i), rng, false);
    expectCudaMatchesCpu(op_, 0.0);
  }
}

}  // namespace
}  // namespace tandem::testing
