// openSource: the --data spec's forms and its one-line errors, the --val-fraction split,
// and scikit-learn's digits (written to an .npz by tests/runtime/write_digits_npz.py)
// read back against the CSV they came from.

#include "runtime/data/open_source.h"

#include <stdlib.h>
#include <zlib.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/data/memory_source.h"
#include "runtime/data/subset_source.h"
#include "runtime/data/text_source.h"
#include "tests/test_util.h"

namespace tandem::runtime::data {
namespace {

constexpr char kDigitsCsv[] = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";

class OpenSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tandem_open_source_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { testing::runProgram("/bin/rm", {"-rf", dir_}); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream f(path(name), std::ios::binary);
    f << bytes;
  }
  std::string message(const std::string& spec, const SourceOptions& o = {}) const {
    return std::string(openSource(spec, o).status().message());
  }
  std::string dir_;
};

std::vector<std::string> fieldTexts(const ExampleSource& s) {
  std::vector<std::string> out;
  for (const Field& f : s.fields()) out.push_back(f.text());
  return out;
}

std::string whyNoNumpy() {
  testing::CommandResult r = testing::runProgram("/usr/bin/python3", {"-c", "import numpy"});
  return r.exit_code == 0 ? "" : "/usr/bin/python3 cannot import numpy: " + r.err;
}

TEST_F(OpenSourceTest, SpecForms) {
  TANDEM_NEED_INSTALLED(whyNoNumpy());
  testing::CommandResult r = testing::runProgram(
      "/usr/bin/python3",
      {"-c",
       "import numpy as np, sys\n"
       "d = sys.argv[1]\n"
       "np.savez(d + '/a.npz', images=np.ones((6, 2, 2), np.float32), labels=np.arange(6) % 3)\n"
       "np.save(d + '/x.npy', np.ones((6, 3), np.float64))\n"
       "np.save(d + '/y.npy', np.arange(6, dtype=np.uint8))\n"
       "np.arange(100, dtype=np.uint32).tofile(d + '/t.bin')\n"
       "open(d + '/b.txt', 'w').write('hello world, hello tandem')\n",
       dir_});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  auto npz = openSource("npz:" + path("a.npz") + ":x=images,y=labels");
  ASSERT_TRUE(npz.ok()) << npz.status();
  EXPECT_THAT(fieldTexts(**npz), ::testing::ElementsAre("x: f32[2,2]", "y: i32[]"));
  EXPECT_EQ((*npz)->classLabels(), (std::pair<std::string, int64_t>{"y", 3}));

  auto npy = openSource("npy:x=" + path("x.npy") + ",y=" + path("y.npy"));
  ASSERT_TRUE(npy.ok()) << npy.status();
  EXPECT_THAT(fieldTexts(**npy), ::testing::ElementsAre("x: f32[3]", "y: i32[]"));
  EXPECT_EQ((*npy)->classLabels().second, 6);
  auto one = openSource("npy:" + path("x.npy"), {.limit = 4});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_THAT(fieldTexts(**one), ::testing::ElementsAre("x: f32[3]"));
  EXPECT_EQ((*one)->size(), 4);

  auto tokens = openSource("tokens:" + path("t.bin") + ":u32:length=8", {.vocabulary = 100});
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ((*tokens)->size(), 99 / 8);
  EXPECT_THAT(fieldTexts(**tokens), ::testing::ElementsAre("x: i32[8]", "y: i32[8]"));
  auto given_length = openSource("tokens:" + path("t.bin") + ":u32", {.length = 10});
  ASSERT_TRUE(given_length.ok()) << given_length.status();
  EXPECT_EQ((*given_length)->fields()[0].text(), "x: i32[10]");

  auto text = openSource("text:" + path("b.txt") + ":length=4");
  ASSERT_TRUE(text.ok()) << text.status();
  const auto* chars = dynamic_cast<const TextSource*>(text->get());
  ASSERT_NE(chars, nullptr);
  EXPECT_EQ(chars->vocabulary().decode({0, 1, 2}), " ,a");
  auto limited = openSource("text:" + path("b.txt") + ":length=4", {.limit = 2});
  ASSERT_TRUE(limited.ok()) << limited.status();
  ASSERT_NE(textVocabularyOf(**limited), nullptr);
  EXPECT_EQ(textVocabularyOf(**limited)->decode({0, 1, 2}), " ,a");
  EXPECT_EQ(textVocabularyOf(**npz), nullptr);
  EXPECT_EQ(splitValidation(std::shared_ptr<const ExampleSource>(*std::move(limited)), 0.5)
                .status()
                .message(),
            absl::StrCat("--val-fraction splits examples, but text:", path("b.txt"),
                         " draws random windows from all of its tokens: give a separate "
                         "validation file"));
  auto bytes = openSource("text:" + path("b.txt") + ":bytes:length=4");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_TRUE(dynamic_cast<const TextSource&>(**bytes).vocabulary().isBytes());
}

TEST_F(OpenSourceTest, FashionMnist) {
  TANDEM_NEED_INSTALLED(testing::whyNoFashionMnist());
  auto s = openSource("fashion-mnist", {.split = Split::kTest, .limit = 10});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->size(), 10);
  EXPECT_EQ((*s)->where(), std::string(testing::kFashionMnistDir) + "/t10k-images-idx3-ubyte.gz");
  auto dir = openSource(std::string("fashion-mnist:") + testing::kFashionMnistDir,
                        {.split = Split::kTest, .limit = 10});
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_THAT(fieldTexts(**dir), ::testing::ElementsAre("x: f32[1,28,28]", "y: i32[]"));
}

TEST_F(OpenSourceTest, SpecErrors) {
  EXPECT_EQ(message(""),
            "--data '': empty (fashion-mnist[:DIR], npz:FILE[:FIELD=ARRAY,...], npy:FILE or "
            "npy:FIELD=FILE,..., tokens:FILE[:u16|:u32][:length=N][:vocab=N], "
            "text:FILE[:chars|:bytes][:length=N][:vocab=N], "
            "images:DIR[:size=S|:size=HxW][:by-name])");
  EXPECT_EQ(message("csv:a.csv", {.setting = "--test-data"}),
            "--test-data 'csv:a.csv': unknown kind of data 'csv' (fashion-mnist[:DIR], "
            "npz:FILE[:FIELD=ARRAY,...], npy:FILE or npy:FIELD=FILE,..., "
            "tokens:FILE[:u16|:u32][:length=N][:vocab=N], "
            "text:FILE[:chars|:bytes][:length=N][:vocab=N], "
            "images:DIR[:size=S|:size=HxW][:by-name])");
  EXPECT_EQ(message("npz:"), "--data 'npz:': no file after 'npz:'");
  EXPECT_EQ(message("npz:d.npz:x=images,y"),
            "--data 'npz:d.npz:x=images,y': 'y' is not FIELD=ARRAY");
  EXPECT_EQ(message("npz:d.npz:x=a,x=b"), "--data 'npz:d.npz:x=a,x=b': field 'x' is given twice");
  EXPECT_EQ(message("npy:x=a.npy,y="), "--data 'npy:x=a.npy,y=': 'y=' is not FIELD=FILE");
  EXPECT_EQ(message("tokens:t.bin"),
            "--data 'tokens:t.bin': no window length: the model gives none, so give :length=N");
  EXPECT_EQ(message("tokens:t.bin:length=0"),
            "--data 'tokens:t.bin:length=0': 'length=0' is not a positive integer");
  EXPECT_EQ(message("images:"), "--data 'images:': no folder after 'images:'");
  EXPECT_EQ(message("images:/data/pets:size=0x4"),
            "--data 'images:/data/pets:size=0x4': 'size=0x4' is not size=S or size=HxW "
            "(positive, at most 65535)");
  EXPECT_EQ(message("images:/data/pets:size=32:by-name"), "images:/data/pets: no such folder");
  // The file at fault, named by the source.
  EXPECT_EQ(
      message("npz:" + path("none.npz")),
      absl::StrCat("cannot read npz file '", path("none.npz"), "': No such file or directory"));
  EXPECT_EQ(
      message("tokens:" + path("none.bin") + ":length=4"),
      absl::StrCat("cannot read tokens file '", path("none.bin"), "': No such file or directory"));
  write("empty.npz", "");
  EXPECT_EQ(message("npz:" + path("empty.npz")),
            absl::StrCat("npz file '", path("empty.npz"),
                         "': empty file, not a zip archive (an .npz is one)"));
}

std::shared_ptr<const ExampleSource> countingSource(int64_t n) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(i);
  std::vector<HostArray> arrays;
  arrays.push_back(HostArray::of<int32_t>("id", std::move(ids), {n}));
  return std::shared_ptr<const ExampleSource>(*MemorySource::create(std::move(arrays)));
}

std::vector<int32_t> idsOf(const ExampleSource& s) {
  std::vector<int32_t> out(static_cast<size_t>(s.size()));
  for (int64_t i = 0; i < s.size(); ++i) {
    void* p[] = {&out[i]};
    EXPECT_TRUE(s.read(i, {}, p).ok());
  }
  return out;
}

TEST(SplitValidation, DeterministicDisjointAndSeeded) {
  auto source = countingSource(100);
  auto a = splitValidation(source, 0.2, 5);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->validation->size(), 20);
  EXPECT_EQ(a->train->size(), 80);
  const std::vector<int32_t> val = idsOf(*a->validation), train = idsOf(*a->train);
  std::set<int32_t> all(val.begin(), val.end());
  all.insert(train.begin(), train.end());
  EXPECT_EQ(all.size(), 100u);  // disjoint, and together every example
  EXPECT_TRUE(std::is_sorted(val.begin(), val.end()));
  // Not the last fifth: a permutation.
  EXPECT_NE(val, std::vector<int32_t>({80, 81, 82, 83, 84, 85, 86, 87, 88, 89,
                                       90, 91, 92, 93, 94, 95, 96, 97, 98, 99}));
  EXPECT_LT(val.front(), 60);
  auto again = splitValidation(source, 0.2, 5);
  EXPECT_EQ(idsOf(*again->validation), val);
  auto other = splitValidation(source, 0.2, 6);
  EXPECT_NE(idsOf(*other->validation), val);
}

TEST(SplitValidation, Errors) {
  auto source = countingSource(10);
  EXPECT_EQ(splitValidation(source, 1.5).status().message(),
            "--val-fraction 1.5 is not between 0 and 1 (0.2 keeps a fifth)");
  EXPECT_EQ(splitValidation(source, 0.01).status().message(),
            "--val-fraction 0.01 of memory's 10 examples leaves no validation example");
  EXPECT_EQ(splitValidation(source, 0.99).status().message(),
            "--val-fraction 0.99 of memory's 10 examples leaves no training example");
}

// The digits bar's data (issue 42): 1,797 8x8 images, read through openSource as a
// classifier's x and y and compared with the CSV scikit-learn ships.
TEST_F(OpenSourceTest, ScikitLearnDigits) {
  TANDEM_NEED_INSTALLED(::access(kDigitsCsv, R_OK) == 0
                            ? ""
                            : absl::StrCat(kDigitsCsv, " is missing (Debian python3-sklearn)"));
  TANDEM_NEED_INSTALLED(whyNoNumpy());
  testing::CommandResult r = testing::runProgram(
      "/usr/bin/python3",
      {testing::sourcePath("tests/runtime/write_digits_npz.py"), kDigitsCsv, path("digits.npz")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto s = openSource("npz:" + path("digits.npz"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->size(), 1797);
  EXPECT_THAT(fieldTexts(**s), ::testing::ElementsAre("x: f32[1,8,8]", "y: i32[]"));
  EXPECT_EQ((*s)->classLabels(), (std::pair<std::string, int64_t>{"y", 10}));
  // The CSV, read here with zlib: 64 pixels in 0..16, then the digit.
  gzFile gz = gzopen(kDigitsCsv, "rb");
  ASSERT_NE(gz, nullptr);
  std::string csv;
  char buf[1 << 16];
  for (int n; (n = gzread(gz, buf, sizeof buf)) > 0;) csv.append(buf, static_cast<size_t>(n));
  gzclose(gz);
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1797u);
  for (int64_t i : {0, 1, 2, 500, 1234, 1796}) {
    std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
    ASSERT_EQ(cells.size(), 65u);
    float x[64];
    int32_t y = -1;
    void* out[] = {x, &y};
    ASSERT_TRUE((*s)->read(i, {}, out).ok());
    for (int k = 0; k < 64; ++k) {
      double v;
      ASSERT_TRUE(absl::SimpleAtod(cells[k], &v));
      EXPECT_EQ(x[k], static_cast<float>(v / 16.0)) << "example " << i << " pixel " << k;
    }
    double label;
    ASSERT_TRUE(absl::SimpleAtod(cells[64], &label));
    EXPECT_EQ(y, static_cast<int32_t>(label)) << "example " << i;
  }
  auto split = splitValidation(std::shared_ptr<const ExampleSource>(*std::move(s)), 0.2);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->validation->size(), 359);
  EXPECT_EQ(split->train->size(), 1438);
}

}  // namespace
}  // namespace tandem::runtime::data
