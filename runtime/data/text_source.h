#pragma once

// Text as token ids: bytes (ids 0..255) or the file's distinct characters, as nanoGPT's
// shakespeare_char builds its vocabulary (sorted by code point).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/data/token_source.h"

namespace tandem::runtime::data {

/// Ids to text and back, for the samples a trained model writes.
class TextVocabulary {
 public:
  /// Ids 0..255 are bytes.
  static TextVocabulary bytes();
  /// The distinct characters of UTF-8 `text`, sorted by code point; id i is the i-th.
  /// Invalid UTF-8 is an error naming its byte offset.
  static absl::StatusOr<TextVocabulary> characters(absl::string_view text);

  bool isBytes() const { return bytes_; }
  int64_t size() const { return bytes_ ? 256 : static_cast<int64_t>(chars_.size()); }
  /// The characters (code points) of a character vocabulary, by id; empty for bytes.
  const std::vector<char32_t>& chars() const { return chars_; }
  /// The text of `ids`; an id outside the vocabulary is U+FFFD.
  std::string decode(absl::Span<const int32_t> ids) const;
  /// The ids of `text`; a character outside the vocabulary is an error naming it.
  absl::StatusOr<std::vector<int32_t>> encode(absl::string_view text) const;

 private:
  bool bytes_ = true;
  std::vector<char32_t> chars_;
};

struct TextOptions {
  /// Tokens per example (the model's context length); required (> 0).
  int64_t length = 0;
  /// > 0: the vocabulary must fit in it (the model's embedding).
  int64_t vocabulary = 0;
  /// Bytes as ids (any file) instead of characters (UTF-8 text).
  bool bytes = false;
  /// The largest file read (it is held in memory as ids).
  int64_t max_bytes = int64_t{1} << 30;
};

/// A text file as windows of token ids (TokenSource's fields and draws). where() is
/// "text:PATH".
class TextSource : public TokenSource {
 public:
  static absl::StatusOr<std::unique_ptr<TextSource>> open(const std::string& path,
                                                          const TextOptions& options);
  const TextVocabulary& vocabulary() const { return *vocabulary_; }
  std::shared_ptr<const TextVocabulary> sharedVocabulary() const { return vocabulary_; }

 protected:
  std::unique_ptr<TokenSource> copy() const override {
    return std::unique_ptr<TokenSource>(new TextSource(*this));
  }

 private:
  TextSource(std::string path, std::string prefix, std::shared_ptr<const std::vector<uint16_t>> ids,
             int64_t length, std::shared_ptr<const TextVocabulary> vocabulary);
  TextSource(std::string path, std::string prefix, std::shared_ptr<const std::vector<uint32_t>> ids,
             int64_t length, std::shared_ptr<const TextVocabulary> vocabulary);
  std::shared_ptr<const TextVocabulary> vocabulary_;
};

}  // namespace tandem::runtime::data
