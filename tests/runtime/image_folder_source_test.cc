// ImageFolderSource: Fashion-MNIST written as a PNG folder (tests/runtime/write_image_folder.py,
// PIL writing the files) read back against the IDX files bit for bit; PNG and JPEG files of
// every PNG color type against PIL's decode of them, equal, not near: PIL decodes PNG with
// its own code over zlib (an independent oracle), JPEG with the libjpeg-turbo Tandem links
// (libjpeg.so.62), whose default IDCT and upsampling both use; resizing against PyTorch's
// interpolate; and bad data, one exact line naming the file.

#include "runtime/data/image_folder_source.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/data/dataset_source.h"
#include "runtime/data/open_source.h"
#include "tests/test_util.h"

namespace tandem::runtime::data {
namespace {

std::string whyNoPil() {
  testing::CommandResult r =
      testing::runProgram("/usr/bin/python3", {"-c", "import numpy, PIL.Image"});
  return r.exit_code == 0 ? "" : "/usr/bin/python3 cannot import numpy and PIL: " + r.err;
}

class ImageFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tandem_images_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { testing::runProgram("/bin/rm", {"-rf", dir_}); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // Runs `code` with numpy as np, PIL's Image and the test's directory as d.
  void python(const std::string& code) {
    testing::CommandResult r = testing::runProgram(
        "/usr/bin/python3",
        {"-c", "import numpy as np, sys, os\nfrom PIL import Image\nd = sys.argv[1]\n" + code,
         dir_});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  void mkdir(const std::string& name) const { ::mkdir(path(name).c_str(), 0755); }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream f(path(name), std::ios::binary);
    f << bytes;
  }
  std::string read(const std::string& name) const {
    std::ifstream f(path(name), std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }
  // The error opening `dir`, which must be the same whether its files are read whole when
  // opened or only their headers are.
  std::string openError(const std::string& dir, ImageFolderOptions o = {}) const {
    const std::string whole(ImageFolderSource::open(path(dir), o).status().message());
    o.file_cache_bytes = 0;
    const std::string headers(ImageFolderSource::open(path(dir), o).status().message());
    EXPECT_EQ(whole, headers) << dir;
    return whole;
  }
  std::string dir_;
};

struct ExampleBytes {
  std::vector<float> x;
  int32_t y = -1;
  bool operator==(const ExampleBytes&) const = default;
};

absl::StatusOr<ExampleBytes> readExample(const ExampleSource& s, int64_t index) {
  ExampleBytes e;
  e.x.resize(static_cast<size_t>(s.fields()[0].elements()));
  std::vector<void*> out = {e.x.data(), &e.y};
  if (absl::Status st = s.read(index, {}, out); !st.ok()) return st;
  return e;
}

// The IDX index a folder example's file name holds ("3-dress/00017.png": 17).
int64_t idxIndexOf(const std::string& file) {
  int64_t i = -1;
  const size_t slash = file.rfind('/');
  EXPECT_TRUE(absl::SimpleAtoi(file.substr(slash + 1, file.size() - slash - 5), &i)) << file;
  return i;
}

TEST_F(ImageFolderTest, FashionMnistPngFolderEqualsIdxFiles) {
  TANDEM_NEED_INSTALLED(whyNoPil());
  constexpr int64_t kCount = 200;
  testing::CommandResult r = testing::runProgram(
      "/usr/bin/python3", {testing::sourcePath("tests/runtime/write_image_folder.py"),
                           testing::kFashionMnistDir, dir_, std::to_string(kCount)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto idx = DatasetSource::openFashionMnist(testing::kFashionMnistDir, Split::kTrain, kCount);
  ASSERT_TRUE(idx.ok()) << idx.status();
  for (bool by_name : {false, true}) {
    SCOPED_TRACE(by_name ? "by name" : "class by class");
    auto folder = openSource("images:" + path("train") + (by_name ? ":by-name" : ""));
    ASSERT_TRUE(folder.ok()) << folder.status();
    const auto& images = dynamic_cast<const ImageFolderSource&>(**folder);
    EXPECT_EQ(images.where(), "images:" + path("train"));
    ASSERT_EQ(images.size(), kCount);
    EXPECT_EQ(images.fields(), (*idx)->fields());
    EXPECT_EQ(images.classLabels(), (std::pair<std::string, int64_t>{"y", 10}));
    EXPECT_EQ(images.classes().front(), "0-t-shirt-top");
    EXPECT_EQ(images.classes().back(), "9-ankle-boot");
    for (int64_t i = 0; i < kCount; ++i) {
      const int64_t k = idxIndexOf(images.file(i));
      // By name, example i is the IDX file's example i: the same shuffled epochs.
      if (by_name) {
        ASSERT_EQ(k, i) << images.file(i);
      }
      absl::StatusOr<ExampleBytes> a = readExample(images, i), b = readExample(**idx, k);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(b.ok()) << b.status();
      ASSERT_EQ(*a, *b) << images.file(i);  // bit for bit: x's floats and y
    }
  }
  // The examples read on two threads at once are those read on one.
  auto folder = ImageFolderSource::open(path("train"));
  ASSERT_TRUE(folder.ok()) << folder.status();
  std::vector<ExampleBytes> one(kCount), two(kCount);
  for (int64_t i = 0; i < kCount; ++i) one[static_cast<size_t>(i)] = *readExample(**folder, i);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int64_t i = t; i < kCount; i += 2)
        two[static_cast<size_t>(i)] = *readExample(**folder, i);
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(one, two);
}

// Every kind of PNG PIL writes, and JPEGs, against PIL's own decode with convert("RGB")
// (a set with colour) or convert("L") (all grayscale) and ToTensor's / 255. Not PIL for
// 16-bit grayscale: PIL 9 clips its values to 255 (nearly every pixel white); Tandem takes
// their high byte, as PIL does for 16-bit RGB.
TEST_F(ImageFolderTest, PngAndJpegEqualPilDecode) {
  TANDEM_NEED_INSTALLED(whyNoPil());
  python(R"(
rng = np.random.default_rng(7)
rgb = rng.integers(0, 256, (13, 17, 3), dtype=np.uint8)
rgb[:, :9] = rgb[:, :9] // 2  # some structure, so that JPEG's blocks differ
gray = rng.integers(0, 256, (13, 17), dtype=np.uint8)
alpha = rng.integers(0, 256, (13, 17, 1), dtype=np.uint8)
wide = rng.integers(0, 65536, (13, 17), dtype=np.uint16)
images = {
    'rgb.png': Image.fromarray(rgb),
    'rgba.png': Image.fromarray(np.concatenate([rgb, alpha], 2), 'RGBA'),
    'palette.png': Image.fromarray(rgb).quantize(37),
    'rgb.jpg': Image.fromarray(rgb),
    'gray.png': Image.fromarray(gray),
    'gray_alpha.png': Image.fromarray(np.stack([gray, alpha[..., 0]], 2), 'LA'),
    'bits.png': Image.fromarray(gray > 127),
    'gray.jpg': Image.fromarray(gray),
    'gray16.png': Image.fromarray(wide),
}
for folder in ('rgb/a', 'rgb/b', 'gray/a', 'gray/b', 'expect'):
    os.makedirs(d + '/' + folder)
for name, image in images.items():
    colour = name in ('rgb.png', 'rgba.png', 'palette.png', 'rgb.jpg')
    for s in ('rgb',) + (() if colour else ('gray',)):
        # The JPEGs in class b, the PNGs in class a; a JPEG file named .png: by content.
        cls = 'b' if name.endswith('.jpg') else 'a'
        file = name.replace('.jpg', '_jpeg.png') if s == 'gray' else name
        image.save(d + f'/{s}/{cls}/{file}', 'JPEG' if name.endswith('.jpg') else 'PNG',
                   **({'quality': 90} if name.endswith('.jpg') else {}))
        back = Image.open(d + f'/{s}/{cls}/{file}')
        if name == 'gray16.png':
            v = np.asarray(back, np.uint16) >> 8
            v = np.stack([v] * 3, 2) if s == 'rgb' else v[..., None]
        else:
            v = np.asarray(back.convert('RGB' if s == 'rgb' else 'L'))
            v = v if v.ndim == 3 else v[..., None]
        (v.astype(np.float32) / np.float32(255)).transpose(2, 0, 1).tofile(
            d + f'/expect/{s}_{file}.f32')
)");
  for (const char* set : {"rgb", "gray"}) {
    SCOPED_TRACE(set);
    auto source = ImageFolderSource::open(path(set));
    ASSERT_TRUE(source.ok()) << source.status();
    const int64_t channels = std::string(set) == "rgb" ? 3 : 1;
    EXPECT_EQ((*source)->fields()[0].text(), absl::StrCat("x: f32[", channels, ",13,17]"));
    EXPECT_EQ((*source)->size(), std::string(set) == "rgb" ? 9 : 5);
    for (int64_t i = 0; i < (*source)->size(); ++i) {
      const std::string file = (*source)->file(i);
      SCOPED_TRACE(file);
      absl::StatusOr<ExampleBytes> e = readExample(**source, i);
      ASSERT_TRUE(e.ok()) << e.status();
      EXPECT_EQ(e->y, file[0] == 'a' ? 0 : 1);
      const std::string expect =
          read(absl::StrCat("expect/", set, "_", file.substr(file.rfind('/') + 1), ".f32"));
      ASSERT_EQ(expect.size(), e->x.size() * sizeof(float));
      std::vector<float> want(e->x.size());
      std::memcpy(want.data(), expect.data(), expect.size());
      EXPECT_EQ(e->x, want);
    }
  }
}

// size=HxW: each image resized as torch.nn.functional.interpolate(bilinear,
// align_corners=False) resizes PIL's pixels / 255.
TEST_F(ImageFolderTest, ResizedAsPyTorchInterpolate) {
  TANDEM_NEED_INSTALLED(whyNoPil());
  testing::CommandResult torch = testing::runProgram("/usr/bin/python3", {"-c", "import torch"});
  TANDEM_NEED_INSTALLED(torch.exit_code == 0 ? "" : "/usr/bin/python3 cannot import torch");
  python(R"(
import torch
os.makedirs(d + '/f/a')
os.makedirs(d + '/f/b')
rng = np.random.default_rng(3)
for name, (h, w) in (('a/big.png', (20, 12)), ('b/small.png', (5, 7)), ('b/same.png', (8, 6))):
    v = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    Image.fromarray(v).save(d + '/f/' + name)
    t = torch.from_numpy(v.astype(np.float32) / np.float32(255)).permute(2, 0, 1)[None]
    r = torch.nn.functional.interpolate(t, size=(8, 6), mode='bilinear', align_corners=False)
    r[0].contiguous().numpy().tofile(d + '/' + name.replace('/', '_') + '.f32')
)");
  EXPECT_EQ(openError("f"),
            absl::StrCat("images:", path("f/b/same.png"), ": 8x6, but the first image, ",
                         path("f/a/big.png"), ", is 20x12: give images:", path("f"), ":size=HxW"));
  // --image-size (SourceOptions) when the spec gives no size; the spec's wins.
  auto from_options = openSource("images:" + path("f"), {.image_height = 4, .image_width = 3});
  ASSERT_TRUE(from_options.ok()) << from_options.status();
  EXPECT_EQ((*from_options)->fields()[0].text(), "x: f32[3,4,3]");
  auto source =
      openSource("images:" + path("f") + ":size=8x6", {.image_height = 4, .image_width = 3});
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->fields()[0].text(), "x: f32[3,8,6]");
  const auto& images = dynamic_cast<const ImageFolderSource&>(**source);
  for (int64_t i = 0; i < images.size(); ++i) {
    SCOPED_TRACE(images.file(i));
    absl::StatusOr<ExampleBytes> e = readExample(images, i);
    ASSERT_TRUE(e.ok()) << e.status();
    std::string file = images.file(i);
    file[1] = '_';
    const std::string expect = read(file + ".f32");
    ASSERT_EQ(expect.size(), e->x.size() * sizeof(float));
    std::vector<float> want(e->x.size());
    std::memcpy(want.data(), expect.data(), expect.size());
    for (size_t k = 0; k < want.size(); ++k) ASSERT_NEAR(e->x[k], want[k], 1e-6) << k;
  }
}

// A small folder keeps its decoded pixels after each image's first read: a second epoch
// reads no file (here: the files are gone by then, and the examples are the same).
// Two ways a small folder is read once: whole when opened (its files are few bytes), and
// the pixels kept after each example's first read (they fit the decoded cache).
TEST_F(ImageFolderTest, SmallFoldersReadEachFileOnce) {
  TANDEM_NEED_INSTALLED(whyNoPil());
  python(R"(
for f in ('small', 'small_whole'):
    for c in 'ab':
        os.makedirs(d + '/' + f + '/' + c)
        for i in range(3):
            Image.fromarray((np.arange(64) * (i + 3) % 256).astype(np.uint8).reshape(8, 8)).save(
                d + '/' + f + '/' + c + '/' + str(i) + '.png')
)");
  // Files above the whole-file budget (0 bytes here): each read once, at its first read.
  auto source = ImageFolderSource::open(path("small"), {.file_cache_bytes = 0});
  ASSERT_TRUE(source.ok()) << source.status();
  std::vector<ExampleBytes> first;
  for (int64_t i = 0; i < (*source)->size(); ++i) {
    absl::StatusOr<ExampleBytes> e = readExample(**source, i);
    ASSERT_TRUE(e.ok()) << e.status();
    first.push_back(*e);
  }
  testing::runProgram("/bin/rm", {"-rf", path("small/a"), path("small/b")});
  for (int64_t i = 0; i < (*source)->size(); ++i) {
    absl::StatusOr<ExampleBytes> e = readExample(**source, i);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(*e, first[static_cast<size_t>(i)]) << i;
  }

  // Within the budget (the default): read whole when opened; the first read needs no file.
  auto whole = ImageFolderSource::open(path("small_whole"));
  ASSERT_TRUE(whole.ok()) << whole.status();
  testing::runProgram("/bin/rm", {"-rf", path("small_whole/a"), path("small_whole/b")});
  ASSERT_EQ((*whole)->size(), static_cast<int64_t>(first.size()));
  for (int round = 0; round < 2; ++round)
    for (int64_t i = 0; i < (*whole)->size(); ++i) {
      absl::StatusOr<ExampleBytes> e = readExample(**whole, i);
      ASSERT_TRUE(e.ok()) << e.status();
      EXPECT_EQ(*e, first[static_cast<size_t>(i)]) << round << " " << i;
    }
}

TEST_F(ImageFolderTest, BadFoldersAndFilesAreOneLineNamingTheFile) {
  TANDEM_NEED_INSTALLED(whyNoPil());
  python(R"(
v = np.arange(64 * 48 * 3, dtype=np.uint32).reshape(64, 48, 3).astype(np.uint8)
Image.fromarray(v).save(d + '/good.png')
Image.fromarray(v).save(d + '/good.jpg', quality=90)
)");
  const std::string png = read("good.png"), jpg = read("good.jpg");
  const auto folderWith = [&](const std::string& name, const std::string& bytes) {
    mkdir(name);
    mkdir(name + "/a");
    write(name + "/a/0.png", png);
    write(name + "/a/1.bad", bytes);
    return path(name + "/a/1.bad");
  };
  // Found when the folder opens (the headers).
  mkdir("empty");
  write("empty/readme.txt", "not a class");
  mkdir("empty/.hidden");
  EXPECT_EQ(openError("empty"), absl::StrCat("images:", path("empty"),
                                             ": no class folders in it (images:DIR holds "
                                             "one folder of images per class)"));
  EXPECT_EQ(openError("none"), absl::StrCat("images:", path("none"), ": no such folder"));
  mkdir("noimages");
  mkdir("noimages/a");
  write("noimages/a/0.png", png);
  mkdir("noimages/b");
  write("noimages/b/.DS_Store", "hidden: skipped");
  EXPECT_EQ(openError("noimages"),
            absl::StrCat("images:", path("noimages/b"), ": a class folder with no images"));
  EXPECT_EQ(openError("noimages", {.classes = 3}),
            absl::StrCat("images:", path("noimages"),
                         ": 2 class folders, but the training data has 3 classes"));
  std::string file = folderWith("text", "hello");
  EXPECT_EQ(openError("text"), absl::StrCat("images:", file, ": not a PNG or JPEG file"));
  mkdir("fifo");
  mkdir("fifo/a");
  ASSERT_EQ(::mkfifo(path("fifo/a/0.png").c_str(), 0644), 0);
  EXPECT_EQ(openError("fifo"),
            absl::StrCat("images:", path("fifo/a/0.png"), ": a FIFO (named pipe), not an image"));
  file = folderWith("cut_png_header", png.substr(0, 20));
  EXPECT_EQ(openError("cut_png_header"),
            absl::StrCat("images:", file, ": corrupt PNG: the file ends early"));
  std::string bad_ihdr = png;
  bad_ihdr[20] ^= 1;  // the height, under IHDR's CRC
  file = folderWith("bad_ihdr", bad_ihdr);
  EXPECT_EQ(openError("bad_ihdr"), absl::StrCat("images:", file, ": corrupt PNG: IHDR: CRC error"));
  file = folderWith("jpeg_header", jpg.substr(0, 30));
  EXPECT_EQ(openError("jpeg_header"),
            absl::StrCat("images:", file, ": corrupt JPEG: Premature end of JPEG file"));
  file = folderWith("jpeg_magic", "\xff\xd8\xff");
  EXPECT_EQ(openError("jpeg_magic"),
            absl::StrCat("images:", file, ": corrupt JPEG: Premature end of JPEG file"));

  // Found when the example is read (the pixels): the folder opens.
  const auto readError = [&](const std::string& name) -> std::string {
    std::string errors[2];
    for (int64_t budget : {int64_t{1} << 20, int64_t{0}}) {  // files read whole, or not
      auto s = ImageFolderSource::open(path(name), {.file_cache_bytes = budget});
      errors[budget == 0] = s.ok() ? std::string(readExample(**s, 1).status().message())
                                   : "opens with " + std::string(s.status().message());
    }
    EXPECT_EQ(errors[0], errors[1]) << name;
    return errors[0];
  };
  file = folderWith("cut_png", png.substr(0, png.size() / 2));
  EXPECT_EQ(readError("cut_png"),
            absl::StrCat("images:", file, ": corrupt PNG: the file ends early"));
  std::string bad_idat = png;
  bad_idat[png.find("IDAT") + 4] = 0;  // zlib's header
  file = folderWith("bad_idat", bad_idat);
  EXPECT_EQ(readError("bad_idat"),
            absl::StrCat("images:", file, ": corrupt PNG: IDAT: incorrect header check"));
  file = folderWith("cut_jpeg", jpg.substr(0, jpg.size() / 2));
  EXPECT_EQ(readError("cut_jpeg"),
            absl::StrCat("images:", file, ": corrupt JPEG: Premature end of JPEG file"));
}

}  // namespace
}  // namespace tandem::runtime::data
