#include "runtime/data/image_folder_source.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "ir/file_input.h"

namespace tandem::runtime::data {
namespace {

absl::Status imageFolderError(const std::string& path, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("images:", path, ": ", why));
}

// One folder's entries: its subfolders' and its other entries' names, each sorted, hidden
// ones (".*") left out. Symbolic links are followed, as torchvision follows them.
struct FolderListing {
  std::vector<std::string> folders, files;
  std::vector<uint32_t> file_modes;  // st_mode of each of `files`
  std::vector<int64_t> file_bytes;   // and st_size
};

absl::StatusOr<FolderListing> listImageFolder(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return imageFolderError(path, std::strerror(errno));
  std::vector<std::tuple<std::string, uint32_t, int64_t>> files;
  FolderListing out;
  errno = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.empty() || name[0] == '.') continue;
    struct stat st {};
    if (::stat((path + "/" + name).c_str(), &st) != 0) {
      const int err = errno;
      ::closedir(d);
      return imageFolderError(path + "/" + name, std::strerror(err));
    }
    if (S_ISDIR(st.st_mode))
      out.folders.push_back(name);
    else
      files.emplace_back(name, st.st_mode, st.st_size);
    errno = 0;
  }
  const int err = errno;
  ::closedir(d);
  if (err != 0) return imageFolderError(path, std::strerror(err));
  std::sort(out.folders.begin(), out.folders.end());
  std::sort(files.begin(), files.end());
  for (auto& [name, mode, bytes] : files) {
    out.files.push_back(std::move(name));
    out.file_modes.push_back(mode);
    out.file_bytes.push_back(bytes);
  }
  return out;
}

// Every folder under a class's folder (itself included), relative to the image folder,
// with its listing. A folder reached again through a link is listed once (a link to a
// parent would otherwise never end).
absl::Status walkClassFolder(const std::string& dir, const std::string& rel,
                             std::set<std::pair<dev_t, ino_t>>& seen,
                             std::vector<std::pair<std::string, FolderListing>>& out) {
  struct stat st {};
  if (::stat((dir + "/" + rel).c_str(), &st) != 0)
    return imageFolderError(dir + "/" + rel, std::strerror(errno));
  if (!seen.insert({st.st_dev, st.st_ino}).second) return absl::OkStatus();
  absl::StatusOr<FolderListing> listing = listImageFolder(dir + "/" + rel);
  if (!listing.ok()) return listing.status();
  for (const std::string& sub : listing->folders)
    if (absl::Status s = walkClassFolder(dir, rel + "/" + sub, seen, out); !s.ok()) return s;
  out.emplace_back(rel, *std::move(listing));
  return absl::OkStatus();
}

// The listing's stat said a regular file of `bytes` bytes.
absl::StatusOr<ImageHeader> headerOfFile(const std::string& path, int64_t bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read images:", path, ": ", std::strerror(errno)));
  absl::StatusOr<ImageHeader> header = readImageHeader(fd, bytes);
  ::close(fd);
  if (!header.ok()) return imageFolderError(path, header.status().message());
  return header;
}

std::string sizeText(const ImageHeader& h) { return absl::StrCat(h.height, "x", h.width); }

absl::Status notAnImage(const std::string& path, int fd) {
  struct stat st {};
  if (::fstat(fd, &st) == 0 && !S_ISREG(st.st_mode))
    return absl::InvalidArgumentError(
        absl::StrCat("images:", path, " is ", ir::describeFileType(st.st_mode), ", not an image"));
  return imageFolderError(path, std::strerror(errno));
}

// The whole file, expected to be `expected` bytes (its size when the folder was opened),
// in one pread of expected + 1 bytes: open, pread and close are all the system calls an
// example costs when the file is as it was (a FIFO or folder put in its place since fails
// the pread; one grown since is read again whole).
absl::Status readImageFile(const std::string& path, int64_t expected, std::vector<uint8_t>& bytes) {
  // O_NONBLOCK: a FIFO put in its place does not block the open (nor the pread: ESPIPE).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read images:", path, ": ", std::strerror(errno)));
  absl::Status status;
  bytes.resize(static_cast<size_t>(expected) + 1);
  for (size_t done = 0;;) {
    const ssize_t n =
        ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = notAnImage(path, fd);
      break;
    }
    done += static_cast<size_t>(n);
    if (n == 0 || done < bytes.size()) {
      bytes.resize(done);  // a file cut short since: the decoder says it ends early
      break;
    }
    struct stat st {};  // longer than it was: read on to its end, if it has one
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      status = notAnImage(path, fd);
      break;
    }
    bytes.resize(std::max(bytes.size() + 1, static_cast<size_t>(st.st_size) + 1));
  }
  ::close(fd);
  return status;
}

// ToTensor's v / 255 in f32 (a division, so that 255 is exactly 1).
const std::array<float, 256>& byteScale() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) t[static_cast<size_t>(v)] = static_cast<float>(v) / 255.0f;
    return t;
  }();
  return table;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ImageFolderSource>> ImageFolderSource::open(
    const std::string& given_dir, const ImageFolderOptions& options) {
  std::string dir = given_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    return imageFolderError(dir, errno == ENOENT ? "no such folder" : std::strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return imageFolderError(dir,
                            absl::StrCat("not a folder (it is ", ir::describeFileType(st.st_mode),
                                         "); images:DIR holds one folder per class"));
  absl::StatusOr<FolderListing> top = listImageFolder(dir);
  if (!top.ok()) return top.status();
  if (top->folders.empty())
    return imageFolderError(
        dir, "no class folders in it (images:DIR holds one folder of images per class)");
  if (options.classes > 0 && static_cast<int64_t>(top->folders.size()) != options.classes)
    return imageFolderError(dir, absl::StrCat(top->folders.size(), " class folders, but the ",
                                              "training data has ", options.classes, " classes"));

  std::unique_ptr<ImageFolderSource> source(new ImageFolderSource());
  source->dir_ = dir;
  source->classes_ = top->folders;
  std::set<std::pair<dev_t, ino_t>> seen;
  for (size_t c = 0; c < source->classes_.size(); ++c) {
    const std::string& name = source->classes_[c];
    std::vector<std::pair<std::string, FolderListing>> folders;
    if (absl::Status s = walkClassFolder(dir, name, seen, folders); !s.ok()) return s;
    // torchvision: for root, _, files in sorted(os.walk(class folder)): sorted(files).
    std::sort(folders.begin(), folders.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    const size_t before = source->images_.size();
    for (const auto& [rel, listing] : folders)
      for (size_t f = 0; f < listing.files.size(); ++f) {
        const std::string file = rel + "/" + listing.files[f];
        if (!S_ISREG(listing.file_modes[f]))
          return imageFolderError(
              dir + "/" + file,
              absl::StrCat(ir::describeFileType(listing.file_modes[f]), ", not an image"));
        source->images_.push_back({file, static_cast<int32_t>(c), {}, listing.file_bytes[f]});
      }
    if (source->images_.size() == before)
      return imageFolderError(dir + "/" + name, "a class folder with no images");
  }

  // Small files are read whole here rather than for their header alone: the same open,
  // pread and close, and the first epoch then decodes from memory.
  int64_t file_bytes = 0;
  for (const Image& im : source->images_) file_bytes += im.file_bytes;
  const bool read_whole = file_bytes <= options.file_cache_bytes;
  for (Image& im : source->images_) {
    const std::string path = dir + "/" + im.file;
    absl::StatusOr<ImageHeader> header;
    if (!read_whole) {
      header = headerOfFile(path, im.file_bytes);
    } else {
      if (absl::Status s = readImageFile(path, im.file_bytes, im.bytes); !s.ok()) return s;
      header = imageHeaderOf(im.bytes);
      if (!header.ok()) header = imageFolderError(path, header.status().message());
    }
    if (!header.ok()) return header.status();
    im.header = *header;
  }

  const ImageHeader& first = source->images_.front().header;
  int64_t channels = 1;
  for (const Image& im : source->images_) {
    if (im.header.channels == 3) channels = 3;
    if (options.height > 0) continue;
    if (im.header.height != first.height || im.header.width != first.width)
      return imageFolderError(dir + "/" + im.file,
                              absl::StrCat(sizeText(im.header), ", but the first image, ", dir, "/",
                                           source->images_.front().file, ", is ", sizeText(first),
                                           ": give images:", dir, ":size=HxW"));
  }
  const int64_t height = options.height > 0 ? options.height : first.height;
  const int64_t width = options.height > 0 ? options.width : first.width;
  if (options.height > 0) source->resize_ = resize(height, width);
  if (options.by_name)
    std::stable_sort(
        source->images_.begin(), source->images_.end(), [](const Image& a, const Image& b) {
          const auto base = [](const std::string& f) {
            return absl::string_view(f).substr(f.rfind('/') + 1);
          };
          return std::make_tuple(base(a.file), a.label) < std::make_tuple(base(b.file), b.label);
        });
  source->fields_ = {{"x", ir::DType::kF32, {channels, height, width}}, {"y", ir::DType::kI32, {}}};
  int64_t decoded_bytes = 0;
  for (const Image& im : source->images_)
    decoded_bytes += im.header.height * im.header.width * im.header.channels;
  if (decoded_bytes <= options.decoded_cache_bytes) {
    source->cached_ = std::make_unique<std::atomic<uint8_t>[]>(source->images_.size());
    source->decoded_.resize(source->images_.size());
  }
  return source;
}

absl::Status ImageFolderSource::read(int64_t index, const ExampleKey& key,
                                     absl::Span<void* const> out) const {
  const size_t i = static_cast<size_t>(index);
  const Image& im = images_[i];
  std::vector<uint8_t> decoded;
  const std::vector<uint8_t>* pixels = &decoded;
  if (cached_ != nullptr && cached_[i].load(std::memory_order_acquire) == 2) {
    pixels = &decoded_[i];
  } else {
    const std::string path = dir_ + "/" + im.file;
    std::vector<uint8_t> read;  // a file not read whole when the folder was opened
    if (im.bytes.empty())
      if (absl::Status s = readImageFile(path, im.file_bytes, read); !s.ok()) return s;
    const std::vector<uint8_t>& bytes = im.bytes.empty() ? read : im.bytes;
    if (absl::Status s = decodeImage(bytes, im.header, decoded); !s.ok())
      return imageFolderError(path, s.message());
    uint8_t empty = 0;
    if (cached_ != nullptr && cached_[i].compare_exchange_strong(empty, 1)) {
      decoded_[i] = std::move(decoded);
      pixels = &decoded_[i];
      cached_[i].store(2, std::memory_order_release);
    }
  }

  const int64_t c = fields_[0].shape[0], h = im.header.height, w = im.header.width;
  const bool resized = resize_ != nullptr && (h != fields_[0].shape[1] || w != fields_[0].shape[2]);
  std::vector<float> unresized(resized ? static_cast<size_t>(c * h * w) : 0);
  float* x = resized ? unresized.data() : static_cast<float*>(out[0]);
  const std::array<float, 256>& scale = byteScale();
  const int64_t plane = h * w, stride = im.header.channels;
  for (int64_t ch = 0; ch < c; ++ch) {
    // A grayscale image in an RGB set: its one channel in each of the three.
    const uint8_t* src = pixels->data() + (stride == 1 ? 0 : ch);
    float* dst = x + ch * plane;
    for (int64_t k = 0; k < plane; ++k) dst[k] = scale[src[k * stride]];
  }
  if (resized) resize_->apply(key, std::vector<int64_t>{c, h, w}, x, static_cast<float*>(out[0]));
  *static_cast<int32_t*>(out[1]) = im.label;
  return absl::OkStatus();
}

}  // namespace tandem::runtime::data
