#include "runtime/data/open_source.h"

#include <cctype>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/data/dataset_source.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/data/image_folder_source.h"
#include "runtime/data/numpy_source.h"
#include "runtime/data/subset_source.h"
#include "runtime/data/text_source.h"
#include "runtime/data/token_source.h"

namespace tandem::runtime::data {
namespace {

constexpr absl::string_view kSpecForms =
    "fashion-mnist[:DIR], npz:FILE[:FIELD=ARRAY,...], npy:FILE or npy:FIELD=FILE,..., "
    "tokens:FILE[:u16|:u32][:length=N][:vocab=N], text:FILE[:chars|:bytes][:length=N][:vocab=N], "
    "images:DIR[:size=S|:size=HxW][:by-name]";

class SpecErrors {
 public:
  SpecErrors(const SourceOptions& o, absl::string_view spec)
      : prefix_(absl::StrCat(o.setting, " '", spec, "': ")) {}
  absl::Status operator()(absl::string_view why) const {
    return absl::InvalidArgumentError(absl::StrCat(prefix_, why));
  }

 private:
  std::string prefix_;
};

bool isFieldName(absl::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// "FIELD=VALUE,FIELD=VALUE": each field named once.
absl::StatusOr<std::vector<ArrayBinding>> bindingsOf(absl::string_view text,
                                                     const SpecErrors& error,
                                                     absl::string_view value_word) {
  std::vector<ArrayBinding> out;
  std::set<std::string> fields;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos || !isFieldName(item.substr(0, eq)) || eq + 1 == item.size())
      return error(absl::StrCat("'", item, "' is not FIELD=", value_word));
    if (!fields.insert(std::string(item.substr(0, eq))).second)
      return error(absl::StrCat("field '", item.substr(0, eq), "' is given twice"));
    out.push_back({std::string(item.substr(0, eq)), std::string(item.substr(eq + 1))});
  }
  return out;
}

// Token and text options: trailing ":WORD" parts of the spec that are options; the rest
// is the file (which may itself hold ':').
struct WindowSpec {
  std::string file;
  int width = 2;
  bool bytes = false;
  int64_t length = 0, vocabulary = 0;
};

absl::StatusOr<WindowSpec> windowSpecOf(absl::string_view rest, bool text,
                                        const SpecErrors& error) {
  WindowSpec w;
  std::vector<absl::string_view> parts = absl::StrSplit(rest, ':');
  while (parts.size() > 1) {
    const absl::string_view word = parts.back();
    int64_t n = 0;
    if (!text && (word == "u16" || word == "u32")) {
      w.width = word == "u16" ? 2 : 4;
    } else if (text && (word == "chars" || word == "bytes")) {
      w.bytes = word == "bytes";
    } else if (absl::StartsWith(word, "length=") || absl::StartsWith(word, "vocab=")) {
      const bool length = absl::StartsWith(word, "length=");
      if (!absl::SimpleAtoi(word.substr(word.find('=') + 1), &n) || n <= 0)
        return error(absl::StrCat("'", word, "' is not a positive integer"));
      (length ? w.length : w.vocabulary) = n;
    } else {
      break;  // part of the file's name
    }
    parts.pop_back();
  }
  w.file = absl::StrJoin(parts, ":");
  return w;
}

// Image folder options: trailing ":size=S", ":size=HxW" and ":by-name" parts; the rest
// is the folder. No size in the spec: the options' (--image-size).
absl::StatusOr<std::pair<std::string, ImageFolderOptions>> imageSpecOf(absl::string_view rest,
                                                                       const SourceOptions& options,
                                                                       const SpecErrors& error) {
  ImageFolderOptions o{
      .height = options.image_height, .width = options.image_width, .classes = options.classes};
  std::vector<absl::string_view> parts = absl::StrSplit(rest, ':');
  bool sized = false;
  while (parts.size() > 1) {
    const absl::string_view word = parts.back();
    if (word == "by-name") {
      o.by_name = true;
    } else if (absl::StartsWith(word, "size=") && !sized) {
      std::vector<absl::string_view> hw = absl::StrSplit(word.substr(5), 'x');
      if (hw.size() > 2 || !absl::SimpleAtoi(hw[0], &o.height) ||
          !absl::SimpleAtoi(hw.back(), &o.width) || o.height <= 0 || o.width <= 0 ||
          o.height > 65535 || o.width > 65535)
        return error(
            absl::StrCat("'", word, "' is not size=S or size=HxW (positive, at most 65535)"));
      sized = true;
    } else {
      break;  // part of the folder's name
    }
    parts.pop_back();
  }
  if (parts.size() == 1 && parts[0].empty()) return error("no folder after 'images:'");
  return std::make_pair(absl::StrJoin(parts, ":"), o);
}

absl::StatusOr<std::unique_ptr<ExampleSource>> openKind(absl::string_view spec,
                                                        const SourceOptions& options,
                                                        const SpecErrors& error) {
  const size_t colon = spec.find(':');
  const absl::string_view kind = spec.substr(0, colon);
  const absl::string_view rest =
      colon == absl::string_view::npos ? absl::string_view() : spec.substr(colon + 1);
  if (kind == "fashion-mnist") {
    const std::string dir = rest.empty() ? std::string(kDefaultFashionMnistDir) : std::string(rest);
    auto s = DatasetSource::openFashionMnist(dir, options.split, options.limit, options.setting);
    if (!s.ok()) return s.status();
    return std::unique_ptr<ExampleSource>(*std::move(s));
  }
  if (rest.empty()) {
    if (kind == "npz" || kind == "npy" || kind == "tokens" || kind == "text")
      return error(absl::StrCat("no file after '", kind, ":'"));
    if (kind == "images") return error("no folder after 'images:'");
    return error(absl::StrCat("unknown kind of data '", kind, "' (", kSpecForms, ")"));
  }
  const NumpyOptions numpy{.classes = options.classes};
  if (kind == "npz") {
    // The bindings are the part after the last ':' when it holds '='.
    std::string file(rest);
    std::vector<ArrayBinding> bindings;
    const size_t last = rest.rfind(':');
    if (last != absl::string_view::npos &&
        rest.substr(last + 1).find('=') != absl::string_view::npos) {
      file = std::string(rest.substr(0, last));
      auto b = bindingsOf(rest.substr(last + 1), error, "ARRAY");
      if (!b.ok()) return b.status();
      bindings = *std::move(b);
    }
    auto s = NumpySource::openNpz(file, std::move(bindings), numpy);
    if (!s.ok()) return s.status();
    return std::unique_ptr<ExampleSource>(*std::move(s));
  }
  if (kind == "npy") {
    // FIELD=FILE,... when it starts with a field name and '='; else one file, field x.
    const size_t eq = rest.find('=');
    std::vector<ArrayBinding> bindings = {{"x", std::string(rest)}};
    if (eq != absl::string_view::npos && isFieldName(rest.substr(0, eq))) {
      auto b = bindingsOf(rest, error, "FILE");
      if (!b.ok()) return b.status();
      bindings = *std::move(b);
    }
    auto s = NumpySource::openNpy(std::move(bindings), numpy);
    if (!s.ok()) return s.status();
    return std::unique_ptr<ExampleSource>(*std::move(s));
  }
  if (kind == "tokens" || kind == "text") {
    auto w = windowSpecOf(rest, kind == "text", error);
    if (!w.ok()) return w.status();
    const int64_t length = w->length > 0 ? w->length : options.length;
    const int64_t vocabulary = w->vocabulary > 0 ? w->vocabulary : options.vocabulary;
    if (length <= 0) return error("no window length: the model gives none, so give :length=N");
    if (kind == "tokens") {
      auto s = TokenSource::open(w->file,
                                 {.length = length, .vocabulary = vocabulary, .width = w->width});
      if (!s.ok()) return s.status();
      return std::unique_ptr<ExampleSource>(*std::move(s));
    }
    auto s =
        TextSource::open(w->file, {.length = length, .vocabulary = vocabulary, .bytes = w->bytes});
    if (!s.ok()) return s.status();
    return std::unique_ptr<ExampleSource>(*std::move(s));
  }
  if (kind == "images") {
    auto o = imageSpecOf(rest, options, error);
    if (!o.ok()) return o.status();
    auto s = ImageFolderSource::open(o->first, o->second);
    if (!s.ok()) return s.status();
    return std::unique_ptr<ExampleSource>(*std::move(s));
  }
  return error(absl::StrCat("unknown kind of data '", kind, "' (", kSpecForms, ")"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExampleSource>> openSource(absl::string_view spec,
                                                          const SourceOptions& options) {
  const SpecErrors error(options, spec);
  if (spec.empty()) return error(absl::StrCat("empty (", kSpecForms, ")"));
  absl::StatusOr<std::unique_ptr<ExampleSource>> source = openKind(spec, options, error);
  if (!source.ok() || options.limit <= 0 || absl::StartsWith(spec, "fashion-mnist")) return source;
  return firstExamples(std::shared_ptr<const ExampleSource>(*std::move(source)), options.limit);
}

std::vector<std::string> filesOfSpec(absl::string_view spec) {
  if (spec == "fashion-mnist") return fashionMnistFiles(kDefaultFashionMnistDir);
  const size_t colon = spec.find(':');
  if (colon == absl::string_view::npos) return {};
  const absl::string_view kind = spec.substr(0, colon), rest = spec.substr(colon + 1);
  const SpecErrors error(SourceOptions{}, spec);
  if (kind == "fashion-mnist")
    return fashionMnistFiles(rest.empty() ? std::string(kDefaultFashionMnistDir)
                                          : std::string(rest));
  if (kind == "npz") {  // as openKind reads it: bindings after the last ':' that hold '='
    const size_t last = rest.rfind(':');
    if (last != absl::string_view::npos &&
        rest.substr(last + 1).find('=') != absl::string_view::npos)
      return {std::string(rest.substr(0, last))};
    return {std::string(rest)};
  }
  if (kind == "npy") {
    const size_t eq = rest.find('=');
    if (eq == absl::string_view::npos || !isFieldName(rest.substr(0, eq)))
      return {std::string(rest)};
    absl::StatusOr<std::vector<ArrayBinding>> b = bindingsOf(rest, error, "FILE");
    std::vector<std::string> files;
    if (b.ok())
      for (const ArrayBinding& binding : *b) files.push_back(binding.array);
    return files;
  }
  if (kind == "tokens" || kind == "text") {
    auto w = windowSpecOf(rest, kind == "text", error);
    if (w.ok()) return {w->file};
  }
  return {};
}

std::shared_ptr<const TextVocabulary> textVocabularyOf(const ExampleSource& source) {
  const auto* text = dynamic_cast<const TextSource*>(&underlyingSource(source));
  return text != nullptr ? text->sharedVocabulary() : nullptr;
}

}  // namespace tandem::runtime::data
