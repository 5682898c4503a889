#include "runtime/data/idx_reader.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/file_input.h"

namespace tandem::runtime::data {
namespace {

// IDX magic numbers are big-endian: two zero bytes, a type byte (0x08 = unsigned byte),
// and the number of dimensions.
constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;
// Reading goes through a bounded buffer so that a header that lies about its size gives a
// "truncated" error rather than a huge allocation up front.
constexpr int64_t kChunkBytes = int64_t{1} << 20;
// No sane image is bigger; keeps count * rows * cols far from overflowing int64.
constexpr int64_t kMaxImagePixels = int64_t{1} << 24;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

std::string hex32(uint32_t v) { return absl::StrFormat("0x%08x", v); }

const char* magicMeaning(uint32_t magic) {
  return magic == kImagesMagic ? "IDX unsigned-byte images" : "IDX unsigned-byte labels";
}

// A well-formed IDX magic number of any element type, as opposed to bytes that are not IDX.
bool isIdxMagic(uint32_t magic) {
  const uint32_t type = (magic >> 8) & 0xff;
  const uint32_t ndim = magic & 0xff;
  const bool known_type = type == 0x08 || type == 0x09 || (type >= 0x0b && type <= 0x0e);
  return (magic >> 16) == 0 && known_type && ndim >= 1 && ndim <= 8;
}

// What went wrong in a gzip stream after a short or failed read.
struct GzError {
  int code = Z_OK;   // Z_OK when the stream simply ended
  std::string text;  // zlib's message without the path zlib puts in front
  bool failed() const { return code != Z_OK && code != Z_STREAM_END; }
  // A gzip stream cut short reads as "unexpected end of file": that is truncation.
  bool corrupt() const { return failed() && code != Z_BUF_ERROR; }
  // What to call a failure: the system's read error, or bad compressed data.
  const char* kind() const { return code == Z_ERRNO ? "read error" : "corrupt gzip data"; }
};

GzError gzErrorOf(gzFile f, const std::string& path) {
  GzError e;
  const char* msg = gzerror(f, &e.code);
  if (!e.failed()) return e;
  if (e.code == Z_ERRNO) {
    e.text = std::strerror(errno);
    return e;
  }
  e.text = msg != nullptr ? msg : "unknown zlib error";
  // zlib prefixes the name it was opened with: the path, or "<fd:N>" for gzdopen's.
  const std::string prefix = path + ": ";
  if (e.text.compare(0, prefix.size(), prefix) == 0) e.text.erase(0, prefix.size());
  if (e.text.compare(0, 4, "<fd:") == 0)
    if (size_t end = e.text.find(">: "); end != std::string::npos) e.text.erase(0, end + 3);
  return e;
}

// Reads up to `bytes` bytes; returns how many arrived, or -1 on a read/decompression error.
int64_t readUpTo(gzFile f, void* dst, int64_t bytes) {
  int64_t got = 0;
  auto* out = static_cast<unsigned char*>(dst);
  while (got < bytes) {
    const unsigned want = static_cast<unsigned>(std::min<int64_t>(bytes - got, kChunkBytes));
    const int n = gzread(f, out + got, want);
    if (n < 0) return -1;
    if (n == 0) break;
    got += n;
  }
  return got;
}

struct IdxHeader {
  GzFile file;
  std::vector<int64_t> dims;
};

// Opens an IDX file (gzip or plain) and checks its magic number and dimensions.
absl::StatusOr<IdxHeader> openIdx(const std::string& path, uint32_t expected_magic) {
  // Regular files only, opened without blocking (ir/file_input.h): a FIFO or a device
  // named as a data file would block at open or never end.
  const absl::StatusOr<int> fd = ir::openRegularFile(path, {path, "an IDX file"});
  if (!fd.ok()) return fd.status();
  errno = 0;
  GzFile file(gzdopen(*fd, "rb"));
  if (file == nullptr) {
    const int err = errno;
    ::close(*fd);
    if (err == 0) return absl::ResourceExhaustedError(absl::StrCat(path, ": cannot open"));
    return absl::Status(absl::ErrnoToStatusCode(err),
                        absl::StrCat(path, ": cannot open: ", std::strerror(err)));
  }
  gzbuffer(file.get(), 1 << 17);

  std::array<unsigned char, 4> m{};
  const int64_t got = readUpTo(file.get(), m.data(), 4);
  if (got < 0) {
    const GzError e = gzErrorOf(file.get(), path);
    return absl::DataLossError(absl::StrCat(path, ": ", e.kind(), " (", e.text, ")"));
  }
  const uint32_t magic = (uint32_t{m[0]} << 24) | (uint32_t{m[1]} << 16) |
                         (uint32_t{m[2]} << 8) | uint32_t{m[3]};
  if (got < 4 || !isIdxMagic(magic)) {
    return absl::DataLossError(absl::StrCat(path, ": not a gzip/IDX file"));
  }
  if (magic != expected_magic) {
    return absl::DataLossError(absl::StrCat(path, ": bad magic number ", hex32(magic),
                                            ", expected ", hex32(expected_magic), " (",
                                            magicMeaning(expected_magic), ")"));
  }

  const int ndim = static_cast<int>(magic & 0xff);
  std::vector<unsigned char> raw(4 * ndim);
  if (readUpTo(file.get(), raw.data(), 4 * ndim) != 4 * ndim) {
    return absl::DataLossError(
        absl::StrCat(path, ": truncated: the file ends inside the IDX header"));
  }
  IdxHeader header{std::move(file), {}};
  for (int d = 0; d < ndim; ++d) {
    const unsigned char* b = &raw[4 * d];
    header.dims.push_back((int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) |
                          int64_t{b[3]});
  }
  return header;
}

// Reads `items` items of `item_bytes` each, handing each chunk to `consume(data, bytes)`.
// Returns the number of whole items read; `error` says why the stream stopped early.
template <typename Consume>
int64_t readItems(gzFile f, const std::string& path, int64_t items, int64_t item_bytes,
                  GzError& error, Consume consume) {
  std::vector<unsigned char> buffer(
      static_cast<size_t>(std::min(items * item_bytes, std::max(kChunkBytes, item_bytes))));
  const int64_t total = items * item_bytes;
  int64_t done = 0;
  while (done < total) {
    const int64_t want = std::min<int64_t>(total - done, static_cast<int64_t>(buffer.size()));
    const int64_t got = readUpTo(f, buffer.data(), want);
    if (got < 0) {
      error = gzErrorOf(f, path);
      break;
    }
    consume(buffer.data(), got);
    done += got;
    if (got < want) {
      error = gzErrorOf(f, path);
      break;
    }
  }
  return done / item_bytes;
}

// After a complete body, reads on to the end of the gzip stream so that its CRC is checked;
// bytes after the body are ignored.
absl::Status checkStreamEnd(gzFile f, const std::string& path) {
  std::array<unsigned char, 4096> sink{};
  for (;;) {
    const int n = gzread(f, sink.data(), sink.size());
    if (n < 0) {
      const GzError e = gzErrorOf(f, path);
      return absl::DataLossError(absl::StrCat(path, ": ", e.kind(), " (", e.text, ")"));
    }
    if (n == 0) {
      // zlib ends a stream cut inside its 8-byte trailer (the CRC that vouches for every
      // byte read) with no data and no -1: only its error code says so.
      const GzError e = gzErrorOf(f, path);
      if (e.failed())
        return absl::DataLossError(absl::StrCat(
            path, ": truncated: the gzip stream ends before its checksum (", e.text, ")"));
      return absl::OkStatus();
    }
  }
}

std::string streamNote(const GzError& error) {
  return error.failed() ? absl::StrCat(" (gzip: ", error.text, ")") : "";
}

// Why a read of a file's `items` (" labels", " images of 28x28") stopped after `got` of the
// `count` its header says: bad compressed data or a read error, else a file cut short.
absl::Status shortRead(const std::string& path, const GzError& error, int64_t count, int64_t got,
                       const std::string& items) {
  // No count for corrupt data: zlib drops the output of the read that found the error.
  if (error.corrupt())
    return absl::DataLossError(absl::StrCat(path, ": ", error.kind(), " (", error.text, ")"));
  return absl::DataLossError(absl::StrCat(path, ": truncated: header says ", count, items,
                                          " but the file ends after ", got, " of them",
                                          streamNote(error)));
}

// After the `keep` items a run uses, the file's other items are read and dropped and the
// stream's end checked (its gzip CRC): a file cut short or corrupt past the limit is as
// damaged as one cut before it, and a run with --limit-train must not pass it as whole.
absl::Status checkRest(gzFile f, const std::string& path, int64_t count, int64_t keep,
                       int64_t item_bytes, const std::string& items) {
  if (keep < count) {
    GzError error;
    const int64_t got =
        readItems(f, path, count - keep, item_bytes, error, [](const unsigned char*, int64_t) {});
    if (got < count - keep) return shortRead(path, error, count, keep + got, items);
  }
  return checkStreamEnd(f, path);
}

}  // namespace

absl::StatusOr<Dataset> readIdxPair(const std::string& images_path,
                                    const std::string& labels_path, int64_t limit,
                                    int32_t classes) {
  absl::StatusOr<IdxHeader> images = openIdx(images_path, kImagesMagic);
  if (!images.ok()) return images.status();
  absl::StatusOr<IdxHeader> labels = openIdx(labels_path, kLabelsMagic);
  if (!labels.ok()) return labels.status();

  const int64_t count = images->dims[0], rows = images->dims[1], cols = images->dims[2];
  if (rows <= 0 || cols <= 0 || rows * cols > kMaxImagePixels) {
    return absl::DataLossError(
        absl::StrCat(images_path, ": implausible image size ", rows, "x", cols, " in header"));
  }
  const int64_t label_count = labels->dims[0];
  if (count != label_count) {
    return absl::InvalidArgumentError(absl::StrCat("image/label count mismatch: ", images_path,
                                                   " has ", count, " images, ", labels_path,
                                                   " has ", label_count, " labels"));
  }
  const int64_t keep = limit > 0 ? std::min(limit, count) : count;

  Dataset data;
  data.rows = rows;
  data.cols = cols;
  data.source = images_path;
  data.labels_source = labels_path;
  data.classes = classes;
  data.available = count;

  // Division, not multiplication by 1/255, so that 255 maps to exactly 1.0f.
  std::array<float, 256> scale{};
  for (int v = 0; v < 256; ++v) scale[v] = static_cast<float>(v) / 255.0f;
  const int64_t pixels = rows * cols;
  data.images.reserve(static_cast<size_t>(std::min(keep * pixels, kChunkBytes * 64)));
  GzError error;
  const int64_t got_images = readItems(images->file.get(), images_path, keep, pixels, error,
                                       [&](const unsigned char* p, int64_t n) {
                                         const size_t at = data.images.size();
                                         data.images.resize(at + n);
                                         float* out = data.images.data() + at;
                                         for (int64_t i = 0; i < n; ++i) out[i] = scale[p[i]];
                                       });
  const std::string image_items = absl::StrCat(" images of ", rows, "x", cols);
  if (got_images < keep) return shortRead(images_path, error, count, got_images, image_items);
  if (absl::Status s = checkRest(images->file.get(), images_path, count, keep, pixels, image_items);
      !s.ok())
    return s;

  data.labels.reserve(static_cast<size_t>(keep));
  error = GzError();
  const int64_t got_labels = readItems(labels->file.get(), labels_path, keep, 1, error,
                                       [&](const unsigned char* p, int64_t n) {
                                         data.labels.insert(data.labels.end(), p, p + n);
                                       });
  if (got_labels < keep) return shortRead(labels_path, error, count, got_labels, " labels");
  if (absl::Status s = checkRest(labels->file.get(), labels_path, count, keep, 1, " labels");
      !s.ok())
    return s;
  for (int64_t i = 0; i < keep; ++i) {
    if (data.labels[i] < 0 || data.labels[i] >= classes) {
      return absl::DataLossError(absl::StrCat(labels_path, ": label ", data.labels[i],
                                              " at index ", i, " is out of range [0, ", classes,
                                              ")"));
    }
  }
  data.count = keep;
  return data;
}

}  // namespace tandem::runtime::data
