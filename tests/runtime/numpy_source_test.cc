// NumpySource: .npy and .npz files written by NumPy itself (the outside oracle of the
// format), the conversion of their element types, the refusals and bad data (exact
// one-line messages), and the bounded resident set of a mapped file.

#include "runtime/data/numpy_source.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/data/batch_loader.h"
#include "runtime/data/mapped_file.h"
#include "tests/test_util.h"

namespace tandem::runtime::data {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

std::string whyNoNumpy() {
  testing::CommandResult r = testing::runProgram("/usr/bin/python3", {"-c", "import numpy"});
  return r.exit_code == 0 ? "" : "/usr/bin/python3 cannot import numpy: " + r.err;
}

class NumpySourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tandem_numpy_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { testing::runProgram("/bin/rm", {"-rf", dir_}); }

  // Runs `code` with numpy as np and the test's directory as d.
  void python(const std::string& code) {
    testing::CommandResult r = testing::runProgram(
        "/usr/bin/python3", {"-c", "import numpy as np, sys\nd = sys.argv[1]\n" + code, dir_});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream f(path(name), std::ios::binary);
    f << bytes;
  }

  std::string dir_;
};

// A .npy file as numpy.save writes it (version 1), from its header dict and bytes.
std::string npy(const std::string& dict, const std::string& data) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

template <typename T>
std::string bytesOf(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <typename T>
std::vector<T> readField(const ExampleSource& s, int64_t index, size_t field) {
  std::vector<std::vector<char>> bufs;
  std::vector<void*> out;
  for (const Field& f : s.fields()) bufs.emplace_back(static_cast<size_t>(f.bytes()));
  for (auto& b : bufs) out.push_back(b.data());
  absl::Status st = s.read(index, {}, out);
  EXPECT_TRUE(st.ok()) << st;
  std::vector<T> v(bufs[field].size() / sizeof(T));
  std::memcpy(v.data(), bufs[field].data(), bufs[field].size());
  return v;
}

TEST_F(NumpySourceTest, NpzStoredAndCompressedInferXAndY) {
  TANDEM_NEED_INSTALLED(whyNoNumpy());
  python(
      "x = np.arange(5 * 6, dtype=np.float32).reshape(5, 2, 3) / 4\n"
      "y = np.array([3, 0, 4, 1, 2], dtype=np.int64)\n"
      "np.savez(d + '/plain.npz', y=y, x=x, other=np.zeros(2))\n"
      "np.savez_compressed(d + '/packed.npz', x=x, y=y)\n");
  for (const char* name : {"plain.npz", "packed.npz"}) {
    SCOPED_TRACE(name);
    auto source = NumpySource::openNpz(path(name));
    ASSERT_TRUE(source.ok()) << source.status();
    const ExampleSource& s = **source;
    EXPECT_EQ(s.where(), "npz:" + path(name));
    EXPECT_EQ(s.size(), 5);
    ASSERT_EQ(s.fields().size(), 2u);
    EXPECT_EQ(s.fields()[0].text(), "x: f32[2,3]");
    EXPECT_EQ(s.fields()[1].text(), "y: i32[]");
    EXPECT_EQ(s.classLabels(), (std::pair<std::string, int64_t>{"y", 5}));
    EXPECT_THAT(readField<float>(s, 2, 0), ElementsAre(3.0f, 3.25f, 3.5f, 3.75f, 4.0f, 4.25f));
    EXPECT_THAT(readField<int32_t>(s, 2, 1), ElementsAre(4));
  }
}

TEST_F(NumpySourceTest, NpzGivenBindingsAndEveryArrayInferred) {
  TANDEM_NEED_INSTALLED(whyNoNumpy());
  python(
      "np.savez(d + '/a.npz', images=np.ones((3, 4), np.float32), "
      "labels=np.array([1, 0, 1], np.int32))\n"
      "np.savez(d + '/column.npz', x=np.ones((3, 4), np.float32), y=np.array([[1], [0], [2]]))\n");
  auto column = NumpySource::openNpz(path("column.npz"));
  ASSERT_TRUE(column.ok()) << column.status();
  EXPECT_EQ((*column)->fields()[1].text(), "y: i32[]");
  EXPECT_EQ((*column)->classLabels(), (std::pair<std::string, int64_t>{"y", 3}));
  EXPECT_THAT(readField<int32_t>(**column, 2, 1), ElementsAre(2));
  auto given = NumpySource::openNpz(path("a.npz"), {{"x", "images"}, {"y", "labels"}});
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ((*given)->fields()[0].text(), "x: f32[4]");
  EXPECT_EQ((*given)->classLabels(), (std::pair<std::string, int64_t>{"y", 2}));
  auto inferred = NumpySource::openNpz(path("a.npz"));
  ASSERT_TRUE(inferred.ok()) << inferred.status();
  ASSERT_EQ((*inferred)->fields().size(), 2u);
  EXPECT_EQ((*inferred)->fields()[0].text(), "images: f32[4]");
  EXPECT_EQ((*inferred)->fields()[1].text(), "labels: i32[]");
  EXPECT_EQ((*inferred)->classLabels().second, 0);  // no field named y
  EXPECT_EQ(
      NumpySource::openNpz(path("a.npz"), {{"x", "pixels"}}).status().message(),
      absl::StrCat("npz file '", path("a.npz"), "': no array 'pixels' (it holds images, labels)"));
}

TEST_F(NumpySourceTest, ElementTypesConvertToTheIrs) {
  TANDEM_NEED_INSTALLED(whyNoNumpy());
  python(
      "v = np.array([[0, 1, 200, 7]])\n"
      "a = dict(u1=v.astype(np.uint8), u2=(v * 300).astype(np.uint16),\n"
      "         i1=(-v // 2).astype(np.int8), i2=(-v * 100).astype(np.int16),\n"
      "         b=(v > 1), i8=(v * 10**6).astype(np.int64), u4=v.astype(np.uint32),\n"
      "         f8=(v / 8).astype(np.float64), f2=(v / 4).astype(np.float16))\n"
      "np.savez(d + '/t.npz', **a)\n"
      "for k in a: np.save(d + '/' + k + '.npy', a[k])\n");
  auto s = NumpySource::openNpz(path("t.npz"));
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<std::string> texts;
  for (const Field& f : (*s)->fields()) texts.push_back(f.text());
  EXPECT_THAT(texts,
              ElementsAre("u1: i32[4]", "u2: i32[4]", "i1: i32[4]", "i2: i32[4]", "b: i32[4]",
                          "i8: i32[4]", "u4: i32[4]", "f8: f32[4]", "f2: f32[4]"));
  EXPECT_THAT(readField<int32_t>(**s, 0, 0), ElementsAre(0, 1, 200, 7));
  EXPECT_THAT(readField<int32_t>(**s, 0, 1), ElementsAre(0, 300, 60000, 2100));
  EXPECT_THAT(readField<int32_t>(**s, 0, 2), ElementsAre(0, -1, -100, -4));
  EXPECT_THAT(readField<int32_t>(**s, 0, 3), ElementsAre(0, -100, -20000, -700));
  EXPECT_THAT(readField<int32_t>(**s, 0, 4), ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(readField<int32_t>(**s, 0, 5), ElementsAre(0, 1000000, 200000000, 7000000));
  EXPECT_THAT(readField<int32_t>(**s, 0, 6), ElementsAre(0, 1, 200, 7));
  EXPECT_THAT(readField<float>(**s, 0, 7), ElementsAre(0.0f, 0.125f, 25.0f, 0.875f));
  EXPECT_THAT(readField<float>(**s, 0, 8), ElementsAre(0.0f, 0.25f, 50.0f, 1.75f));
  // The same arrays as .npy files.
  auto npy_files = NumpySource::openNpy({{"a", path("u2.npy")}, {"b", path("f2.npy")}});
  ASSERT_TRUE(npy_files.ok()) << npy_files.status();
  EXPECT_EQ((*npy_files)->where(), absl::StrCat("npy:a=", path("u2.npy"), ",b=", path("f2.npy")));
  EXPECT_THAT(readField<int32_t>(**npy_files, 0, 0), ElementsAre(0, 300, 60000, 2100));
  EXPECT_THAT(readField<float>(**npy_files, 0, 1), ElementsAre(0.0f, 0.25f, 50.0f, 1.75f));
}

TEST_F(NumpySourceTest, FormatVersionsOneTwoThree) {
  TANDEM_NEED_INSTALLED(whyNoNumpy());
  python(
      "from numpy.lib import format\n"
      "for v in (1, 2, 3):\n"
      "  with open(d + '/v%d.npy' % v, 'wb') as f:\n"
      "    format.write_array(f, np.arange(6, dtype='<f4').reshape(3, 2), version=(v, 0))\n");
  for (int v : {1, 2, 3}) {
    auto s = NumpySource::openNpy({{"x", path(absl::StrCat("v", v, ".npy"))}});
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ((*s)->size(), 3);
    EXPECT_THAT(readField<float>(**s, 2, 0), ElementsAre(4.0f, 5.0f));
  }
}

TEST_F(NumpySourceTest, RefusesWhatItCannotRead) {
  TANDEM_NEED_INSTALLED(whyNoNumpy());
  python(
      "np.save(d + '/f.npy', np.asfortranarray(np.ones((3, 2), np.float32)))\n"
      "np.save(d + '/be.npy', np.ones(3, '>f4'))\n"
      "np.save(d + '/o.npy', np.array([1, 'a'], dtype=object), allow_pickle=True)\n"
      "np.save(d + '/c.npy', np.ones(3, np.complex64))\n");
  auto message = [&](const std::string& name) {
    return std::string(NumpySource::openNpy({{"x", path(name)}}).status().message());
  };
  EXPECT_EQ(message("f.npy"), absl::StrCat("npy file '", path("f.npy"),
                                           "': Fortran-order array: only C order is read "
                                           "(numpy.ascontiguousarray makes one)"));
  EXPECT_EQ(message("be.npy"),
            absl::StrCat("npy file '", path("be.npy"),
                         "': big-endian array (>f4): only little-endian arrays are read "
                         "(numpy: a.astype(a.dtype.newbyteorder('<')))"));
  EXPECT_EQ(message("o.npy"), absl::StrCat("npy file '", path("o.npy"),
                                           "': array of Python objects (|O): only arrays of "
                                           "numbers are read"));
  EXPECT_EQ(message("c.npy"),
            absl::StrCat("npy file '", path("c.npy"),
                         "': unsupported element type '<c8' (bool, integers and floats are "
                         "read: |b1, |u1, |i1, <i2, <u2, <i4, <u4, <i8, <u8, <f2, <f4, <f8)"));
  EXPECT_EQ(message("missing.npy"), absl::StrCat("cannot read npy file '", path("missing.npy"),
                                                 "': No such file or directory"));
  EXPECT_EQ(std::string(NumpySource::openNpy({{"x", dir_}}).status().message()),
            absl::StrCat("npy file '", dir_, "' is a directory, not an .npy file"));
}

// The bad-data cases, each the exact one-line message (bytes written here, not by numpy).
TEST_F(NumpySourceTest, BadDataMessages) {
  const std::string f4 = bytesOf(std::vector<float>{1, 2, 3, 4});
  write("corrupt.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2) ", f4));
  write("truncated.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", f4));
  write("empty.npy", "");
  write("x.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", f4));
  write("y3.npy", npy("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }",
                      bytesOf(std::vector<int64_t>{0, 1, 2})));
  write("yneg.npy", npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }",
                        bytesOf(std::vector<int64_t>{0, -1})));
  write("ybig.npy", npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }",
                        bytesOf(std::vector<int64_t>{0, int64_t{1} << 33})));
  write("xbig.npy", npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }",
                        bytesOf(std::vector<int64_t>{0, int64_t{-1} << 40})));
  write("y2.npy", npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }",
                      bytesOf(std::vector<int32_t>{9, 10})));
  auto message = [&](std::vector<ArrayBinding> b, NumpyOptions o = {}) {
    return std::string(NumpySource::openNpy(std::move(b), o).status().message());
  };
  EXPECT_EQ(message({{"x", path("corrupt.npy")}}),
            absl::StrCat("npy file '", path("corrupt.npy"),
                         "': corrupt .npy header: expected ',' or '}'"));
  EXPECT_EQ(message({{"x", path("truncated.npy")}}),
            absl::StrCat("npy file '", path("truncated.npy"),
                         "': truncated array data: the file holds 16 bytes of it, shape (3, 2) "
                         "of <f4 needs 24"));
  EXPECT_EQ(message({{"x", path("empty.npy")}}),
            absl::StrCat("npy file '", path("empty.npy"), "': empty file, not a .npy file"));
  EXPECT_EQ(message({{"x", path("x.npy")}, {"y", path("y3.npy")}}),
            absl::StrCat("npy files '", path("x.npy"), "' and '", path("y3.npy"),
                         "' disagree in length: 2 and 3 examples"));
  EXPECT_EQ(message({{"x", path("x.npy")}, {"y", path("yneg.npy")}}),
            absl::StrCat("npy file '", path("yneg.npy"),
                         "': label -1 of example 1 is out of range (class ids are 0 to 2^31-1)"));
  EXPECT_EQ(message({{"x", path("x.npy")}, {"y", path("ybig.npy")}}),
            absl::StrCat("npy file '", path("ybig.npy"),
                         "': label 8589934592 of example 1 is out of range (class ids are 0 to "
                         "2^31-1)"));
  EXPECT_EQ(message({{"x", path("x.npy")}, {"y", path("y2.npy")}}, {.classes = 10}),
            absl::StrCat("npy file '", path("y2.npy"),
                         "': label 10 of example 1 is out of range [0, 10)"));
  // An integer beyond i32 outside the labels: found when its example is read.
  auto s = NumpySource::openNpy({{"ids", path("xbig.npy")}});
  ASSERT_TRUE(s.ok()) << s.status();
  int32_t v;
  void* out[] = {&v};
  EXPECT_TRUE((*s)->read(0, {}, out).ok());
  EXPECT_EQ((*s)->read(1, {}, out).message(),
            absl::StrCat("npy file '", path("xbig.npy"),
                         "': example 1: value -1099511627776 does not fit i32 (element 0 of the "
                         "example)"));
}

TEST_F(NumpySourceTest, BadNpzMessages) {
  write("empty.npz", "");
  write("text.npz", "not a zip archive at all, just some text that is long enough");
  EXPECT_EQ(NumpySource::openNpz(path("empty.npz")).status().message(),
            absl::StrCat("npz file '", path("empty.npz"),
                         "': empty file, not a zip archive (an .npz is one)"));
  EXPECT_EQ(NumpySource::openNpz(path("text.npz")).status().message(),
            absl::StrCat("npz file '", path("text.npz"), "': not a zip archive (an .npz is one)"));
  TANDEM_NEED_INSTALLED(whyNoNumpy());
  python(
      "np.savez(d + '/short.npz', x=np.ones((4, 3), np.float32), y=np.arange(3))\n"
      "np.savez(d + '/neg.npz', x=np.ones((3, 3), np.float32), y=np.array([0, 2, -1]))\n"
      "data = open(d + '/short.npz', 'rb').read()\n"
      "open(d + '/cut.npz', 'wb').write(data[:len(data) // 2])\n");
  EXPECT_EQ(NumpySource::openNpz(path("short.npz")).status().message(),
            absl::StrCat("npz file '", path("short.npz"),
                         "': arrays 'x' and 'y' disagree in length: 4 and 3 examples"));
  EXPECT_EQ(NumpySource::openNpz(path("neg.npz")).status().message(),
            absl::StrCat("npz file '", path("neg.npz"),
                         "': array 'y': label -1 of example 2 is out of range (class ids are 0 "
                         "to 2^31-1)"));
  EXPECT_EQ(NumpySource::openNpz(path("cut.npz")).status().message(),
            absl::StrCat("npz file '", path("cut.npz"), "': not a zip archive (an .npz is one)"));
}

// Every cut and every damaged byte of files numpy wrote is a one-line error when opened or
// read, never a crash or a read out of bounds (the address sanitizer's build runs this too).
TEST_F(NumpySourceTest, DamagedFilesAreOneLineErrors) {
  TANDEM_NEED_INSTALLED(whyNoNumpy());
  python(
      "x = np.arange(24, dtype=np.float32).reshape(4, 2, 3)\n"
      "y = np.array([1, 0, 3, 2])\n"
      "np.savez(d + '/plain.npz', x=x, y=y)\n"
      "np.savez_compressed(d + '/packed.npz', x=x, y=y)\n"
      "np.save(d + '/a.npy', x)\n");
  for (const char* name : {"plain.npz", "packed.npz", "a.npy"}) {
    SCOPED_TRACE(name);
    const std::string good = testing::readFile(path(name));
    const bool npz = absl::EndsWith(name, ".npz");
    const std::string damaged = path("damaged");
    auto open = [&](const std::string& bytes) {
      write("damaged", bytes);
      if (npz) return NumpySource::openNpz(damaged);
      return NumpySource::openNpy({ArrayBinding{"x", damaged}});
    };
    auto one_line = [](const absl::Status& s) {
      return !s.message().empty() && s.message().find('\n') == absl::string_view::npos;
    };
    for (size_t cut = 0; cut < good.size(); ++cut) {
      auto s = open(good.substr(0, cut));
      ASSERT_FALSE(s.ok()) << "cut at " << cut;
      ASSERT_TRUE(one_line(s.status())) << s.status();
    }
    int opened = 0;
    for (size_t at = 0; at < good.size(); ++at)
      for (unsigned char mask : {0xffu, 0x01u}) {
        std::string bytes = good;
        bytes[at] = static_cast<char>(bytes[at] ^ mask);
        auto s = open(bytes);
        if (!s.ok()) {
          ASSERT_TRUE(one_line(s.status())) << s.status();
          continue;
        }
        ++opened;
        std::vector<std::vector<char>> bufs;
        std::vector<void*> out;
        for (const Field& f : (*s)->fields()) bufs.emplace_back(static_cast<size_t>(f.bytes()));
        for (auto& b : bufs) out.push_back(b.data());
        for (int64_t i = 0; i < (*s)->size(); ++i) {
          absl::Status r = (*s)->read(i, {}, out);
          if (!r.ok()) {
            ASSERT_TRUE(one_line(r)) << r;
          }
        }
      }
    EXPECT_GT(opened, 0);  // damaged values in the data itself still open
  }
}

int64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// Reading every example of a 48 MiB file, in a shuffled order as training does, keeps
// next to nothing of it resident; reading it through its mapping would keep all of it
// (checked too, so that the measurement is seen to work).
TEST_F(NumpySourceTest, ResidentSetStaysBounded) {
  constexpr int64_t kRows = 12288, kCols = 1024;  // 48 MiB of f32
  {
    std::ofstream f(path("big.npy"), std::ios::binary);
    f << npy(absl::StrCat("{'descr': '<f4', 'fortran_order': False, 'shape': (", kRows, ", ", kCols,
                          "), }"),
             "");
    std::vector<float> row(kCols);
    for (int64_t i = 0; i < kRows; ++i) {
      row[0] = static_cast<float>(i);
      f.write(reinterpret_cast<const char*>(row.data()), kCols * 4);
    }
  }
  {
    auto mapped = MappedFile::open(path("big.npy"), {"big.npy", "an .npy file"});
    ASSERT_TRUE(mapped.ok()) << mapped.status();
    const int64_t before = residentBytes();
    volatile char sum = 0;
    for (int64_t at = 0; at < (*mapped)->size(); at += 4096) sum = sum + (*mapped)->data()[at];
    EXPECT_GT(residentBytes() - before, int64_t{40} << 20);
  }
  auto s = NumpySource::openNpy({{"x", path("big.npy")}});
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<float> x(kCols);
  void* out[] = {x.data()};
  const std::vector<int64_t> order = epochPermutation(kRows, 1, 0);
  const int64_t before = residentBytes();
  int64_t peak = before;
  for (int64_t p = 0; p < kRows; ++p) {
    const int64_t i = order[static_cast<size_t>(p)];
    ASSERT_TRUE((*s)->read(i, {}, out).ok());
    ASSERT_EQ(x[0], static_cast<float>(i));
    if (p % 256 == 0) peak = std::max(peak, residentBytes());
  }
  EXPECT_LT(std::max(peak, residentBytes()) - before, int64_t{8} << 20);

  // Loader threads reading at once: each reads its rows.
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::vector<float> row(kCols);
      void* row_out[] = {row.data()};
      for (int64_t i = t; i < kRows; i += 4) {
        if (!(*s)->read(i, {}, row_out).ok() || row[0] != static_cast<float>(i)) ++wrong[t];
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong, std::vector<int>(4, 0));
}

// A file cut short after the source opened it: the example past its end is an error (a
// mapping would have killed the process with SIGBUS).
TEST_F(NumpySourceTest, FileCutShortWhileOpen) {
  const std::string file = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), }",
                               bytesOf(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
  write("x.npy", file);
  auto s = NumpySource::openNpy({{"x", path("x.npy")}});
  ASSERT_TRUE(s.ok()) << s.status();
  // Cut to the first two examples.
  ASSERT_EQ(::truncate(path("x.npy").c_str(), static_cast<off_t>(file.size() - 16)), 0);
  float x[2];
  void* out[] = {x};
  EXPECT_TRUE((*s)->read(1, {}, out).ok());
  EXPECT_EQ((*s)->read(3, {}, out).message(),
            absl::StrCat("npy file '", path("x.npy"),
                         "': cannot read example 3: the file is shorter than when it was opened"));
}

}  // namespace
}  // namespace tandem::runtime::data
