// Fashion-MNIST loading (IDX files through zlib) and the batch loader.

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/data/batch_loader.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/data/idx_reader.h"
#include "tests/test_util.h"

namespace tandem::runtime::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Bytes = std::vector<unsigned char>;

void putBigEndian(Bytes& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back((v >> shift) & 0xff);
}

Bytes idxImages(uint32_t count, uint32_t rows, uint32_t cols, const Bytes& pixels,
                uint32_t magic = 0x803) {
  Bytes out;
  putBigEndian(out, magic);
  putBigEndian(out, count);
  putBigEndian(out, rows);
  putBigEndian(out, cols);
  out.insert(out.end(), pixels.begin(), pixels.end());
  return out;
}

Bytes idxLabels(uint32_t count, const Bytes& labels) {
  Bytes out;
  putBigEndian(out, 0x801);
  putBigEndian(out, count);
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

void writePlain(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

void writeGz(const std::string& path, const Bytes& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
  }
  ASSERT_EQ(gzclose(f), Z_OK);
}

// The error text as a std::string, which gtest prints readably (absl::string_view it does not).
std::string message(const absl::StatusOr<Dataset>& d) { return std::string(d.status().message()); }

Bytes readRaw(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// A fresh temporary directory per test.
class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "tandem_data_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const std::string& f : written_) std::remove(f.c_str());
    rmdir(dir_.c_str());
  }
  std::string path(const std::string& name) {
    written_.push_back(absl::StrCat(dir_, "/", name));
    return written_.back();
  }
  // Three 2x3 images and their labels, the pixels chosen so scaling is checkable.
  void writeGoodPair(const std::string& prefix) {
    writeGz(path(prefix + "-images-idx3-ubyte.gz"), idxImages(3, 2, 3, kPixels));
    writeGz(path(prefix + "-labels-idx1-ubyte.gz"), idxLabels(3, {0, 9, 3}));
  }
  std::string images() { return absl::StrCat(dir_, "/train-images-idx3-ubyte.gz"); }
  std::string labels() { return absl::StrCat(dir_, "/train-labels-idx1-ubyte.gz"); }

  const Bytes kPixels = {0, 255, 51, 102, 1, 254, 10, 20, 30, 40, 50, 60, 255, 255, 0, 0, 0, 7};
  std::string dir_;
  std::vector<std::string> written_;
};

TEST_F(IdxTest, ReadsValuesScaledToUnitRange) {
  writeGoodPair("train");
  absl::StatusOr<Dataset> d = readIdxPair(images(), labels());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->count, 3);
  EXPECT_EQ(d->rows, 2);
  EXPECT_EQ(d->cols, 3);
  EXPECT_EQ(d->source, images());
  ASSERT_EQ(d->images.size(), kPixels.size());
  for (size_t i = 0; i < kPixels.size(); ++i) {
    EXPECT_EQ(d->images[i], static_cast<float>(kPixels[i]) / 255.0f) << i;
  }
  EXPECT_EQ(d->images[0], 0.0f);
  EXPECT_EQ(d->images[1], 1.0f);
  EXPECT_FLOAT_EQ(d->images[2], 0.2f);
  EXPECT_THAT(d->labels, ElementsAre(0, 9, 3));
}

TEST_F(IdxTest, LimitKeepsTheFirstExamples) {
  writeGoodPair("train");
  absl::StatusOr<Dataset> d = readIdxPair(images(), labels(), 2);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->count, 2);
  EXPECT_EQ(d->images.size(), 12u);
  EXPECT_THAT(d->labels, ElementsAre(0, 9));
  d = readIdxPair(images(), labels(), 100);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->count, 3);
}

TEST_F(IdxTest, LoadsBothSplitsGzipOrPlain) {
  writeGoodPair("train");
  // The test split uncompressed: accepted when the .gz is absent.
  writePlain(path("t10k-images-idx3-ubyte"), idxImages(2, 2, 3, Bytes(12, 255)));
  writePlain(path("t10k-labels-idx1-ubyte"), idxLabels(2, {5, 6}));
  absl::StatusOr<Dataset> train = loadFashionMnist(dir_, Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->count, 3);
  EXPECT_EQ(train->source, images());
  absl::StatusOr<Dataset> test = loadFashionMnist(dir_, Split::kTest, 1);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(test->count, 1);
  EXPECT_EQ(test->source, absl::StrCat(dir_, "/t10k-images-idx3-ubyte"));
  EXPECT_EQ(test->images, std::vector<float>(6, 1.0f));
  EXPECT_THAT(test->labels, ElementsAre(5));
}

TEST_F(IdxTest, MissingDirectory) {
  const std::string missing = dir_ + "/nope";
  absl::StatusOr<Dataset> d = loadFashionMnist(missing, Split::kTrain, 0, "--data");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(message(d),
            absl::StrCat("fashion-mnist: directory ", missing,
                         " does not exist (install the Debian package dataset-fashion-mnist or "
                         "pass --data DIR)"));
}

TEST_F(IdxTest, DirectoryThatIsAFile) {
  const std::string file = path("plain-file");
  writePlain(file, {1, 2, 3});
  absl::StatusOr<Dataset> d = loadFashionMnist(file, Split::kTrain);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(message(d), HasSubstr(file + " is not a directory"));
}

TEST_F(IdxTest, MissingFile) {
  writeGz(path("train-images-idx3-ubyte.gz"), idxImages(3, 2, 3, kPixels));
  absl::StatusOr<Dataset> d = loadFashionMnist(dir_, Split::kTrain);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(message(d),
            absl::StrCat("fashion-mnist: ", labels(),
                         " not found (nor train-labels-idx1-ubyte uncompressed) (install the "
                         "Debian package dataset-fashion-mnist or pass data DIR)"));
  // readIdxPair on a missing path names it too.
  d = readIdxPair(images(), labels());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(message(d), HasSubstr("cannot read " + labels() + ": No such file"));
}

TEST_F(IdxTest, WrongMagic) {
  writeGz(path("train-images-idx3-ubyte.gz"), idxImages(3, 2, 3, kPixels, 0x802));
  writeGz(path("train-labels-idx1-ubyte.gz"), idxLabels(3, {0, 1, 2}));
  absl::StatusOr<Dataset> d = readIdxPair(images(), labels());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(message(d), absl::StrCat(images(),
                                     ": bad magic number 0x00000802, expected 0x00000803 "
                                     "(IDX unsigned-byte images)"));
  // Files swapped: the images file given as labels.
  d = readIdxPair(labels(), images());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(message(d), absl::StrCat(labels(),
                                     ": bad magic number 0x00000801, expected 0x00000803 "
                                     "(IDX unsigned-byte images)"));
}

TEST_F(IdxTest, TruncatedImages) {
  Bytes pixels = kPixels;
  pixels.resize(2 * 6 + 4);  // two whole images and part of a third
  writeGz(path("train-images-idx3-ubyte.gz"), idxImages(3, 2, 3, pixels));
  writeGz(path("train-labels-idx1-ubyte.gz"), idxLabels(3, {0, 1, 2}));
  absl::StatusOr<Dataset> d = readIdxPair(images(), labels());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(message(d),
            absl::StrCat(images(),
                         ": truncated: header says 3 images of 2x3 but the file ends after 2 of "
                         "them"));
  // Issue 40: a limit within what is there does not make the file whole: it is refused
  // alike (it passed before, so --limit-train hid a damaged file).
  absl::StatusOr<Dataset> limited = readIdxPair(images(), labels(), 2);
  ASSERT_FALSE(limited.ok());
  EXPECT_EQ(message(limited), message(d));
}

// Issue 40 (the probe): a gzip file whose last 8 bytes (CRC and size) are missing holds
// every data byte, and zlib's reads end without an error code of -1; it is truncated all
// the same (nothing vouches for the bytes), with or without a limit.
TEST_F(IdxTest, GzipStreamWithoutItsTrailer) {
  const std::string full = path("full.gz");
  writeGz(full, idxImages(3, 2, 3, kPixels));
  Bytes gz = readRaw(full);
  gz.resize(gz.size() - 8);
  writePlain(path("train-images-idx3-ubyte.gz"), gz);
  writeGz(path("train-labels-idx1-ubyte.gz"), idxLabels(3, {0, 1, 2}));
  for (int64_t limit : {0, 2}) {
    absl::StatusOr<Dataset> d = readIdxPair(images(), labels(), limit);
    ASSERT_FALSE(d.ok()) << "limit " << limit;
    EXPECT_EQ(message(d), absl::StrCat(images(),
                                       ": truncated: the gzip stream ends before its "
                                       "checksum (unexpected end of file)"));
  }
}

TEST_F(IdxTest, TruncatedGzipStream) {
  // A big enough body that cutting the compressed file in half cuts the data.
  Bytes pixels(500 * 6);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<unsigned char>(i * 7919);
  const std::string full = path("full.gz");
  writeGz(full, idxImages(500, 2, 3, pixels));
  Bytes gz = readRaw(full);
  gz.resize(gz.size() / 2);
  writePlain(path("train-images-idx3-ubyte.gz"), gz);
  writeGz(path("train-labels-idx1-ubyte.gz"), idxLabels(500, Bytes(500, 1)));
  absl::StatusOr<Dataset> d = readIdxPair(images(), labels());
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(message(d), HasSubstr(absl::StrCat(images(),
                                                 ": truncated: header says 500 images of 2x3 but "
                                                 "the file ends after ")));
  EXPECT_THAT(message(d), HasSubstr("(gzip: unexpected end of file)"));
}

TEST_F(IdxTest, TruncatedLabels) {
  writeGz(path("train-images-idx3-ubyte.gz"), idxImages(3, 2, 3, kPixels));
  writeGz(path("train-labels-idx1-ubyte.gz"), idxLabels(3, {4}));
  absl::StatusOr<Dataset> d = readIdxPair(images(), labels());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(message(d), absl::StrCat(labels(),
                                     ": truncated: header says 3 labels but the file ends after 1 "
                                     "of them"));
}

TEST_F(IdxTest, TruncatedHeader) {
  Bytes header = idxImages(3, 2, 3, {});
  header.resize(9);
  writeGz(path("train-images-idx3-ubyte.gz"), header);
  writeGz(path("train-labels-idx1-ubyte.gz"), idxLabels(3, {0, 1, 2}));
  absl::StatusOr<Dataset> d = readIdxPair(images(), labels());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(message(d), absl::StrCat(images(), ": truncated: the file ends inside the IDX header"));
}

TEST_F(IdxTest, CountMismatch) {
  writeGz(path("train-images-idx3-ubyte.gz"), idxImages(3, 2, 3, kPixels));
  writeGz(path("train-labels-idx1-ubyte.gz"), idxLabels(2, {0, 1}));
  absl::StatusOr<Dataset> d = readIdxPair(images(), labels());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(message(d), absl::StrCat("image/label count mismatch: ", images(), " has 3 images, ",
                                     labels(), " has 2 labels"));
}

TEST_F(IdxTest, LabelOutOfRange) {
  writeGz(path("train-images-idx3-ubyte.gz"), idxImages(3, 2, 3, kPixels));
  writeGz(path("train-labels-idx1-ubyte.gz"), idxLabels(3, {0, 12, 3}));
  absl::StatusOr<Dataset> d = readIdxPair(images(), labels());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(message(d), absl::StrCat(labels(), ": label 12 at index 1 is out of range [0, 10)"));
  // Beyond the limit it is not looked at.
  EXPECT_TRUE(readIdxPair(images(), labels(), 1).ok());
}

TEST_F(IdxTest, GarbageThatIsNotGzip) {
  const std::string text = "this is not a gzip file, nor an IDX file\n";
  writePlain(path("train-images-idx3-ubyte.gz"), Bytes(text.begin(), text.end()));
  writeGz(path("train-labels-idx1-ubyte.gz"), idxLabels(3, {0, 1, 2}));
  absl::StatusOr<Dataset> d = loadFashionMnist(dir_, Split::kTrain);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(message(d), absl::StrCat(images(), ": not a gzip/IDX file"));
  // An empty file too.
  writePlain(images(), {});
  d = loadFashionMnist(dir_, Split::kTrain);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(message(d), absl::StrCat(images(), ": not a gzip/IDX file"));
}

TEST_F(IdxTest, CorruptGzipChecksum) {
  writeGoodPair("train");
  Bytes gz = readRaw(labels());
  gz[gz.size() - 8] ^= 0xff;  // the CRC-32 in the gzip trailer
  writePlain(labels(), gz);
  absl::StatusOr<Dataset> d = readIdxPair(images(), labels());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(message(d), absl::StrCat(labels(), ": corrupt gzip data (incorrect data check)"));

  // The same in a body larger than zlib's buffers, where it shows after the last image.
  Bytes pixels(200000 * 6);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<unsigned char>(i * i >> 7);
  writeGz(images(), idxImages(200000, 2, 3, pixels));
  writeGz(labels(), idxLabels(200000, Bytes(200000, 2)));
  ASSERT_TRUE(readIdxPair(images(), labels()).ok());
  gz = readRaw(images());
  gz[gz.size() - 8] ^= 0xff;
  writePlain(images(), gz);
  d = readIdxPair(images(), labels());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(message(d), absl::StrCat(images(), ": corrupt gzip data (incorrect data check)"));
}

TEST_F(IdxTest, PathIsADirectory) {
  writeGoodPair("train");
  absl::StatusOr<Dataset> d = readIdxPair(dir_, labels());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(message(d), dir_ + " is a directory, not an IDX file");
}

TEST(FashionMnistRealData, LoadsBothSplits) {
  TANDEM_NEED_INSTALLED(tandem::testing::whyNoFashionMnist());
  absl::StatusOr<Dataset> train = loadFashionMnist(kDefaultFashionMnistDir, Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->count, 60000);
  EXPECT_EQ(train->rows, 28);
  EXPECT_EQ(train->cols, 28);
  EXPECT_EQ(train->images.size(), 60000u * 28 * 28);
  EXPECT_EQ(train->labels.size(), 60000u);
  absl::StatusOr<Dataset> test = loadFashionMnist(kDefaultFashionMnistDir, Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(test->count, 10000);
  EXPECT_EQ(test->rows, 28);
  EXPECT_EQ(test->cols, 28);
  // Balanced classes: 6000 and 1000 of each; pixels within [0,1] and not all zero.
  std::vector<int> per_class(10);
  for (int32_t l : train->labels) ++per_class[l];
  EXPECT_EQ(per_class, std::vector<int>(10, 6000));
  const auto [lo, hi] = std::minmax_element(test->images.begin(), test->images.end());
  EXPECT_EQ(*lo, 0.0f);
  EXPECT_EQ(*hi, 1.0f);
}

// A dataset of n 2x2 images whose first pixel is the example's id, labels id % 10.
Dataset idDataset(int64_t n) {
  Dataset d;
  d.count = n;
  d.rows = 2;
  d.cols = 2;
  d.source = "synthetic";
  for (int64_t i = 0; i < n; ++i) {
    d.images.insert(d.images.end(), {static_cast<float>(i), 0.5f, 0.25f, 1.0f});
    d.labels.push_back(static_cast<int32_t>(i % 10));
  }
  return d;
}

// The ids of the valid rows of each batch of one epoch, checking padding on the way.
std::vector<std::vector<int64_t>> runEpoch(BatchLoader& loader, int epoch, int64_t batch) {
  loader.startEpoch(epoch);
  std::vector<std::vector<int64_t>> out;
  while (std::optional<Batch> b = loader.next()) {
    EXPECT_EQ(b->index, static_cast<int64_t>(out.size()));
    std::vector<int64_t> ids;
    for (int64_t r = 0; r < batch; ++r) {
      const float* image = b->field<float>(0) + r * 4;
      if (r < b->valid) {
        const auto id = static_cast<int64_t>(image[0]);
        ids.push_back(id);
        EXPECT_EQ(b->field<int32_t>(1)[r], id % 10);
        EXPECT_EQ(image[3], 1.0f);
      } else {
        EXPECT_EQ(b->field<int32_t>(1)[r], -1) << "padding row " << r;
        EXPECT_THAT(std::vector<float>(image, image + 4), ElementsAre(0, 0, 0, 0));
      }
    }
    out.push_back(ids);
  }
  return out;
}

TEST(BatchLoader, PadsTheLastBatchInFileOrder) {
  Dataset d = idDataset(10);
  BatchLoader loader(d, 4, /*shuffle=*/false, 1, /*drop_last=*/false);
  EXPECT_EQ(loader.batchesPerEpoch(), 3);
  EXPECT_FALSE(loader.next().has_value()) << "no epoch started";
  loader.startEpoch(0);
  std::vector<int64_t> valid;
  while (std::optional<Batch> b = loader.next()) {
    valid.push_back(b->valid);
  }
  EXPECT_THAT(valid, ElementsAre(4, 4, 2));
  EXPECT_FALSE(loader.next().has_value());
  EXPECT_THAT(runEpoch(loader, 1, 4),
              ElementsAre(ElementsAre(0, 1, 2, 3), ElementsAre(4, 5, 6, 7), ElementsAre(8, 9)));
}

// One process's rows of every batch (multi-process runs): the same examples in the same
// rows as the whole batch's, the rest never filled; valid stays the whole batch's.
TEST(BatchLoader, RowsOfOneProcess) {
  Dataset d = idDataset(10);
  BatchLoader whole(d, 4, /*shuffle=*/true, 7, /*drop_last=*/false);
  BatchLoader part(d, 4, /*shuffle=*/true, 7, /*drop_last=*/false);
  part.setRows(1, 3);
  whole.startEpoch(2);
  part.startEpoch(2);
  int batches = 0;
  while (std::optional<Batch> w = whole.next()) {
    std::optional<Batch> p = part.next();
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->valid, w->valid);
    for (int64_t r = 0; r < 4; ++r) {
      const bool mine = r >= 1 && r < 3;
      EXPECT_EQ(p->field<int32_t>(1)[r], mine ? w->field<int32_t>(1)[r] : -1)
          << "batch " << batches << " row " << r;
      EXPECT_EQ(p->field<float>(0)[r * 4], mine ? w->field<float>(0)[r * 4] : 0.0f);
    }
    ++batches;
  }
  EXPECT_EQ(batches, 3);
  EXPECT_FALSE(part.next().has_value());
}

TEST(BatchLoader, DropLastDropsThePartialBatch) {
  Dataset d = idDataset(10);
  BatchLoader loader(d, 4, /*shuffle=*/false, 1, /*drop_last=*/true);
  EXPECT_EQ(loader.batchesPerEpoch(), 2);
  EXPECT_THAT(runEpoch(loader, 0, 4),
              ElementsAre(ElementsAre(0, 1, 2, 3), ElementsAre(4, 5, 6, 7)));
  BatchLoader exact(d, 5, false, 1, true);
  EXPECT_EQ(exact.batchesPerEpoch(), 2);
  const Dataset small = idDataset(3);
  BatchLoader empty(small, 4, true, 1, true);
  EXPECT_EQ(empty.batchesPerEpoch(), 0);
  empty.startEpoch(0);
  EXPECT_FALSE(empty.next().has_value());
}

TEST(BatchLoader, EveryExampleOncePerEpoch) {
  Dataset d = idDataset(103);
  for (bool drop_last : {false, true}) {
    BatchLoader loader(d, 10, /*shuffle=*/true, 7, drop_last, /*prefetch=*/3);
    for (int epoch = 0; epoch < 3; ++epoch) {
      std::vector<int64_t> seen;
      for (const auto& ids : runEpoch(loader, epoch, 10)) {
        seen.insert(seen.end(), ids.begin(), ids.end());
      }
      const std::set<int64_t> distinct(seen.begin(), seen.end());
      EXPECT_EQ(distinct.size(), seen.size()) << "an example came twice";
      EXPECT_EQ(seen.size(), drop_last ? 100u : 103u);
      EXPECT_GE(*distinct.begin(), 0);
      EXPECT_LT(*distinct.rbegin(), 103);
    }
  }
}

TEST(BatchLoader, ShuffleIsDeterministicPerSeedAndEpoch) {
  Dataset d = idDataset(50);
  BatchLoader a(d, 8, true, 42, false);
  BatchLoader b(d, 8, true, 42, false, /*prefetch=*/1);
  BatchLoader c(d, 8, true, 43, false);
  const auto a0 = runEpoch(a, 0, 8);
  EXPECT_EQ(a0, runEpoch(b, 0, 8)) << "same seed and epoch, same order";
  EXPECT_NE(a0, runEpoch(a, 1, 8)) << "epochs differ";
  EXPECT_NE(a0, runEpoch(c, 0, 8)) << "seeds differ";
  EXPECT_EQ(a0, runEpoch(a, 0, 8)) << "an epoch replays";
}

TEST(BatchLoader, PermutationIsFixedAcrossPlatforms) {
  // mt19937_64's output is fixed by the standard and the shuffle is written out, so these
  // values are the same with every compiler and library (checked against an independent
  // Python implementation of mt19937_64, splitmix64 and the same Fisher–Yates).
  const std::vector<int64_t> p = epochPermutation(10, 42, 0);
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_THAT(sorted, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
  EXPECT_THAT(p, ElementsAre(9, 6, 2, 0, 1, 4, 3, 8, 5, 7));
  EXPECT_NE(p, epochPermutation(10, 42, 1));
  EXPECT_TRUE(epochPermutation(0, 1, 0).empty());
  EXPECT_THAT(epochPermutation(1, 1, 0), ElementsAre(0));
}

TEST(BatchLoader, DestroyedMidEpoch) {
  Dataset d = idDataset(1000);
  for (int prefetch : {1, 2, 4}) {
    {
      BatchLoader loader(d, 16, true, 3, false, prefetch);
      loader.startEpoch(0);
      ASSERT_TRUE(loader.next().has_value());
    }  // the producer is waiting for a free slot here
    {
      BatchLoader loader(d, 16, true, 3, false, prefetch);
      loader.startEpoch(0);  // destroyed while the producer may still be shuffling
    }
    { BatchLoader never_started(d, 16, true, 3, false, prefetch); }
  }
}

TEST(BatchLoader, RestartingAnEpochDropsItsBatches) {
  Dataset d = idDataset(100);
  BatchLoader loader(d, 10, true, 5, false);
  const auto full = runEpoch(loader, 1, 10);
  loader.startEpoch(0);
  ASSERT_TRUE(loader.next().has_value());
  ASSERT_TRUE(loader.next().has_value());
  EXPECT_EQ(runEpoch(loader, 1, 10), full);
}

}  // namespace
}  // namespace tandem::runtime::data
