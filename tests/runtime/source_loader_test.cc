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
#include <vector>

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

// A source whose example 4 cannot be read (a corrupt file, say).
class FailingSource final : public ExampleSource {
 public:
  std::string where() const override { return "test:failing"; }
  int64_t size() const override { return 8; }
  const std::vector<Field>& fields() const override { return fields_; }
  absl::Status read(int64_t index, const ExampleKey&, absl::Span<void* const> out) const override {
    if (index == 4) return absl::InvalidArgumentError("test:failing: example 4 is corrupt");
    const auto v = static_cast<int32_t>(index);
    std::memcpy(out[0], &v, sizeof v);
    return absl::OkStatus();
  }

 private:
  std::vector<Field> fields_{{.name = "x", .dtype = ir::DType::kI32, .shape = {}}};
};

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

// The loader's thread runs 10 nice values below the process's threads, so that on busy
// cores the devices' workers go first (docs/PERF.md: LeNet from a PNG folder).
TEST(SourceLoader, TheLoadersThreadRunsBelowTheDevices) {
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
    EXPECT_EQ(lowered(), before + 1);
  }
  EXPECT_EQ(lowered(), before) << "the loader's thread ended with it";
}

}  // namespace
}  // namespace tandem::runtime::data
