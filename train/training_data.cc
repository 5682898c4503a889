#include "train/training_data.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/status_macros.h"
#include "runtime/data/dataset_source.h"
#include "runtime/data/open_source.h"
#include "runtime/data/subset_source.h"
#include "runtime/data/token_source.h"
#include "runtime/data/transforms.h"

namespace tandem::training {
namespace {

namespace data = runtime::data;
using SourcePtr = std::shared_ptr<const data::ExampleSource>;

}  // namespace

std::string dataSpecOf(const std::string& given) {
  std::error_code ignored;
  if (given.find(':') == std::string::npos && std::filesystem::is_directory(given, ignored))
    return absl::StrCat("fashion-mnist:", given);
  // A path that is not there yet reads as one too, so that the message says how to get the
  // data (Fashion-MNIST's loader's) rather than that the word is no kind of data.
  if (absl::StartsWith(given, "/") || absl::StartsWith(given, "."))
    return absl::StrCat("fashion-mnist:", given);
  return given;
}

namespace {

bool isFashionMnist(const std::string& spec) {
  return spec == "fashion-mnist" || absl::StartsWith(spec, "fashion-mnist:");
}

// Where the messages say the data is: Fashion-MNIST's directory as given (what --data
// said before sources had specs), any other source as its spec.
std::string whereOf(const std::string& spec) {
  if (spec == "fashion-mnist") return data::kDefaultFashionMnistDir;
  if (isFashionMnist(spec)) return spec.substr(spec.find(':') + 1);
  return spec;
}

// What an example is, in messages: an image (a field x of [C, H, W]) or an example.
const char* exampleWord(const data::ExampleSource& s) {
  for (const data::Field& f : s.fields())
    if (f.name == "x" && f.shape.size() == 3) return "images";
  return "examples";
}

// The file a source's examples are in, for "holds no images": Fashion-MNIST's images file.
std::string fileOf(const data::ExampleSource& s) {
  if (const auto* d = dynamic_cast<const data::DatasetSource*>(&data::underlyingSource(s)))
    return d->dataset().source;
  return s.where();
}

// How many examples the source holds before any limit (Fashion-MNIST reads only the
// limit's, but counts those in the file).
int64_t available(const data::ExampleSource& s) {
  if (const auto* d = dynamic_cast<const data::DatasetSource*>(&s)) return d->dataset().available;
  return s.size();
}

absl::StatusOr<SourcePtr> limited(SourcePtr source, Setting setting,
                                  const std::optional<int64_t>& limit, const char* what,
                                  const std::string& where, const SettingNames& names) {
  if (!limit) return source;
  if (*limit > available(*source))
    return settingError(names, setting,
                        absl::StrCat(*limit, " is more than the ", available(*source), " ", what,
                                     " ", exampleWord(*source), " in ", where));
  if (*limit == source->size()) return source;
  return SourcePtr(data::firstExamples(std::move(source), *limit));
}

absl::StatusOr<SourcePtr> open(const std::string& spec, data::Split split, int64_t limit,
                               int64_t classes, const DataSource& given, Setting setting,
                               const SettingNames& names) {
  ASSIGN_OR_RETURN(std::unique_ptr<data::ExampleSource> s,
                   data::openSource(spec, {.setting = names(setting),
                                           .split = split,
                                           .limit = limit,
                                           .classes = classes,
                                           .length = given.window_length,
                                           .image_height = given.image_height,
                                           .image_width = given.image_width}));
  return SourcePtr(std::move(s));
}

// The --augment transforms that apply to one part: all of them to the training examples,
// only the fixed ones (normalize, resize) to the test examples.
absl::StatusOr<SourcePtr> augmented(SourcePtr source, const std::string& text, bool training,
                                    const SettingNames& names) {
  if (text.empty()) return source;
  absl::StatusOr<std::vector<std::unique_ptr<data::ImageTransform>>> parsed =
      data::parseAugment(text);
  if (!parsed.ok()) return settingError(names, Setting::kAugment, parsed.status().message());
  std::vector<std::unique_ptr<data::ImageTransform>> kept;
  for (auto& t : *parsed)
    if (training || !t->random()) kept.push_back(std::move(t));
  if (kept.empty()) return source;
  absl::StatusOr<std::unique_ptr<data::ExampleSource>> s =
      data::transformSource(std::move(source), "x", std::move(kept));
  if (!s.ok()) return settingError(names, Setting::kAugment, s.status().message());
  return SourcePtr(*std::move(s));
}

}  // namespace

namespace {

// The parts opened, before the limits and transforms, and the words naming them.
struct OpenedParts {
  TrainingData data;
  std::string train_where, test_where;
  const char* test_what = "test";
};

// The parts `given`'s specs name: the training spec's, and its test part, the test spec's or
// a validation split of the training part.
absl::StatusOr<OpenedParts> openSpecs(const DataSource& given, std::optional<int64_t> limit_train,
                                      std::optional<int64_t> limit_test, uint64_t seed,
                                      const SettingNames& names) {
  const std::string spec = dataSpecOf(given.spec);
  const bool fashion_mnist = isFashionMnist(spec);
  if (given.test_spec && given.val_fraction)
    return settingError(
        names, Setting::kValFraction,
        absl::StrCat("and ", names(Setting::kTestData), " both give the test data; give one"));
  OpenedParts parts;
  TrainingData& data = parts.data;
  // Fashion-MNIST's loader reads no further into its files than a limit; a validation
  // split needs every example first.
  const bool read_limited = fashion_mnist && !given.val_fraction;
  ASSIGN_OR_RETURN(data.train,
                   open(spec, data::Split::kTrain, read_limited ? limit_train.value_or(0) : 0, 0,
                        given, Setting::kData, names));
  const int64_t classes = data.train->classLabels().second;
  if (const auto* corpus = dynamic_cast<const data::TokenSource*>(data.train.get());
      corpus != nullptr && !given.test_spec) {
    // A corpus' held-out part is its tail, as nanoGPT splits its text 90 / 10: random
    // windows over the whole file would put validation text into training windows.
    constexpr double kHeldOut = 0.1;
    const double fraction = given.val_fraction.value_or(kHeldOut);
    const int64_t tokens = corpus->tokens();
    const int64_t cut = tokens - static_cast<int64_t>(std::llround(fraction * double(tokens)));
    absl::StatusOr<std::unique_ptr<data::TokenSource>> test =
        corpus->range(cut, tokens, "validation");
    if (!test.ok())
      return settingError(names, given.val_fraction ? Setting::kValFraction : Setting::kData,
                          absl::StrCat(test.status().message(), " (the last ", fraction,
                                       " of the text is held out for validation)"));
    ASSIGN_OR_RETURN(std::unique_ptr<data::TokenSource> train, corpus->range(0, cut, "training"));
    data.train = std::move(train);
    data.test = *std::move(test);
    parts.train_where = data.train->where();
    parts.test_where = data.test->where();
    parts.test_what = "validation";
    return parts;
  }
  if (!fashion_mnist && !given.test_spec && !given.val_fraction)
    return settingError(
        names, Setting::kData,
        absl::StrCat("'", given.spec, "' has no test part: give ", names(Setting::kTestData),
                     " SPEC or ", names(Setting::kValFraction), " F"));
  if (given.val_fraction) {
    ASSIGN_OR_RETURN(data::TrainValidation split,
                     data::splitValidation(data.train, *given.val_fraction, seed,
                                           names(Setting::kValFraction)));
    data.train = std::move(split.train);
    data.test = std::move(split.validation);
  } else if (given.test_spec) {
    ASSIGN_OR_RETURN(data.test, open(dataSpecOf(*given.test_spec), data::Split::kTest, 0, classes,
                                     given, Setting::kTestData, names));
  } else {
    ASSIGN_OR_RETURN(data.test, open(spec, data::Split::kTest, limit_test.value_or(0), classes,
                                     given, Setting::kData, names));
  }
  parts.train_where = whereOf(spec);
  parts.test_where = given.test_spec ? whereOf(dataSpecOf(*given.test_spec)) : parts.train_where;
  if (given.val_fraction) parts.test_what = "validation";
  return parts;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const TrainingData>> openTrainingData(
    const DataSource& given, std::optional<int64_t> limit_train, std::optional<int64_t> limit_test,
    uint64_t seed, const SettingNames& names) {
  OpenedParts parts;
  if (given.examples != nullptr) {  // a program's own: limited and transformed as a spec's
    parts = {.data = *given.examples,
             .train_where = given.examples->train->where(),
             .test_where = given.examples->test->where()};
  } else {
    ASSIGN_OR_RETURN(parts, openSpecs(given, limit_train, limit_test, seed, names));
  }
  TrainingData& data = parts.data;
  ASSIGN_OR_RETURN(data.train, limited(std::move(data.train), Setting::kLimitTrain, limit_train,
                                       "training", parts.train_where, names));
  ASSIGN_OR_RETURN(data.test, limited(std::move(data.test), Setting::kLimitTest, limit_test,
                                      parts.test_what, parts.test_where, names));
  ASSIGN_OR_RETURN(data.train, augmented(std::move(data.train), given.augment, true, names));
  ASSIGN_OR_RETURN(data.test, augmented(std::move(data.test), given.augment, false, names));
  return std::make_shared<const TrainingData>(std::move(data));
}

absl::Status checkTrainingData(const TrainingData& data, std::optional<int64_t> limit_train,
                               int64_t batch, const SettingNames& names) {
  for (const auto& [part, what] :
       {std::pair{data.train.get(), "train on"}, std::pair{data.test.get(), "evaluate"}}) {
    // The figures of no examples would read as accuracy 0.
    if (part->size() == 0)
      return absl::InvalidArgumentError(
          absl::StrCat(fileOf(*part), " holds no ", exampleWord(*part), ": nothing to ", what));
  }
  if (data.train->size() < batch)
    return settingError(
        names, Setting::kBatch,
        absl::StrCat(batch, " is more than the ", data.train->size(), " training ",
                     exampleWord(*data.train),
                     limit_train ? absl::StrCat(" left by ", names(Setting::kLimitTrain)) : "",
                     " (lower ", names(Setting::kBatch), ")"));
  return absl::OkStatus();
}

// zlib's crc32 (a few GB/s). Up to 64 MiB of examples are read, evenly spaced: all of
// Fashion-MNIST's test half, a sample of a 2 GB array (reading it all would take as long as
// an epoch). Random windows are read with one fixed key, the same on every rank.
std::string sourceDigest(const data::ExampleSource& source) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const std::vector<data::Field>& fields = source.fields();
  std::vector<std::vector<std::byte>> buffers;
  std::vector<void*> out;
  int64_t example_bytes = 0;
  for (const data::Field& f : fields) {
    const std::string text = f.text();
    crc = crc32(crc, reinterpret_cast<const Bytef*>(text.data()), static_cast<uInt>(text.size()));
    buffers.emplace_back(static_cast<size_t>(f.bytes()));
    out.push_back(buffers.back().data());
    example_bytes += f.bytes();
  }
  constexpr int64_t kBudget = int64_t{64} << 20;
  const int64_t n = source.size();
  const int64_t reads =
      std::min(n, std::max<int64_t>(1, kBudget / std::max<int64_t>(1, example_bytes)));
  for (int64_t r = 0; r < reads; ++r) {
    const int64_t index = reads == n ? r : r * n / reads;
    if (!source.read(index, {}, out).ok()) return absl::StrFormat("unreadable example %d", index);
    for (const auto& b : buffers)
      crc = crc32(crc, reinterpret_cast<const Bytef*>(b.data()), static_cast<uInt>(b.size()));
  }
  return absl::StrFormat("%08x (%d examples, %d read)", crc, n, reads);
}

}  // namespace tandem::training
