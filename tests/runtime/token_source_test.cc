// TokenSource (nanoGPT's train.bin: flat uint16/uint32 ids) and TextSource (bytes or
// characters as ids): windows drawn from the example's key, the shift of y, the
// vocabulary (against Python's sorted(set(text)), as nanoGPT's shakespeare_char builds
// it), and the bad-data messages.

#include "runtime/data/token_source.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/data/draws.h"
#include "runtime/data/text_source.h"
#include "tests/test_util.h"

namespace tandem::runtime::data {
namespace {

using ::testing::HasSubstr;

class TokenSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tandem_tokens_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { testing::runProgram("/bin/rm", {"-rf", dir_}); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream f(path(name), std::ios::binary);
    f << bytes;
  }
  template <typename T>
  void writeIds(const std::string& name, const std::vector<T>& ids) const {
    write(name, std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(T)));
  }
  std::string dir_;
};

struct Window {
  std::vector<int32_t> x, y;
};

Window readWindow(const ExampleSource& s, int64_t index, const ExampleKey& key) {
  const int64_t n = s.fields()[0].shape[0];
  Window w{std::vector<int32_t>(n), std::vector<int32_t>(n)};
  void* out[] = {w.x.data(), w.y.data()};
  absl::Status st = s.read(index, key, out);
  EXPECT_TRUE(st.ok()) << st;
  return w;
}

TEST_F(TokenSourceTest, WindowsAreDrawnFromTheKey) {
  std::vector<uint16_t> ids(1000);
  for (int i = 0; i < 1000; ++i) ids[i] = static_cast<uint16_t>(i);
  writeIds("train.bin", ids);
  auto s = TokenSource::open(path("train.bin"), {.length = 8, .vocabulary = 1000});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->where(), "tokens:" + path("train.bin"));
  EXPECT_EQ((*s)->size(), 999 / 8);
  EXPECT_EQ((*s)->fields()[0].text(), "x: i32[8]");
  EXPECT_EQ((*s)->fields()[1].text(), "y: i32[8]");
  std::set<int32_t> starts;
  for (int64_t position = 0; position < 50; ++position) {
    const ExampleKey key{.seed = 7, .epoch = 2, .position = position};
    const Window w = readWindow(**s, position, key);
    // The window at offset key.below(tokens - length), y one token on.
    EXPECT_EQ(w.x[0], static_cast<int32_t>(key.below(1000 - 8, kTokenWindowDraw)));
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(w.x[j], w.x[0] + j);
      EXPECT_EQ(w.y[j], w.x[j] + 1);
    }
    // The key alone decides: another index (a device's or thread's) reads the same window.
    EXPECT_EQ(readWindow(**s, 99 - position, key).x, w.x);
    starts.insert(w.x[0]);
  }
  EXPECT_GT(starts.size(), 40u);
}

TEST_F(TokenSourceTest, Uint32Ids) {
  std::vector<uint32_t> ids = {70000, 70001, 70002, 5, 6};
  writeIds("t.bin", ids);
  auto s = TokenSource::open(path("t.bin"), {.length = 4, .width = 4});
  ASSERT_TRUE(s.ok()) << s.status();
  const Window w = readWindow(**s, 0, {});
  EXPECT_EQ(w.x, (std::vector<int32_t>{70000, 70001, 70002, 5}));
  EXPECT_EQ(w.y, (std::vector<int32_t>{70001, 70002, 5, 6}));
}

TEST_F(TokenSourceTest, BadDataMessages) {
  std::vector<uint16_t> ids(20, 3);
  ids[10] = 5000;
  writeIds("vocab.bin", ids);
  auto s = TokenSource::open(path("vocab.bin"), {.length = 19, .vocabulary = 1000});
  ASSERT_TRUE(s.ok()) << s.status();
  int32_t x[19], y[19];
  void* out[] = {x, y};
  EXPECT_EQ((*s)->read(0, {}, out).message(),
            absl::StrCat("tokens file '", path("vocab.bin"),
                         "': token id 5000 at offset 10 is beyond the vocabulary of 1000"));
  writeIds("cut.bin", std::vector<uint16_t>(20, 3));
  auto cut = TokenSource::open(path("cut.bin"), {.length = 19});
  ASSERT_TRUE(cut.ok()) << cut.status();
  ASSERT_EQ(::truncate(path("cut.bin").c_str(), 20), 0);
  EXPECT_EQ((*cut)->read(0, {}, out).message(),
            absl::StrCat("tokens file '", path("cut.bin"),
                         "': cannot read the window at offset 0: the file is shorter than when it "
                         "was opened"));
  write("odd.bin", "abc");
  EXPECT_EQ(TokenSource::open(path("odd.bin"), {.length = 1}).status().message(),
            absl::StrCat("tokens file '", path("odd.bin"),
                         "': 3 bytes is not a whole number of u16 token ids (:u16 or :u32 says "
                         "which)"));
  write("empty.bin", "");
  EXPECT_EQ(TokenSource::open(path("empty.bin"), {.length = 4}).status().message(),
            absl::StrCat("tokens file '", path("empty.bin"), "': empty file, no tokens"));
  EXPECT_EQ(TokenSource::open(path("vocab.bin"), {.length = 20}).status().message(),
            absl::StrCat("tokens file '", path("vocab.bin"),
                         "': holds 20 tokens, fewer than one window of 20 and the token after "
                         "it"));
  EXPECT_EQ(TokenSource::open(path("missing.bin"), {.length = 4}).status().message(),
            absl::StrCat("cannot read tokens file '", path("missing.bin"),
                         "': No such file or directory"));
}

TEST_F(TokenSourceTest, CharacterVocabularyIsPythonsSortedSet) {
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += absl::StrCat("In the beginning ", i, " — créé ∑ naïve 😀 Ωmega\n");
  write("book.txt", text);
  testing::CommandResult r =
      testing::runProgram("/usr/bin/python3", {"-c",
                                               "import sys\n"
                                               "t = open(sys.argv[1], encoding='utf-8').read()\n"
                                               "sys.stdout.write(''.join(sorted(set(t))))",
                                               path("book.txt")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto s = TextSource::open(path("book.txt"), {.length = 16});
  ASSERT_TRUE(s.ok()) << s.status();
  const TextVocabulary& v = (*s)->vocabulary();
  std::vector<int32_t> all(v.size());
  for (int32_t i = 0; i < v.size(); ++i) all[i] = i;
  EXPECT_EQ(v.decode(all), r.out);
  EXPECT_EQ((*s)->where(), "text:" + path("book.txt"));
  // Every window is a piece of the text, y one character on.
  for (int64_t position = 0; position < 20; ++position) {
    const Window w = readWindow(**s, 0, {.seed = 1, .position = position});
    const std::string x = v.decode(w.x), y = v.decode(w.y);
    EXPECT_THAT(text, HasSubstr(x));
    EXPECT_THAT(text, HasSubstr(y));
    std::vector<int32_t> joined = w.x;
    joined.push_back(w.y.back());
    EXPECT_THAT(text, HasSubstr(v.decode(joined)));
  }
  auto ids = v.encode("créé 😀");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(v.decode(*ids), "créé 😀");
  EXPECT_EQ(v.encode("zebra").status().message(),
            "character U+007A ('z') is not in the vocabulary");
}

TEST_F(TokenSourceTest, BytesAndBadText) {
  write("b.txt", std::string("\xff\0Azz", 5));
  auto bytes = TextSource::open(path("b.txt"), {.length = 4, .bytes = true});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ((*bytes)->vocabulary().size(), 256);
  const Window w = readWindow(**bytes, 0, {});
  EXPECT_EQ(w.x, (std::vector<int32_t>{255, 0, 65, 122}));
  EXPECT_EQ(TextSource::open(path("b.txt"), {.length = 4}).status().message(),
            absl::StrCat("text file '", path("b.txt"),
                         "': not UTF-8 text at byte 0 (text:FILE:bytes reads any file)"));
  write("abc.txt", "abcabcabc");
  EXPECT_EQ(TextSource::open(path("abc.txt"), {.length = 4, .vocabulary = 2}).status().message(),
            absl::StrCat("text file '", path("abc.txt"),
                         "': its 3 characters exceed the model's vocabulary of 2"));
  write("empty.txt", "");
  EXPECT_EQ(TextSource::open(path("empty.txt"), {.length = 4}).status().message(),
            absl::StrCat("text file '", path("empty.txt"), "': empty file, no text"));
}

}  // namespace
}  // namespace tandem::runtime::data
