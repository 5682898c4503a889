#include "backend/cpu/gemm_conv.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "backend/cpu/matmul_core.h"
#include "backend/cpu/plane_sums.h"
#include "backend/cpu/vector_loops.h"
#include "ir/status_macros.h"

namespace tandem::backend::cpu {
namespace {

/// The im2col bytes of one chunk: about one core's L2 cache (1 MiB on the AVX-512 EPYC
/// measured), so that a chunk's copies are still cached when its product reads them.
/// LeNet's conv2 at 4 to 32 images a chunk ran within 2 % (bench/cpu_kernels_bench.cc).
constexpr int64_t kChunkBytes = int64_t{1} << 20;

/// The batch cut into chunks: `full` chunks of `size` images and, when the batch does not
/// divide, one of `rest`. Each size has its own product (its shapes are fixed when made).
struct Chunks {
  int64_t size, full, rest;
};
Chunks chunksOf(const GemmConvShape& s) {
  const int64_t per_image = s.window.rows() * s.window.pixels() * int64_t{sizeof(float)};
  const int64_t size = std::clamp<int64_t>(kChunkBytes / per_image, 1, s.n);
  return {size, s.n / size, s.n % size};
}

/// Whether the forward and backward-data products take a chunk's images side by side (one
/// product of images x pixels columns, the outputs copied apart after it) rather than one
/// product per image. Per image, the last 16-lane vector of every row is partly idle:
/// LeNet's conv2 (81 pixels) wastes 15 of 96 lanes, and side by side its forward and
/// backward data ran 9 % faster; conv1 (676 pixels, 12 of 688) ran 8 % and 29 % slower,
/// its memory-bound product now paying for the copy (cpu_kernels_bench, session 23).
bool sideBySideProducts(const GemmConvShape& s) {
  constexpr int64_t kLanes = 16;  // f32 in an AVX-512 vector; AVX2's 8 waste no more
  const int64_t pixels = s.window.pixels();
  const int64_t padded = (pixels + kLanes - 1) / kLanes * kLanes;
  return (padded - pixels) * 20 > padded;  // more than 5 % of the lanes idle
}

/// y[i, o, p] += b[o] over `images` images of [channels, pixels].
TANDEM_VECTOR_LOOPS void addChannelBias(const float* b, int64_t images, int64_t channels,
                                        int64_t pixels, float* y) {
  for (int64_t i = 0; i < images; ++i)
    for (int64_t o = 0; o < channels; ++o) {
      float* plane = y + (i * channels + o) * pixels;
      const float bo = b[o];
      for (int64_t p = 0; p < pixels; ++p) plane[p] += bo;
    }
}

/// The `images` images of [channels, pixels] at `src` side by side in `wide`, [channels,
/// images x pixels]: image i's pixels of channel c at wide[c][i * pixels].
TANDEM_VECTOR_LOOPS void sideBySide(const float* src, int64_t images, int64_t channels,
                                    int64_t pixels, float* wide) {
  const int64_t width = images * pixels;
  for (int64_t i = 0; i < images; ++i)
    for (int64_t c = 0; c < channels; ++c)
      std::copy_n(src + (i * channels + c) * pixels, pixels, wide + c * width + i * pixels);
}

/// sideBySide's inverse, with b[c] (when given) added to each value as it is copied: the
/// bias costs no pass of its own.
TANDEM_VECTOR_LOOPS void apart(const float* wide, const float* b, int64_t images, int64_t channels,
                               int64_t pixels, float* dst) {
  const int64_t width = images * pixels;
  for (int64_t i = 0; i < images; ++i)
    for (int64_t c = 0; c < channels; ++c) {
      const float* from = wide + c * width + i * pixels;
      float* to = dst + (i * channels + c) * pixels;
      if (b == nullptr) {
        std::copy_n(from, pixels, to);
      } else {
        const float bc = b[c];
        for (int64_t p = 0; p < pixels; ++p) to[p] = from[p] + bc;
      }
    }
}

/// db[o] = the sum of dy[n, o, p] over images and pixels, each image's plane summed first
/// by batch norm's planeSum (kLanes accumulators, which vectorize).
TANDEM_VECTOR_LOOPS void channelSums(const float* dy, int64_t images, int64_t channels,
                                     int64_t pixels, float* db) {
  for (int64_t o = 0; o < channels; ++o) {
    float sum = 0.0f;
    for (int64_t n = 0; n < images; ++n)
      sum += planeSum(dy + (n * channels + o) * pixels, pixels, [](float v) { return v; });
    db[o] = sum;
  }
}

/// What every pass holds: the shape, its chunks and their two products. The buffers are
/// the kernel's own rather than the thread's arena (dnnl_util.cc), which the products'
/// programs take for their scratchpads in the middle of a run.
class GemmConvBase : public GemmConvKernel {
 public:
  /// Makes the products: one per chunk size (their shapes are fixed when made).
  absl::Status make(CpuContext& ctx, absl::string_view where) {
    ASSIGN_OR_RETURN(MatmulCore full, MatmulCore::make(ctx, product(chunks_.size), where));
    full_.emplace(std::move(full));
    if (chunks_.rest > 0) {
      ASSIGN_OR_RETURN(MatmulCore rest, MatmulCore::make(ctx, product(chunks_.rest), where));
      rest_.emplace(std::move(rest));
    }
    return absl::OkStatus();
  }

 protected:
  /// `side_by_side`: the chunk's matrices hold its images side by side (then wide_ holds
  /// the chunk's outputs, or their gradients, so), else each image's matrix on its own.
  GemmConvBase(const GemmConvShape& s, bool side_by_side)
      : s_(s),
        chunks_(chunksOf(s)),
        side_by_side_(side_by_side),
        cols_(static_cast<size_t>(chunks_.size * s.window.rows() * s.window.pixels())),
        wide_(side_by_side ? static_cast<size_t>(chunks_.size * outputElements()) : 0) {}

  /// The product of a chunk of `images`.
  virtual MatmulSpec product(int64_t images) const = 0;

  /// Calls chunk(first image, images, product) over the batch.
  template <typename F>
  void forEachChunk(F chunk) {
    for (int64_t i = 0; i < chunks_.full; ++i) chunk(i * chunks_.size, chunks_.size, *full_);
    if (chunks_.rest > 0) chunk(chunks_.full * chunks_.size, chunks_.rest, *rest_);
  }
  int64_t imageElements() const { return s_.window.c * s_.window.h * s_.window.w; }
  int64_t outputElements() const { return s_.o * s_.window.pixels(); }

  /// Where image i's column j of the chunk's matrices is: i * pixels + j of rows `width`
  /// wide (side by side), or column j of image i's own matrix, [rows, pixels].
  int64_t imageColumn(int64_t i) const {
    return side_by_side_ ? i * s_.window.pixels() : i * s_.window.rows() * s_.window.pixels();
  }
  int64_t rowStride(int64_t images) const {
    return side_by_side_ ? images * s_.window.pixels() : s_.window.pixels();
  }
  /// A product over a chunk of `images`: side by side one of images x pixels columns,
  /// else `images` products of `pixels` columns, A shared.
  MatmulShape chunkProduct(int64_t images, MatmulShape shape) const {
    if (side_by_side_) {
      shape.n = images * s_.window.pixels();
    } else {
      shape.batch = images;
      shape.n = s_.window.pixels();
      shape.a_broadcast = true;
    }
    return shape;
  }

  GemmConvShape s_;
  Chunks chunks_;
  bool side_by_side_;
  std::optional<MatmulCore> full_, rest_;
  std::vector<float> cols_;
  std::vector<float> wide_;  // side by side: a chunk's [o, images x pixels]
};

class Forward final : public GemmConvBase {
 public:
  Forward(const GemmConvShape& s, bool bias)
      : GemmConvBase(s, sideBySideProducts(s)), bias_(bias) {}

 private:
  // y[chunk] = W[o, rows] * cols[chunk][rows, pixels], side by side or an image at a time.
  MatmulSpec product(int64_t images) const override {
    MatmulSpec m;
    m.shape = chunkProduct(images, {.m = s_.o, .k = s_.window.rows()});
    return m;
  }

  void run(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const float* x = in[0].f32();
    const float* w = in[1].f32();
    const float* b = bias_ ? in[2].f32() : nullptr;
    float* y = out[0].f32();
    const int64_t pixels = s_.window.pixels();
    forEachChunk([&](int64_t first, int64_t images, MatmulCore& product) {
      for (int64_t i = 0; i < images; ++i)
        im2col(s_.window, x + (first + i) * imageElements(), cols_.data() + imageColumn(i),
               rowStride(images));
      float* y_chunk = y + first * outputElements();
      if (side_by_side_) {
        product.run(w, cols_.data(), nullptr, wide_.data());
        apart(wide_.data(), b, images, s_.o, pixels, y_chunk);
      } else {
        product.run(w, cols_.data(), nullptr, y_chunk);
        if (b != nullptr) addChannelBias(b, images, s_.o, pixels, y_chunk);
      }
    });
  }
  bool bias_;
};

class BackwardData final : public GemmConvBase {
 public:
  explicit BackwardData(const GemmConvShape& s) : GemmConvBase(s, sideBySideProducts(s)) {}

 private:
  // dcols[chunk] = W^T[rows, o] * dy[chunk][o, pixels] (W as stored, [o, rows],
  // transposed), then col2im adds each image's columns onto its dx.
  MatmulSpec product(int64_t images) const override {
    MatmulSpec m;
    m.shape = chunkProduct(images, {.m = s_.window.rows(), .k = s_.o, .trans_a = true});
    return m;
  }

  void run(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const float* dy = in[0].f32();
    const float* w = in[1].f32();
    float* dx = out[0].f32();
    const int64_t pixels = s_.window.pixels();
    forEachChunk([&](int64_t first, int64_t images, MatmulCore& product) {
      const float* dy_chunk = dy + first * outputElements();
      if (side_by_side_) {
        sideBySide(dy_chunk, images, s_.o, pixels, wide_.data());
        dy_chunk = wide_.data();
      }
      product.run(w, dy_chunk, nullptr, cols_.data());
      float* dx_chunk = dx + first * imageElements();
      std::fill(dx_chunk, dx_chunk + images * imageElements(), 0.0f);
      for (int64_t i = 0; i < images; ++i)
        col2imAdd(s_.window, cols_.data() + imageColumn(i), rowStride(images),
                  dx_chunk + i * imageElements());
    });
  }
};

class BackwardFilter final : public GemmConvBase {
 public:
  // Always side by side: its product sums over the chunk's pixels x images.
  BackwardFilter(const GemmConvShape& s, bool bias)
      : GemmConvBase(s, /*side_by_side=*/true), bias_(bias) {}

 private:
  // dW[o, rows] += dy[o][images x pixels] * (cols[rows][images x pixels])^T.
  MatmulSpec product(int64_t images) const override {
    MatmulSpec m;
    m.shape = {.m = s_.o, .n = s_.window.rows(), .k = images * s_.window.pixels(), .trans_b = true};
    m.accumulate = true;
    return m;
  }

  void run(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override {
    const float* dy = in[0].f32();
    const float* x = in[1].f32();
    float* dw = out[0].f32();
    const int64_t pixels = s_.window.pixels();
    std::fill(dw, dw + s_.o * s_.window.rows(), 0.0f);
    forEachChunk([&](int64_t first, int64_t images, MatmulCore& product) {
      sideBySide(dy + first * outputElements(), images, s_.o, pixels, wide_.data());
      for (int64_t i = 0; i < images; ++i)
        im2col(s_.window, x + (first + i) * imageElements(), cols_.data() + imageColumn(i),
               rowStride(images));
      product.run(wide_.data(), cols_.data(), nullptr, dw);
    });
    if (bias_) channelSums(dy, s_.n, s_.o, pixels, out[1].f32());
  }

  bool bias_;
};

template <typename Kernel, typename... Args>
absl::StatusOr<std::unique_ptr<GemmConvKernel>> made(CpuContext& ctx, absl::string_view where,
                                                     Args&&... args) {
  auto k = std::make_unique<Kernel>(std::forward<Args>(args)...);
  RETURN_IF_ERROR(k->make(ctx, where));
  return std::unique_ptr<GemmConvKernel>(std::move(k));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GemmConvKernel>> makeGemmConvForward(CpuContext& ctx,
                                                                    const GemmConvShape& s,
                                                                    bool bias,
                                                                    absl::string_view where) {
  return made<Forward>(ctx, where, s, bias);
}
absl::StatusOr<std::unique_ptr<GemmConvKernel>> makeGemmConvBackwardData(CpuContext& ctx,
                                                                         const GemmConvShape& s,
                                                                         absl::string_view where) {
  return made<BackwardData>(ctx, where, s);
}
absl::StatusOr<std::unique_ptr<GemmConvKernel>> makeGemmConvBackwardFilter(
    CpuContext& ctx, const GemmConvShape& s, bool bias, absl::string_view where) {
  return made<BackwardFilter>(ctx, where, s, bias);
}

}  // namespace tandem::backend::cpu
