// MemorySource (arrays a program holds) and DatasetSource (today's IDX data) as
// ExampleSources.

#include "runtime/data/memory_source.h"

#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/data/dataset_source.h"
#include "tests/test_util.h"

namespace tandem::runtime::data {
namespace {

using ::testing::ElementsAre;

TEST(MemorySource, ExamplesAreRowsOfEveryArray) {
  std::vector<HostArray> arrays;
  arrays.push_back(HostArray::of<float>("x", {0, 1, 2, 3, 4, 5}, {3, 2}));
  arrays.push_back(HostArray::of<int32_t>("y", {7, 8, 9}, {3}));
  auto source = MemorySource::create(std::move(arrays), "memory", {"y", 10});
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->size(), 3);
  ASSERT_EQ((*source)->fields().size(), 2u);
  EXPECT_EQ((*source)->fields()[0].text(), "x: f32[2]");
  EXPECT_EQ((*source)->fields()[1].text(), "y: i32[]");
  EXPECT_EQ((*source)->classLabels(), (std::pair<std::string, int64_t>{"y", 10}));
  float x[2];
  int32_t y;
  void* out[] = {x, &y};
  ASSERT_TRUE((*source)->read(1, {}, out).ok());
  EXPECT_THAT(x, ElementsAre(2.0f, 3.0f));
  EXPECT_EQ(y, 8);
  EXPECT_EQ((*source)->read(3, {}, out).message(), "memory: example 3 is beyond its 3 examples");
}

TEST(MemorySource, RefusesArraysThatDisagree) {
  std::vector<HostArray> arrays;
  arrays.push_back(HostArray::of<float>("x", {0, 1, 2, 3}, {2, 2}));
  arrays.push_back(HostArray::of<int32_t>("y", {7, 8, 9}, {3}));
  EXPECT_EQ(MemorySource::create(std::move(arrays)).status().message(),
            "memory: arrays 'x' and 'y' disagree in length: 2 and 3 examples");

  std::vector<HostArray> short_data;
  short_data.push_back(HostArray::of<float>("x", {0, 1, 2}, {2, 2}));
  EXPECT_EQ(MemorySource::create(std::move(short_data)).status().message(),
            "memory: array 'x' holds 12 bytes, but its shape [2,2] of f32 needs 16");

  std::vector<HostArray> bad_label;
  bad_label.push_back(HostArray::of<int32_t>("y", {1, 10}, {2}));
  EXPECT_EQ(MemorySource::create(std::move(bad_label), "memory", {"y", 10}).status().message(),
            "memory: label 10 of example 1 is out of range [0, 10)");
}

TEST(DatasetSource, ExamplesAreTheDatasets) {
  TANDEM_NEED_INSTALLED(testing::whyNoFashionMnist());
  auto source = DatasetSource::openFashionMnist(testing::kFashionMnistDir, Split::kTest, 50);
  ASSERT_TRUE(source.ok()) << source.status();
  const ExampleSource& s = **source;
  EXPECT_EQ(s.where(), std::string(testing::kFashionMnistDir) + "/t10k-images-idx3-ubyte.gz");
  EXPECT_EQ(s.size(), 50);
  ASSERT_EQ(s.fields().size(), 2u);
  EXPECT_EQ(s.fields()[0].text(), "x: f32[1,28,28]");
  EXPECT_EQ(s.fields()[1].text(), "y: i32[]");
  EXPECT_EQ(s.classLabels(), (std::pair<std::string, int64_t>{"y", 10}));
  const Dataset& d = (*source)->dataset();
  std::vector<float> x(784);
  int32_t y = -1;
  void* out[] = {x.data(), &y};
  for (int64_t i : {0, 17, 49}) {
    ASSERT_TRUE(s.read(i, {}, out).ok());
    EXPECT_EQ(0, std::memcmp(x.data(), d.images.data() + i * 784, 784 * sizeof(float)));
    EXPECT_EQ(y, d.labels[i]);
  }
}

}  // namespace
}  // namespace tandem::runtime::data
