#include "runtime/data/image_codec.h"

#include <jpeglib.h>
// jpeglib.h first: jerror.h uses its types.
#include <jerror.h>
#include <png.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem::runtime::data {
namespace {

constexpr uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
constexpr int64_t kJpegHeaderPrefix = 64 << 10;

absl::Status corrupt(ImageFormat f, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(f == ImageFormat::kPng ? "corrupt PNG: " : "corrupt JPEG: ", why));
}

// Reads exactly `n` bytes at `offset`, or fewer when the file ends: the count read.
absl::StatusOr<int64_t> preadUpTo(int fd, int64_t offset, int64_t n, uint8_t* dst) {
  int64_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, dst + done, static_cast<size_t>(n - done), offset + done);
    if (got < 0) {
      if (errno == EINTR) continue;
      return absl::InvalidArgumentError(absl::StrCat("cannot read it: ", std::strerror(errno)));
    }
    if (got == 0) break;
    done += got;
  }
  return done;
}

uint32_t bigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

absl::Status checkPixels(ImageFormat f, int64_t h, int64_t w) {
  if (h <= 0 || w <= 0) return corrupt(f, absl::StrCat("a size of ", h, "x", w, " pixels"));
  if (h * w > kMaxImagePixels)
    return absl::InvalidArgumentError(absl::StrCat(h, "x", w, " pixels is more than the ",
                                                   kMaxImagePixels, " an image may have"));
  return absl::OkStatus();
}

// The IHDR chunk, which the PNG standard puts first: size, bit depth and color type.
absl::StatusOr<ImageHeader> pngHeader(absl::Span<const uint8_t> start) {
  if (start.size() < 33) return corrupt(ImageFormat::kPng, "the file ends early");
  const uint8_t* b = start.data();
  if (bigEndian32(b + 8) != 13 || std::memcmp(b + 12, "IHDR", 4) != 0)
    return corrupt(ImageFormat::kPng, "the first chunk is not a 13-byte IHDR");
  if (crc32(crc32(0, nullptr, 0), b + 12, 17) != bigEndian32(b + 29))
    return corrupt(ImageFormat::kPng, "IHDR: CRC error");
  const int depth = b[24], color = b[25];
  const bool valid =
      (color == 0 && (depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16)) ||
      (color == 3 && (depth == 1 || depth == 2 || depth == 4 || depth == 8)) ||
      ((color == 2 || color == 4 || color == 6) && (depth == 8 || depth == 16));
  if (!valid)
    return corrupt(ImageFormat::kPng,
                   absl::StrCat("IHDR: bit depth ", depth, " with color type ", color));
  ImageHeader h{.format = ImageFormat::kPng,
                .height = bigEndian32(b + 20),
                .width = bigEndian32(b + 16),
                .channels = color == 0 || color == 4 ? 1 : 3};
  if (absl::Status s = checkPixels(ImageFormat::kPng, h.height, h.width); !s.ok()) return s;
  return h;
}

// libjpeg reports errors by calling error_exit, which must not return: it jumps back to
// the setjmp of the function that called libjpeg. Only C objects live in the frames it
// jumps over (the libjpeg calls and the functions below, which hold no C++ object).
struct JpegErrors {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpegErrorExit(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegErrors*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings are damage libjpeg decodes around, as PIL lets it; but a file that ends early
// (libjpeg would fill the rest with gray) is an error, as PIL's "image file is truncated".
void jpegEmitMessage(j_common_ptr c, int level) {
  if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) jpegErrorExit(c);
}

struct JpegResult {
  int height, width, components;
  J_COLOR_SPACE color_space;
};

// Reads the header, and when `out` is not null decodes into it (rows of `row_bytes`,
// `channels` of 1 or 3; the image must be `expect_h` x `expect_w`). False with `message`
// on an error; `result` tells the header either way when it was read.
bool jpegRun(const uint8_t* data, size_t size, uint8_t* out, int channels, int expect_h,
             int expect_w, JpegResult* result, char* message) {
  jpeg_decompress_struct cinfo;
  JpegErrors errors;
  cinfo.err = jpeg_std_error(&errors.pub);
  errors.pub.error_exit = jpegErrorExit;
  errors.pub.emit_message = jpegEmitMessage;
  errors.message[0] = '\0';
  if (setjmp(errors.jump)) {
    std::snprintf(message, JMSG_LENGTH_MAX, "%s", errors.message);
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  *result = {static_cast<int>(cinfo.image_height), static_cast<int>(cinfo.image_width),
             cinfo.num_components, cinfo.jpeg_color_space};
  if (out != nullptr) {
    if (result->height != expect_h || result->width != expect_w) {
      std::snprintf(message, JMSG_LENGTH_MAX, "the image changed since the folder was opened");
      jpeg_destroy_decompress(&cinfo);
      return false;
    }
    cinfo.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&cinfo);
    while (cinfo.output_scanline < cinfo.output_height) {
      JSAMPROW row = out + static_cast<size_t>(cinfo.output_scanline) * expect_w * channels;
      jpeg_read_scanlines(&cinfo, &row, 1);
    }
  }
  jpeg_destroy_decompress(&cinfo);
  return true;
}

absl::StatusOr<ImageHeader> headerOfJpeg(const JpegResult& r) {
  ImageHeader h{.format = ImageFormat::kJpeg, .height = r.height, .width = r.width};
  if (r.color_space == JCS_GRAYSCALE && r.components == 1) {
    h.channels = 1;
  } else if ((r.color_space == JCS_YCbCr || r.color_space == JCS_RGB) && r.components == 3) {
    h.channels = 3;
  } else if (r.color_space == JCS_CMYK || r.color_space == JCS_YCCK) {
    return absl::InvalidArgumentError("a CMYK JPEG (only grayscale and RGB images are read)");
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "a JPEG of ", r.components, " components (only grayscale and RGB images are read)"));
  }
  if (absl::Status s = checkPixels(ImageFormat::kJpeg, h.height, h.width); !s.ok()) return s;
  return h;
}

absl::StatusOr<ImageHeader> jpegHeader(int fd, int64_t file_size) {
  // Most files' headers lie in their first 64 KiB; one whose EXIF or ICC data is longer
  // fails to parse there and is read whole.
  std::vector<uint8_t> bytes(static_cast<size_t>(std::min(file_size, kJpegHeaderPrefix)));
  for (;;) {
    absl::StatusOr<int64_t> n = preadUpTo(fd, 0, static_cast<int64_t>(bytes.size()), bytes.data());
    if (!n.ok()) return n.status();
    bytes.resize(static_cast<size_t>(*n));
    JpegResult r{};
    char message[JMSG_LENGTH_MAX];
    if (jpegRun(bytes.data(), bytes.size(), nullptr, 0, 0, 0, &r, message)) return headerOfJpeg(r);
    if (static_cast<int64_t>(bytes.size()) >= file_size)
      return corrupt(ImageFormat::kJpeg, message);
    bytes.resize(static_cast<size_t>(file_size));
  }
}

// libpng reports errors by calling its error function, which must not return: it jumps
// back to pngRun's setjmp (over libpng's C frames and pngReadBytes, which holds no C++
// object).
struct PngInput {
  const uint8_t* data;
  size_t size, pos;
  char message[256];
};

void pngError(png_structp png, png_const_charp why) {
  auto* in = static_cast<PngInput*>(png_get_error_ptr(png));
  std::snprintf(in->message, sizeof in->message, "%s", why);
  png_longjmp(png, 1);
}

void pngWarning(png_structp, png_const_charp) {}  // damage libpng reads around, as PIL does

void pngReadBytes(png_structp png, png_bytep out, size_t n) {
  auto* in = static_cast<PngInput*>(png_get_io_ptr(png));
  if (n > in->size - in->pos) png_error(png, "the file ends early");
  std::memcpy(out, in->data + in->pos, n);
  in->pos += n;
}

// Decodes into `rows` (height of them, each width * channels bytes). False with
// in->message on an error.
bool pngRun(PngInput* in, png_bytep* rows, int channels, uint32_t expect_h, uint32_t expect_w) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, in, pngError, pngWarning);
  if (png == nullptr) {
    std::snprintf(in->message, sizeof in->message, "out of memory");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
    return false;
  }
  png_set_read_fn(png, in, pngReadBytes);
  png_read_info(png, info);
  const int color = png_get_color_type(png, info);
  const int gray = color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA;
  if (png_get_image_height(png, info) != expect_h || png_get_image_width(png, info) != expect_w ||
      (gray ? 1 : 3) != channels)
    png_error(png, "the image changed since the folder was opened");
  // To PIL's mode L or RGB: 8 bits (16-bit samples' high byte), palette to RGB, no alpha.
  png_set_strip_16(png);
  png_set_packing(png);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY) png_set_expand_gray_1_2_4_to_8(png);
  png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != static_cast<size_t>(expect_w) * channels)
    png_error(png, "unexpected row size after conversion");
  png_read_image(png, rows);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

}  // namespace

absl::StatusOr<ImageFormat> imageFormatOf(absl::Span<const uint8_t> start) {
  if (start.size() >= 8 && std::memcmp(start.data(), kPngSignature, 8) == 0)
    return ImageFormat::kPng;
  if (start.size() >= 3 && start[0] == 0xff && start[1] == 0xd8 && start[2] == 0xff)
    return ImageFormat::kJpeg;
  return absl::InvalidArgumentError("not a PNG or JPEG file");
}

absl::StatusOr<ImageHeader> imageHeaderOf(absl::Span<const uint8_t> bytes) {
  absl::StatusOr<ImageFormat> format = imageFormatOf(bytes);
  if (!format.ok()) return format.status();
  if (*format == ImageFormat::kPng) return pngHeader(bytes);
  JpegResult r{};
  char message[JMSG_LENGTH_MAX];
  if (!jpegRun(bytes.data(), bytes.size(), nullptr, 0, 0, 0, &r, message))
    return corrupt(ImageFormat::kJpeg, message);
  return headerOfJpeg(r);
}

absl::StatusOr<ImageHeader> readImageHeader(int fd, int64_t file_size) {
  uint8_t start[33];  // as much as a PNG's signature and IHDR chunk
  absl::StatusOr<int64_t> n = preadUpTo(fd, 0, sizeof start, start);
  if (!n.ok()) return n.status();
  const absl::Span<const uint8_t> read(start, static_cast<size_t>(*n));
  absl::StatusOr<ImageFormat> format = imageFormatOf(read);
  if (!format.ok()) return format.status();
  return *format == ImageFormat::kPng ? pngHeader(read) : jpegHeader(fd, file_size);
}

absl::Status decodeImage(absl::Span<const uint8_t> bytes, const ImageHeader& header,
                         std::vector<uint8_t>& pixels) {
  absl::StatusOr<ImageFormat> format = imageFormatOf(bytes);
  if (!format.ok()) return format.status();
  if (*format != header.format)
    return corrupt(header.format, "the file changed since the folder was opened");
  const size_t row = static_cast<size_t>(header.width) * header.channels;
  pixels.resize(row * static_cast<size_t>(header.height));
  if (header.format == ImageFormat::kJpeg) {
    JpegResult r{};
    char message[JMSG_LENGTH_MAX];
    if (!jpegRun(bytes.data(), bytes.size(), pixels.data(), header.channels,
                 static_cast<int>(header.height), static_cast<int>(header.width), &r, message))
      return corrupt(ImageFormat::kJpeg, message);
    return absl::OkStatus();
  }
  std::vector<png_bytep> rows(static_cast<size_t>(header.height));
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = pixels.data() + i * row;
  PngInput in{bytes.data(), bytes.size(), 0, {}};
  if (!pngRun(&in, rows.data(), header.channels, static_cast<uint32_t>(header.height),
              static_cast<uint32_t>(header.width)))
    return corrupt(ImageFormat::kPng, in.message);
  return absl::OkStatus();
}

}  // namespace tandem::runtime::data
