#pragma once

// PNG and JPEG files as 8-bit pixels, for the image-folder source: a header read (size and
// channels, without the pixels) when the folder is opened, and a decode when an example is
// read. PNG through libpng's full API (not its simplified png_image_* one, which corrects
// gamma from gAMA chunks and treats 16-bit files as linear: its 8-bit values would not be
// the ones PIL, and so torchvision, reads), JPEG through libjpeg-turbo's libjpeg API (the
// library Debian's PIL links: the same pixels as PIL's decode). Errors are words without
// the file's name (the caller names it); every function is safe on any thread.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tandem::runtime::data {

enum class ImageFormat { kPng, kJpeg };

struct ImageHeader {
  ImageFormat format = ImageFormat::kPng;
  int64_t height = 0, width = 0;
  /// 1: grayscale (PNG gray or gray+alpha, any depth; a JPEG of one component); 3: RGB
  /// (PNG RGB, RGBA or palette; a YCbCr or RGB JPEG).
  int channels = 0;
  bool operator==(const ImageHeader&) const = default;
};

/// The largest image read, in pixels (a damaged header must not ask for terabytes).
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 26;

/// Which format the file's first bytes say (PNG's 8-byte signature, JPEG's FF D8 FF), or
/// an error "not a PNG or JPEG file".
absl::StatusOr<ImageFormat> imageFormatOf(absl::Span<const uint8_t> start);

/// The header of the image file open as `fd` (of `file_size` bytes), read with pread: a
/// PNG's IHDR chunk (33 bytes), a JPEG's markers up to its first scan (libjpeg's
/// jpeg_read_header over the first 64 KiB, or the whole file when its headers are longer).
/// "corrupt PNG: ...", "corrupt JPEG: ...", "a CMYK JPEG ...".
absl::StatusOr<ImageHeader> readImageHeader(int fd, int64_t file_size);

/// The header of an image file read whole (as readImageHeader, from memory).
absl::StatusOr<ImageHeader> imageHeaderOf(absl::Span<const uint8_t> bytes);

/// Decodes a whole file's bytes into `pixels`: height * width * header.channels bytes,
/// row-major and interleaved, as PIL's mode L or RGB holds them (alpha dropped, as PIL's
/// convert does; a palette expanded to RGB; PNG samples of 1, 2 or 4 bits scaled to 8 as
/// PIL does; 16-bit samples reduced to their high byte, as PIL reads 16-bit RGB). An error
/// when the bytes are not a valid image of exactly `header` (the file changed since).
absl::Status decodeImage(absl::Span<const uint8_t> bytes, const ImageHeader& header,
                         std::vector<uint8_t>& pixels);

}  // namespace tandem::runtime::data
