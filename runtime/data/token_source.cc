#include "runtime/data/token_source.h"

#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/data/draws.h"

namespace tandem::runtime::data {

TokenSource::TokenSource(std::string where, std::string prefix, std::shared_ptr<const void> owner,
                         const char* ids, int width, int64_t tokens, int64_t length,
                         int64_t vocabulary, std::shared_ptr<const MappedFile> file)
    : where_(std::move(where)),
      prefix_(std::move(prefix)),
      owner_(std::move(owner)),
      ids_(ids),
      width_(width),
      tokens_(tokens),
      length_(length),
      vocabulary_(vocabulary),
      file_(std::move(file)) {
  fields_ = {Field{"x", ir::DType::kI32, {length}}, Field{"y", ir::DType::kI32, {length}}};
}

absl::Status TokenSource::checkCounts(const std::string& prefix, int64_t tokens, int64_t length) {
  if (length <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "no window length (the model's context length, or :length=N)"));
  if (tokens == 0) return absl::InvalidArgumentError(absl::StrCat(prefix, "empty file, no tokens"));
  if (tokens < length + 1)
    return absl::InvalidArgumentError(absl::StrCat(prefix, "holds ", tokens,
                                                   " tokens, fewer than one window of ", length,
                                                   " and the token after it"));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TokenSource>> TokenSource::open(const std::string& path,
                                                               const TokenOptions& options) {
  const std::string what = absl::StrCat("tokens file '", path, "'");
  const std::string prefix = what + ": ";
  if (options.width != 2 && options.width != 4)
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "ids of ", options.width, " bytes (u16 or u32 are read)"));
  absl::StatusOr<std::shared_ptr<MappedFile>> file =
      MappedFile::open(path, {what, "a tokens file"});
  if (!file.ok()) return file.status();
  const int64_t bytes = (*file)->size();
  if (bytes % options.width != 0)
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, bytes, " bytes is not a whole number of ",
                     options.width == 2 ? "u16" : "u32", " token ids (:u16 or :u32 says which)"));
  const int64_t tokens = bytes / options.width;
  if (absl::Status s = checkCounts(prefix, tokens, options.length); !s.ok()) return s;
  std::shared_ptr<const MappedFile> mapped = *file;
  return std::unique_ptr<TokenSource>(new TokenSource(absl::StrCat("tokens:", path), prefix, mapped,
                                                      mapped->data(), options.width, tokens,
                                                      options.length, options.vocabulary, mapped));
}

absl::StatusOr<std::unique_ptr<TokenSource>> TokenSource::range(int64_t begin, int64_t end,
                                                                absl::string_view what) const {
  if (begin < 0 || end > tokens_ || begin >= end)
    return absl::InvalidArgumentError(
        absl::StrCat(prefix_, "tokens ", begin, " to ", end, " are not a range of its ", tokens_));
  if (absl::Status s = checkCounts(absl::StrCat(prefix_, what, " part: "), end - begin, length_);
      !s.ok())
    return s;
  std::unique_ptr<TokenSource> part = copy();
  part->first_ = first_ + begin;
  part->tokens_ = end - begin;
  part->where_ =
      absl::StrCat(where_, " (", what, ": tokens ", first_ + begin, " to ", first_ + end, ")");
  return part;
}

std::unique_ptr<TokenSource> TokenSource::withEpochWindows(int64_t windows) const {
  std::unique_ptr<TokenSource> s = copy();
  s->epoch_windows_ = windows;
  return s;
}

absl::Status TokenSource::read(int64_t index, const ExampleKey& key,
                               absl::Span<void* const> out) const {
  if (index < 0 || index >= size())
    return absl::OutOfRangeError(
        absl::StrCat(where_, ": example ", index, " is beyond its ", size(), " windows"));
  const int64_t offset =
      static_cast<int64_t>(key.below(static_cast<uint64_t>(tokens_ - length_), kTokenWindowDraw));
  // The window and the token after it.
  const int64_t bytes = (length_ + 1) * width_;
  const char* ids = ids_ + (first_ + offset) * width_;
  thread_local std::vector<char> window;
  if (file_) {
    window.resize(static_cast<size_t>(bytes));
    if (absl::Status s = file_->readAt((first_ + offset) * width_, bytes, window.data()); !s.ok())
      return absl::InvalidArgumentError(
          absl::StrCat(prefix_, "cannot read the window at offset ", offset, ": ", s.message()));
    ids = window.data();
  }
  const uint64_t bound = vocabulary_ > 0 ? static_cast<uint64_t>(vocabulary_)
                                         : uint64_t{std::numeric_limits<int32_t>::max()} + 1;
  auto* x = static_cast<int32_t*>(out[0]);
  auto* y = static_cast<int32_t*>(out[1]);
  for (int64_t i = 0; i <= length_; ++i) {
    uint32_t id;
    if (width_ == 2) {
      uint16_t v;
      std::memcpy(&v, ids + 2 * i, 2);
      id = v;
    } else {
      std::memcpy(&id, ids + 4 * i, 4);
    }
    if (id >= bound)
      return absl::InvalidArgumentError(
          vocabulary_ > 0
              ? absl::StrCat(prefix_, "token id ", id, " at offset ", first_ + offset + i,
                             " is beyond the vocabulary of ", vocabulary_)
              : absl::StrCat(prefix_, "token id ", id, " at offset ", first_ + offset + i,
                             " does not fit i32"));
    if (i < length_) x[i] = static_cast<int32_t>(id);
    if (i > 0) y[i - 1] = static_cast<int32_t>(id);
  }
  return absl::OkStatus();
}

}  // namespace tandem::runtime::data
