#include "runtime/data/text_source.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/file_input.h"

namespace tandem::runtime::data {
namespace {

// The code point at text[*at], advancing *at past it; -1 for bytes that are not UTF-8
// (overlong forms, surrogates and code points beyond U+10FFFF included).
int64_t nextCodePoint(absl::string_view text, size_t* at) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char b0 = byte(*at);
  if (b0 < 0x80) {
    ++*at;
    return b0;
  }
  int n;
  uint32_t cp;
  if ((b0 & 0xe0) == 0xc0) {
    n = 1;
    cp = b0 & 0x1f;
  } else if ((b0 & 0xf0) == 0xe0) {
    n = 2;
    cp = b0 & 0x0f;
  } else if ((b0 & 0xf8) == 0xf0) {
    n = 3;
    cp = b0 & 0x07;
  } else {
    return -1;
  }
  if (*at + n >= text.size()) return -1;  // cut off at the end
  for (int i = 1; i <= n; ++i) {
    if ((byte(*at + i) & 0xc0) != 0x80) return -1;
    cp = (cp << 6) | (byte(*at + i) & 0x3f);
  }
  static constexpr uint32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};
  if (cp < kSmallest[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return -1;
  *at += n + 1;
  return cp;
}

void appendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

template <typename Id>
std::shared_ptr<const std::vector<Id>> idsOf(absl::string_view text, const TextVocabulary& v) {
  auto ids = std::make_shared<std::vector<Id>>();
  if (v.isBytes()) {
    ids->resize(text.size());
    for (size_t i = 0; i < text.size(); ++i) (*ids)[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }
  ids->reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const auto cp = static_cast<char32_t>(nextCodePoint(text, &at));
    ids->push_back(static_cast<Id>(std::lower_bound(v.chars().begin(), v.chars().end(), cp) -
                                   v.chars().begin()));
  }
  return ids;
}

}  // namespace

TextVocabulary TextVocabulary::bytes() { return TextVocabulary(); }

absl::StatusOr<TextVocabulary> TextVocabulary::characters(absl::string_view text) {
  std::vector<bool> seen(0x110000);
  for (size_t at = 0; at < text.size();) {
    const size_t start = at;
    const int64_t cp = nextCodePoint(text, &at);
    if (cp < 0)
      return absl::InvalidArgumentError(
          absl::StrCat("not UTF-8 text at byte ", start, " (text:FILE:bytes reads any file)"));
    seen[static_cast<size_t>(cp)] = true;
  }
  TextVocabulary v;
  v.bytes_ = false;
  for (size_t cp = 0; cp < seen.size(); ++cp)
    if (seen[cp]) v.chars_.push_back(static_cast<char32_t>(cp));
  return v;
}

std::string TextVocabulary::decode(absl::Span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= size())
      appendUtf8(out, U'\uFFFD');
    else if (bytes_)
      out += static_cast<char>(id);
    else
      appendUtf8(out, chars_[static_cast<size_t>(id)]);
  }
  return out;
}

absl::StatusOr<std::vector<int32_t>> TextVocabulary::encode(absl::string_view text) const {
  std::vector<int32_t> ids;
  if (bytes_) {
    for (char c : text) ids.push_back(static_cast<unsigned char>(c));
    return ids;
  }
  for (size_t at = 0; at < text.size();) {
    const size_t start = at;
    const int64_t cp = nextCodePoint(text, &at);
    if (cp < 0) return absl::InvalidArgumentError(absl::StrCat("not UTF-8 text at byte ", start));
    auto it = std::lower_bound(chars_.begin(), chars_.end(), static_cast<char32_t>(cp));
    if (it == chars_.end() || *it != static_cast<char32_t>(cp))
      return absl::InvalidArgumentError(
          absl::StrFormat("character U+%04X ('%s') is not in the vocabulary", cp,
                          std::string(text.substr(start, at - start))));
    ids.push_back(static_cast<int32_t>(it - chars_.begin()));
  }
  return ids;
}

TextSource::TextSource(std::string path, std::string prefix,
                       std::shared_ptr<const std::vector<uint16_t>> ids, int64_t length,
                       std::shared_ptr<const TextVocabulary> vocabulary)
    : TokenSource(absl::StrCat("text:", path), std::move(prefix), ids,
                  reinterpret_cast<const char*>(ids->data()), 2, static_cast<int64_t>(ids->size()),
                  length, vocabulary->size(), nullptr),
      vocabulary_(std::move(vocabulary)) {}

TextSource::TextSource(std::string path, std::string prefix,
                       std::shared_ptr<const std::vector<uint32_t>> ids, int64_t length,
                       std::shared_ptr<const TextVocabulary> vocabulary)
    : TokenSource(absl::StrCat("text:", path), std::move(prefix), ids,
                  reinterpret_cast<const char*>(ids->data()), 4, static_cast<int64_t>(ids->size()),
                  length, vocabulary->size(), nullptr),
      vocabulary_(std::move(vocabulary)) {}

absl::StatusOr<std::unique_ptr<TextSource>> TextSource::open(const std::string& path,
                                                             const TextOptions& options) {
  const std::string what = absl::StrCat("text file '", path, "'");
  const std::string prefix = what + ": ";
  absl::StatusOr<std::string> text =
      ir::readInputFile(path, {what, "a text file"}, options.max_bytes);
  if (!text.ok()) return text.status();
  if (text->empty()) return absl::InvalidArgumentError(prefix + "empty file, no text");
  absl::StatusOr<TextVocabulary> vocabulary =
      options.bytes ? TextVocabulary::bytes() : TextVocabulary::characters(*text);
  if (!vocabulary.ok())
    return absl::InvalidArgumentError(prefix + std::string(vocabulary.status().message()));
  if (options.vocabulary > 0 && vocabulary->size() > options.vocabulary)
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "its ", vocabulary->size(), vocabulary->isBytes() ? " byte values" : " characters",
        " exceed the model's vocabulary of ", options.vocabulary));
  auto shared = std::make_shared<const TextVocabulary>(*std::move(vocabulary));
  // Ids narrow enough for nearly every text: 2 bytes each.
  if (shared->size() <= 65536) {
    auto ids = idsOf<uint16_t>(*text, *shared);
    if (absl::Status s = checkCounts(prefix, static_cast<int64_t>(ids->size()), options.length);
        !s.ok())
      return s;
    return std::unique_ptr<TextSource>(
        new TextSource(path, prefix, std::move(ids), options.length, std::move(shared)));
  }
  auto ids = idsOf<uint32_t>(*text, *shared);
  if (absl::Status s = checkCounts(prefix, static_cast<int64_t>(ids->size()), options.length);
      !s.ok())
    return s;
  return std::unique_ptr<TextSource>(
      new TextSource(path, prefix, std::move(ids), options.length, std::move(shared)));
}

}  // namespace tandem::runtime::data
