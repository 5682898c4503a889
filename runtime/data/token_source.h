#pragma once

// Token ids as a source, as nanoGPT reads its train.bin: a flat file of uint16 or uint32 ids
// (only the windows being read are in memory), read as random windows of a given length. And text
// (text_source.h), a file read as byte or character ids, windowed the same way.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/data/example_source.h"
#include "runtime/data/mapped_file.h"

namespace tandem::runtime::data {

struct TokenOptions {
  /// Tokens per example (the model's context length); required (> 0).
  int64_t length = 0;
  /// > 0: every id read is checked to be below it (the model's vocabulary).
  int64_t vocabulary = 0;
  /// Bytes per id in the file: 2 (uint16, nanoGPT's) or 4 (uint32).
  int width = 2;
};

/// Fields x: i32[length] and y: i32[length], y being x shifted on by one token. Example i
/// of an epoch is the window at offset key.below(tokens - length, kTokenWindowDraw): a
/// function of the example's key alone (not of `index`), so every device split and resume
/// sees the same windows. size() is (tokens - 1) / length windows per epoch. An id at or
/// beyond the vocabulary is an error naming the file and the id's offset (found when a
/// window holding it is read: a file of billions of tokens is not scanned when opened).
class TokenSource : public ExampleSource {
 public:
  static absl::StatusOr<std::unique_ptr<TokenSource>> open(const std::string& path,
                                                           const TokenOptions& options);

  std::string where() const override { return where_; }
  int64_t size() const override {
    return epoch_windows_ > 0 ? epoch_windows_ : (tokens_ - 1) / length_;
  }
  const std::vector<Field>& fields() const override { return fields_; }
  /// y holds ids of the vocabulary (when the source was given one): the labels of a
  /// language model's classes.
  std::pair<std::string, int64_t> classLabels() const override {
    return vocabulary_ > 0 ? std::pair<std::string, int64_t>{"y", vocabulary_}
                           : std::pair<std::string, int64_t>{"", 0};
  }
  absl::Status read(int64_t index, const ExampleKey& key,
                    absl::Span<void* const> out) const override;

  /// Token ids in the file (in this range of it), and the window's length.
  int64_t tokens() const { return tokens_; }
  int64_t length() const { return length_; }
  /// The windows of tokens [begin, end) of this source only: a corpus' held-out tail (its
  /// last tenth, as nanoGPT splits its text), no window crossing into the rest. `what`
  /// ("validation") goes into where(). An error when the range holds no window.
  absl::StatusOr<std::unique_ptr<TokenSource>> range(int64_t begin, int64_t end,
                                                     absl::string_view what) const;
  /// This source with `windows` (>= 1) windows an epoch instead of (tokens - 1) / length:
  /// training by steps, an epoch being the steps between evaluations. Windows are drawn
  /// by their key alone, so any count reads the corpus alike.
  std::unique_ptr<TokenSource> withEpochWindows(int64_t windows) const;

 protected:
  /// A copy of this source, of its own class (a text keeps its vocabulary).
  virtual std::unique_ptr<TokenSource> copy() const {
    return std::unique_ptr<TokenSource>(new TokenSource(*this));
  }

 public:
 protected:
  /// `ids`: `tokens` ids of `width` bytes (2 or 4) in memory, kept alive by `owner`; or,
  /// when `file` is given, in that file from its start (read with pread, as NumpySource
  /// reads examples: mapped_file.h says why). `prefix` starts every message
  /// ("tokens file 'PATH': ").
  TokenSource(std::string where, std::string prefix, std::shared_ptr<const void> owner,
              const char* ids, int width, int64_t tokens, int64_t length, int64_t vocabulary,
              std::shared_ptr<const MappedFile> file);
  /// The checks common to tokens and text: a window fits, ids fit i32.
  static absl::Status checkCounts(const std::string& prefix, int64_t tokens, int64_t length);

 private:
  std::string where_, prefix_;
  std::shared_ptr<const void> owner_;
  const char* ids_;
  int width_;
  int64_t tokens_, length_, vocabulary_;
  int64_t first_ = 0;          // the range's first token in the file
  int64_t epoch_windows_ = 0;  // > 0: windows an epoch (withEpochWindows)
  std::shared_ptr<const MappedFile> file_;
  std::vector<Field> fields_;
};

}  // namespace tandem::runtime::data
