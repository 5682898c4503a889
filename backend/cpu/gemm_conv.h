#pragma once

// Convolutions as matrix products over im2col copies (im2col.h), on oneDNN's matmul (its
// brgemm kernels on AVX-512), a chunk of images at a time: ConvStrategy::kGemm
// (conv_kernels.cc says where it wins). oneDNN 2.6's own GEMM convolution (kPlain) makes a
// product per image (LeNet's conv2: 50 x 81 outputs over 500 taps) with its older sgemm;
// a chunk of images makes the products wide enough for the brgemm kernels:
//   forward          y[chunk] = W * cols[chunk]
//   backward data    dcols[chunk] = W^T * dy[chunk], then col2im adds them onto dx
//   backward filter  dW += dy[chunk] * cols[chunk]^T, so that each product sums over
//                    pixels x images and dW is read and written once per chunk
// The chunk's images are side by side (row r of a chunk's matrix holds image i's pixels at
// i * pixels; the outputs copied apart after the product) where a product per image
// would leave a sizeable part of its vectors idle (LeNet's conv2: 81 pixels), else each
// image is a batch entry of its own, W shared (gemm_conv.cc, sideBySideProducts).
// f32, groups 1, plain (NCHW) activations: the caller checks gemmConvApplies.

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/im2col.h"
#include "backend/cpu/kernels.h"

namespace tandem::backend::cpu {

/// A batch's convolution: n images through `window`, o output channels.
struct GemmConvShape {
  int64_t n, o;
  ConvWindow window;
};

/// The kernel of one pass. An exact program may be attached for the runs whose watched
/// operands hold NaN or infinities, which a product over zero padding mishandles (0 * inf:
/// conv_kernels.cc, nonFiniteHazards), as ProgramKernel's (ExactFallback).
class GemmConvKernel : public CpuKernel {
 public:
  void setExact(DnnlProgram exact, std::vector<size_t> watched) {
    exact_.emplace(std::move(exact), std::move(watched));
  }

 protected:
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) final {
    if (exact_ && exact_->ranExact(in, out)) return;
    run(in, out);
  }
  virtual void run(absl::Span<const TensorView> in, absl::Span<const TensorView> out) = 0;

 private:
  std::optional<ExactFallback> exact_;
};

/// conv2d (x, w, b? -> y); `bias` whether the node has b.
absl::StatusOr<std::unique_ptr<GemmConvKernel>> makeGemmConvForward(CpuContext& ctx,
                                                                    const GemmConvShape& s,
                                                                    bool bias,
                                                                    absl::string_view where);
/// conv2d_backward_data (dy, w, x -> dx).
absl::StatusOr<std::unique_ptr<GemmConvKernel>> makeGemmConvBackwardData(CpuContext& ctx,
                                                                         const GemmConvShape& s,
                                                                         absl::string_view where);
/// conv2d_backward_filter (dy, x, w -> dw, db?); `bias` whether it writes db.
absl::StatusOr<std::unique_ptr<GemmConvKernel>> makeGemmConvBackwardFilter(CpuContext& ctx,
                                                                           const GemmConvShape& s,
                                                                           bool bias,
                                                                           absl::string_view where);

}  // namespace tandem::backend::cpu
