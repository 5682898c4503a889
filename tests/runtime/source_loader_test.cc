// The batch loader over any ExampleSource (issue 42): fields in the source's order, padding
// that is zero bytes (and -1 only in a classifier's labels), and an example the source
// cannot read ending the epoch with the source's error.

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/data/batch_loader.h"
#include "runtime/data/memory_source.h"

namespace tandem::runtime::data {
namespace {

// Five examples: a f32[2] = {i, -i}, b i32[] = 10 + i; no class labels.
std::unique_ptr<MemorySource> unlabelled() {
  auto s = MemorySource::create({HostArray::of<float>("a", {0, 0, 1, -1, 2, -2, 3, -3, 4, -4}, {5, 2}),
                                 HostArray::of<int32_t>("b", {10, 11, 12, 13, 14}, {5})});
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(*s);
}

TEST(SourceLoader, FieldsComeInTheSourcesOrderAndPaddingIsZeroWithoutLabels) {
  auto source = unlabelled();
  BatchLoader loader(*source, 3, /*shuffle=*/false, 1, /*drop_last=*/false);
  loader.startEpoch(0);
  auto first = loader.next();
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(first->fields.size(), 2u);
  EXPECT_EQ(first->field<float>(0)[2], 1.0f);
  EXPECT_EQ(first->field<float>(0)[3], -1.0f);
  EXPECT_EQ(first->field<int32_t>(1)[2], 12);
  auto last = loader.next();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->valid, 2);
  EXPECT_EQ(last->field<int32_t>(1)[1], 14);
  EXPECT_EQ(last->field<int32_t>(1)[2], 0) << "no class labels: padding is zero, not -1";
  EXPECT_EQ(last->field<float>(0)[4], 0.0f);
  EXPECT_FALSE(loader.next().has_value());
  EXPECT_TRUE(loader.status().ok());
}

// A source whose examples in `bad` cannot be read (a corrupt file, say); example i is i.
class FailingSource final : public ExampleSource {
 public:
  explicit FailingSource(std::vector<int64_t> bad = {4}, int64_t size = 8)
      : bad_(std::move(bad)), size_(size) {}
  std::string where() const override { return "test:failing"; }
  int64_t size() const override { return size_; }
  const std::vector<Field>& fields() const override { return fields_; }
  absl::Status read(int64_t index, const ExampleKey&, absl::Span<void* const> out) const override {
    if (std::count(bad_.begin(), bad_.end(), index) > 0)
      return absl::InvalidArgumentError(
          absl::StrCat("test:failing: example ", index, " is corrupt"));
    const auto v = static_cast<int32_t>(index);
    std::memcpy(out[0], &v, sizeof v);
    return absl::OkStatus();
  }

 private:
  std::vector<int64_t> bad_;
  int64_t size_;
  std::vector<Field> fields_{{.name = "x", .dtype = ir::DType::kI32, .shape = {}}};
};

// A batch's rows are read by several threads, each a share; the error kept is the first
// bad row's, as one thread reading them in order finds, and the rows read are in place.
TEST(SourceLoader, RowsReadByManyThreadsLandInPlaceAndTheFirstBadRowIsTheError) {
  FailingSource good({}, 1000);
  BatchLoader loader(good, 500, /*shuffle=*/true, 7, /*drop_last=*/true);
  loader.startEpoch(3);
  const std::vector<int64_t> order = epochPermutation(1000, 7, 3);
  for (int64_t b = 0; b < 2; ++b) {
    auto batch = loader.next();
    ASSERT_TRUE(batch.has_value());
    for (int64_t r = 0; r < 500; ++r)
      ASSERT_EQ(batch->field<int32_t>(0)[r], order[static_cast<size_t>(b * 500 + r)]) << r;
  }
  // Rows 3 and 450 of the first batch are bad: row 3 is found first in order.
  FailingSource bad({3, 450}, 1000);
  BatchLoader failing(bad, 500, /*shuffle=*/false, 7, /*drop_last=*/true);
  failing.startEpoch(0);
  EXPECT_FALSE(failing.next().has_value());
  EXPECT_EQ(failing.status().message(), "test:failing: example 3 is corrupt");
}

TEST(SourceLoader, AnExampleTheSourceCannotReadEndsTheEpochWithItsError) {
  FailingSource source;
  BatchLoader loader(source, 2, /*shuffle=*/false, 1, /*drop_last=*/true);
  loader.startEpoch(0);
  int batches = 0;
  while (loader.next()) ++batches;
  EXPECT_EQ(batches, 2);  // examples 0-3; the batch of example 4 is never handed out
  EXPECT_EQ(loader.status().message(), "test:failing: example 4 is corrupt");
  loader.startEpoch(1);  // a new epoch starts again, and fails at the same example
  batches = 0;
  while (loader.next()) ++batches;
  EXPECT_EQ(batches, 2);
  EXPECT_FALSE(loader.status().ok());
}

// The nice value of each of this process's threads (/proc/self/task/TID/stat's 19th field,
// after the command's parenthesised name).
std::vector<int> threadNiceValues() {
  std::vector<int> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    for (int k = 3; k <= 19 && fields >> field; ++k)
      if (k == 19) out.push_back(std::stoi(field));
  }
  return out;
}

// The loader's threads (its own, and the helpers that read a batch's rows with it: one per
// core, up to 4) run 10 nice values below the process's threads, so that on busy cores the
// devices' workers go first (docs/PERF.md: LeNet from a PNG folder).
TEST(SourceLoader, TheLoadersThreadsRunBelowTheDevices) {
  errno = 0;
  const int base = ::getpriority(PRIO_PROCESS, 0);
  ASSERT_EQ(errno, 0);
  if (base > 9) GTEST_SKIP() << "the tests run at nice " << base << ": no room below";
  const auto lowered = [&] {
    const std::vector<int> nice = threadNiceValues();
    return std::count(nice.begin(), nice.end(), base + 10);
  };
  const auto before = lowered();
  auto source = unlabelled();
  {
    BatchLoader loader(*source, 2, /*shuffle=*/false, 1, /*drop_last=*/false);
    loader.startEpoch(0);
    ASSERT_TRUE(loader.next().has_value());  // the thread has started and set its priority
    const int readers = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
    EXPECT_EQ(lowered(), before + readers);
  }
  EXPECT_EQ(lowered(), before) << "the loader's thread ended with it";
}

}  // namespace
}  // namespace tandem::runtime::data
