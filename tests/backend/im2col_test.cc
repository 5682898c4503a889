// kGemm's copies (backend/cpu/im2col.h): im2col and col2imAdd, which take AVX-512 rows on
// a host that has them, against the portable loops bit for bit, and the loops against the
// definition (each column element is the input element its tap reads, 0 over padding;
// col2im is im2col's adjoint). Windows with padding, strides along either axis, rows
// wider than one vector and than two, and columns side by side (a row stride wider than
// the image's pixels), where the rows must leave the neighbours' columns alone.

#include "backend/cpu/im2col.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/cpu/target_info.h"
#include "gtest/gtest.h"

namespace tandem::testing {
namespace {

using backend::cpu::ConvWindow;

/// {c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w}: the output extent follows.
ConvWindow window(int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                  int64_t ph, int64_t pw) {
  return {.c = c,
          .h = h,
          .w = w,
          .kh = kh,
          .kw = kw,
          .oh = (h + 2 * ph - kh) / sh + 1,
          .ow = (w + 2 * pw - kw) / sw + 1,
          .stride_h = sh,
          .stride_w = sw,
          .pad_h = ph,
          .pad_w = pw};
}

std::string describe(const ConvWindow& g) {
  return absl::StrCat("c", g.c, " ", g.h, "x", g.w, " k", g.kh, "x", g.kw, " s", g.stride_h, ",",
                      g.stride_w, " p", g.pad_h, ",", g.pad_w);
}

const std::vector<ConvWindow> kWindows = {
    window(20, 13, 13, 5, 5, 1, 1, 0, 0),  // LeNet's conv2
    window(1, 28, 28, 3, 3, 1, 1, 0, 0),   // LeNet's conv1: output rows of two vectors
    window(3, 28, 28, 3, 3, 1, 1, 1, 1),   // ResNet-18's 3x3 at 28
    window(2, 14, 14, 3, 3, 2, 2, 1, 1),   // strided: the loops
    window(2, 9, 11, 3, 2, 2, 1, 1, 0),    // strided rows, stride-1 columns
    window(2, 7, 7, 7, 7, 1, 1, 3, 3),     // padding as wide as the window's reach
    window(3, 6, 17, 1, 7, 1, 1, 0, 3),    // 1x7: an input row just past one vector
    window(1, 5, 32, 3, 3, 1, 1, 1, 1),    // 32 columns: the widest the rows take
    window(1, 4, 33, 1, 3, 1, 1, 0, 1),    // 33: the loops
    window(2, 8, 8, 3, 9, 1, 1, 1, 4),     // 9 taps a row: the loops
    window(2, 6, 6, 2, 2, 1, 1, 2, 2),     // padding beyond the window: zero lines
};

std::vector<float> random(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& e : v) e = d(rng);
  return v;
}

bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Im2col, RowsEqualTheLoopsBitForBit) {
  if (!backend::cpu::hostHasAvx512Core()) {
    GTEST_SKIP() << "no AVX-512 on this host: im2col and col2imAdd run the loops alone";
  }
  std::mt19937 rng(7);
  for (const ConvWindow& g : kWindows) {
    SCOPED_TRACE(describe(g));
    // Three images side by side; the middle one is copied, its neighbours' columns must
    // keep what they held.
    const int64_t stride = 3 * g.pixels(), size = g.rows() * stride;
    const std::vector<float> x = random(g.c * g.h * g.w, rng), before = random(size, rng);
    std::vector<float> rows = before, loops = before;
    backend::cpu::im2col(g, x.data(), rows.data() + g.pixels(), stride);
    backend::cpu::im2colLoops(g, x.data(), loops.data() + g.pixels(), stride);
    EXPECT_TRUE(sameBits(rows, loops)) << "im2col";

    const std::vector<float> cols = random(size, rng), dx0 = random(g.c * g.h * g.w, rng);
    std::vector<float> dx_rows = dx0, dx_loops = dx0;
    backend::cpu::col2imAdd(g, cols.data() + g.pixels(), stride, dx_rows.data());
    backend::cpu::col2imAddLoops(g, cols.data() + g.pixels(), stride, dx_loops.data());
    EXPECT_TRUE(sameBits(dx_rows, dx_loops)) << "col2imAdd";
  }
}

/// The input element tap (c, kh, kw) reads for output pixel (oh, ow), or nullptr over padding.
const float* tapReads(const ConvWindow& g, const float* x, int64_t c, int64_t kh, int64_t kw,
                      int64_t oh, int64_t ow) {
  const int64_t ih = oh * g.stride_h - g.pad_h + kh, iw = ow * g.stride_w - g.pad_w + kw;
  if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) return nullptr;
  return x + (c * g.h + ih) * g.w + iw;
}

TEST(Im2col, CopiesWhatEachTapReadsAndAddsItBack) {
  std::mt19937 rng(8);
  for (const ConvWindow& g : kWindows) {
    SCOPED_TRACE(describe(g));
    const std::vector<float> x = random(g.c * g.h * g.w, rng);
    std::vector<float> cols(static_cast<size_t>(g.rows() * g.pixels()), 9.0f);
    backend::cpu::im2col(g, x.data(), cols.data(), g.pixels());
    // col2im of every column element's own index into a zeroed image: each input element
    // then holds the sum of the indices of the columns that copied it.
    std::vector<float> index(cols.size());
    for (size_t i = 0; i < index.size(); ++i) index[i] = static_cast<float>(i);
    std::vector<double> expected(x.size(), 0.0);
    std::vector<float> dx(x.size(), 0.0f);
    backend::cpu::col2imAdd(g, index.data(), g.pixels(), dx.data());
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t kh = 0; kh < g.kh; ++kh)
        for (int64_t kw = 0; kw < g.kw; ++kw)
          for (int64_t oh = 0; oh < g.oh; ++oh)
            for (int64_t ow = 0; ow < g.ow; ++ow) {
              const int64_t i = ((c * g.kh + kh) * g.kw + kw) * g.pixels() + oh * g.ow + ow;
              const float* from = tapReads(g, x.data(), c, kh, kw, oh, ow);
              ASSERT_EQ(cols[static_cast<size_t>(i)], from ? *from : 0.0f)
                  << "tap " << c << "," << kh << "," << kw << " pixel " << oh << "," << ow;
              if (from) expected[static_cast<size_t>(from - x.data())] += double(i);
            }
    for (size_t i = 0; i < dx.size(); ++i)
      ASSERT_EQ(double(dx[i]), expected[i]) << "input element " << i;
  }
}

}  // namespace
}  // namespace tandem::testing
