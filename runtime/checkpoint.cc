#include "runtime/checkpoint.h"

// Why a format of our own and not a library: what a checkpoint needs is a handful of
// scalars, two small tables and named tensors, exact bits, one checksum and an atomic
// replace. Debian's candidates each miss the point: HDF5 (libhdf5-dev) is a large
// dependency whose files are not atomic either and whose own checksums cover metadata
// only; protobuf needs a schema compiler in the build and caps a message at 2 GiB;
// safetensors and NumPy's .npz have no C++ library in Debian. The whole format is the
// ~150 lines below, and tests corrupt it byte by byte.

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backend/processes.h"
#include "ir/file_input.h"
#include "ir/status_macros.h"

namespace tandem::runtime {
namespace {

// Tensor bytes are copied as the host holds them; every host Tandem builds for is
// little-endian, which the file's other fields are written as explicitly.
static_assert(std::endian::native == std::endian::little,
              "checkpoint tensors are stored little-endian as the host holds them");

constexpr char kCheckpointMagic[8] = {'T', 'N', 'D', 'M', 'C', 'K', 'P', 'T'};
constexpr size_t kCheckpointHeaderBytes = 8 + 4 + 8;  // magic, version, file bytes
constexpr size_t kCheckpointTrailerBytes = 4;         // crc32

uint32_t crc32Of(absl::string_view bytes) {
  // zlib's crc32 takes a uInt length: feed it in pieces below 4 GiB.
  uLong crc = crc32(0L, Z_NULL, 0);
  for (size_t at = 0; at < bytes.size();) {
    const size_t n = std::min<size_t>(bytes.size() - at, 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at), static_cast<uInt>(n));
    at += n;
  }
  return static_cast<uint32_t>(crc);
}

class CheckpointEncoder {
 public:
  void u8(uint8_t v) { fixed(v, 1); }
  void u32(uint32_t v) { fixed(v, 4); }
  void u64(uint64_t v) { fixed(v, 8); }
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void f64(double v) { u64(std::bit_cast<uint64_t>(v)); }
  void str(absl::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.append(s.data(), s.size());
  }
  void raw(absl::string_view s) { out_.append(s.data(), s.size()); }
  std::string& out() { return out_; }

 private:
  void fixed(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string out_;
};

// Reads what CheckpointEncoder wrote. Every read is bounds-checked: past the checksum a
// failure means a writer bug or a forged file, still an error and never a crash.
class CheckpointDecoder {
 public:
  CheckpointDecoder(absl::string_view bytes, size_t at) : bytes_(bytes), at_(at) {}

  bool u8(uint8_t& v) { return fixed(v, 1); }
  bool u32(uint32_t& v) { return fixed(v, 4); }
  bool u64(uint64_t& v) { return fixed(v, 8); }
  bool i32(int32_t& v) {
    uint32_t u;
    if (!u32(u)) return false;
    v = static_cast<int32_t>(u);
    return true;
  }
  bool i64(int64_t& v) {
    uint64_t u;
    if (!u64(u)) return false;
    v = static_cast<int64_t>(u);
    return true;
  }
  bool f64(double& v) {
    uint64_t u;
    if (!u64(u)) return false;
    v = std::bit_cast<double>(u);
    return true;
  }
  bool str(std::string& s) {
    uint32_t n;
    return u32(n) && raw(n, s);
  }
  bool raw(uint64_t n, std::string& s) {
    if (n > bytes_.size() - at_) return fail();
    s.assign(bytes_.data() + at_, n);
    at_ += n;
    return true;
  }
  // A count of entries each at least `min_bytes` long: refused when they cannot fit, so
  // a bad count cannot make a reserve() of gigabytes.
  bool count(uint32_t& n, size_t min_bytes) {
    return u32(n) && (static_cast<uint64_t>(n) * min_bytes <= bytes_.size() - at_ || fail());
  }
  size_t at() const { return at_; }
  size_t failedAt() const { return failed_at_; }

 private:
  template <typename T>
  bool fixed(T& v, int bytes) {
    if (static_cast<size_t>(bytes) > bytes_.size() - at_) return fail();
    v = 0;
    for (int i = 0; i < bytes; ++i)
      v |= static_cast<T>(static_cast<unsigned char>(bytes_[at_ + i])) << (8 * i);
    at_ += bytes;
    return true;
  }
  bool fail() {
    failed_at_ = at_;
    return false;
  }
  absl::string_view bytes_;
  size_t at_;
  size_t failed_at_ = 0;
};

absl::Status ckptError(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("'", path, "' ", what));
}

std::string errnoText(int err) { return err != 0 ? std::strerror(err) : "write failed"; }

// write() until done: a regular file may take less than asked (a signal, a full disk).
bool writeAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

std::string checkpointPath(const std::string& dir) { return dir + "/checkpoint"; }
std::string checkpointLockPath(const std::string& dir) { return dir + "/checkpoint.lock"; }

std::vector<std::string> checkpointTempFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.path().filename().string().rfind(kCheckpointTempPrefix, 0) == 0)
      out.push_back(entry.path().string());
  return out;
}

std::string encodeCheckpoint(const Checkpoint& c, uint32_t version) {
  CheckpointEncoder e;
  e.raw(absl::string_view(kCheckpointMagic, sizeof kCheckpointMagic));
  e.u32(version);
  e.u64(0);  // the file's size, filled in below
  e.str(c.model);
  e.u64(c.seed);
  e.i32(c.epoch);
  e.i64(c.steps_per_epoch);
  e.u32(c.devices);
  e.i64(c.progress.steps);
  e.i64(c.progress.examples);
  e.i64(c.progress.correct);
  e.f64(c.progress.loss_sum);
  e.f64(c.progress.seconds);
  e.u32(static_cast<uint32_t>(c.settings.size()));
  for (const auto& [flag, value] : c.settings) {
    e.str(flag);
    e.str(value);
  }
  e.u32(static_cast<uint32_t>(c.split.size()));
  for (int64_t rows : c.split) e.i64(rows);
  auto rows = [&e](const std::vector<int64_t>& v) {
    e.u32(static_cast<uint32_t>(v.size()));
    for (int64_t x : v) e.i64(x);
  };
  auto metrics = [&e](const std::vector<MetricValue>& v) {
    e.u32(static_cast<uint32_t>(v.size()));
    for (const MetricValue& m : v) {
      e.str(m.name);
      e.f64(m.value);
    }
  };
  e.u32(static_cast<uint32_t>(c.history.size()));
  for (const EpochFigures& h : c.history) {
    e.i32(h.epoch);
    for (double v : {h.train_loss, h.train_accuracy, h.test_loss, h.test_accuracy, h.seconds,
                     h.images_per_second, h.eval_seconds})
      e.f64(v);
    if (version >= 2) rows(h.split);
    if (version >= 3) {
      metrics(h.train_metrics);
      metrics(h.test_metrics);
    }
  }
  if (version >= 2) {
    e.u32(static_cast<uint32_t>(c.replans.size()));
    for (const SplitReplan& r : c.replans) {
      e.i32(r.epoch);
      e.i64(r.step);
      rows(r.rows);
    }
    e.u8(c.balancer.has_value());
    if (c.balancer) {
      e.i32(c.balancer->step);
      e.u8(c.balancer->settled);
      e.u32(static_cast<uint32_t>(c.balancer->busy_ns.size()));
      for (double v : c.balancer->busy_ns) e.f64(v);
      for (double v : c.balancer->rows) e.f64(v);
    }
  }
  e.u32(static_cast<uint32_t>(c.tensors.size()));
  for (const CheckpointTensor& t : c.tensors) {
    e.str(t.name);
    e.u32(t.replica);
    e.str(ir::dtypeName(t.type.dtype));
    e.u32(static_cast<uint32_t>(t.type.shape.size()));
    for (int64_t d : t.type.shape) e.i64(d);
    e.u64(t.bytes.size());
    e.raw(t.bytes);
  }
  std::string& out = e.out();
  const uint64_t size = out.size() + kCheckpointTrailerBytes;
  for (int i = 0; i < 8; ++i) out[12 + i] = static_cast<char>((size >> (8 * i)) & 0xff);
  e.u32(crc32Of(out));
  return std::move(out);
}

namespace {

// "" when `c` could have been written by a run; else what cannot be. A checksum only says
// the bytes are the ones written: these say the values make sense together, so that a
// resumed run never starts from a position or figures no run could have reached.
std::string impossibleContents(const Checkpoint& c) {
  int64_t batch = 0;
  for (int64_t rows : c.split) {
    if (rows < 1) return absl::StrCat("the split gives a device ", rows, " images");
    batch += rows;
  }
  const EpochProgress& p = c.progress;
  if (c.epoch < 1) return absl::StrCat("its epoch is ", c.epoch);
  if (c.devices < 1) return "it was written by a run on no device";
  if (c.split.size() != c.devices)
    return absl::StrCat("its split has ", c.split.size(), " entries for ", c.devices, " devices");
  if (c.steps_per_epoch < 1) return absl::StrCat("an epoch of ", c.steps_per_epoch, " steps");
  if (p.steps < 0 || p.steps > c.steps_per_epoch)
    return absl::StrCat("step ", p.steps, " of an epoch of ", c.steps_per_epoch);
  if (p.examples < 0 || p.examples > p.steps * batch)
    return absl::StrCat(p.examples, " examples in ", p.steps, " steps of ", batch);
  if (p.correct < 0 || p.correct > p.examples)
    return absl::StrCat("a correct count of ", p.correct, " for ", p.examples, " examples");
  if (!(p.seconds >= 0) || !std::isfinite(p.seconds))
    return absl::StrCat("the epoch has run ", p.seconds, " seconds");
  if (c.history.size() != static_cast<size_t>(c.epoch - 1))
    return absl::StrCat("figures of ", c.history.size(), " finished epochs at epoch ", c.epoch);
  for (size_t i = 0; i < c.history.size(); ++i) {
    const EpochFigures& h = c.history[i];
    if (h.epoch != static_cast<int32_t>(i + 1))
      return absl::StrCat("the figures of epoch ", h.epoch, " where epoch ", i + 1, " belongs");
    for (double a : {h.train_accuracy, h.test_accuracy})
      if (!(a >= 0 && a <= 1)) return absl::StrCat("an accuracy of ", a, " in epoch ", h.epoch);
  }
  for (const SplitReplan& r : c.replans) {
    int64_t total = 0;
    for (int64_t rows : r.rows) total += rows < 1 ? -batch : rows;
    if (r.epoch < 1 || r.epoch > c.epoch || r.step < 1 || r.step > c.steps_per_epoch ||
        r.rows.size() != c.devices || total != batch)
      return absl::StrCat("a re-plan of the split after step ", r.step, " of epoch ", r.epoch,
                          " that no run of ", c.devices, " devices and batch ", batch,
                          " could make");
  }
  if (c.balancer && (c.balancer->step < 0 || c.balancer->busy_ns.size() != c.devices))
    return "a split balancer of another shape";
  return "";
}

}  // namespace

absl::StatusOr<Checkpoint> decodeCheckpoint(absl::string_view bytes, const std::string& path) {
  const absl::string_view magic(kCheckpointMagic, sizeof kCheckpointMagic);
  if (bytes.size() < magic.size() && magic.substr(0, bytes.size()) == bytes)
    return ckptError(path, absl::StrCat("is truncated: ", bytes.size(), " bytes, not even the ",
                                        magic.size(), "-byte magic"));
  if (bytes.substr(0, magic.size()) != magic)
    return ckptError(path, "is not a Tandem checkpoint (it does not start with TNDMCKPT)");
  CheckpointDecoder header(bytes, magic.size());
  uint32_t version = 0;
  uint64_t size = 0;
  if (!header.u32(version) || !header.u64(size))
    return ckptError(path, absl::StrCat("is truncated: ", bytes.size(), " bytes, less than the ",
                                        kCheckpointHeaderBytes, "-byte header"));
  if (version < kOldestCheckpointVersion || version > kCheckpointVersion)
    return ckptError(path, absl::StrCat("has checkpoint format version ", version,
                                        "; this tandem reads versions ", kOldestCheckpointVersion,
                                        " to ", kCheckpointVersion));
  if (bytes.size() < size)
    return ckptError(path,
                     absl::StrCat("is truncated: ", bytes.size(), " of its ", size, " bytes"));
  if (bytes.size() > size || size < kCheckpointHeaderBytes + kCheckpointTrailerBytes)
    return ckptError(path, absl::StrCat("has ", bytes.size(), " bytes, but its header says ", size,
                                        " (appended to, or a corrupt header)"));
  const absl::string_view content = bytes.substr(0, size - kCheckpointTrailerBytes);
  uint32_t stored = 0;
  CheckpointDecoder trailer(bytes, content.size());
  trailer.u32(stored);
  if (const uint32_t computed = crc32Of(content); computed != stored)
    return ckptError(path, absl::StrFormat("is corrupt: its content has crc32 %08x, but %08x is "
                                           "stored (flipped bytes)",
                                           computed, stored));

  CheckpointDecoder d(content, kCheckpointHeaderBytes);
  Checkpoint c;
  auto malformed = [&](absl::string_view what) {
    return ckptError(path, absl::StrCat("is malformed: ", what, " at byte ", d.failedAt(),
                                        " (a checksum that matches: written by a broken tandem?)"));
  };
  if (!d.str(c.model) || !d.u64(c.seed) || !d.i32(c.epoch) || !d.i64(c.steps_per_epoch) ||
      !d.u32(c.devices) || !d.i64(c.progress.steps) || !d.i64(c.progress.examples) ||
      !d.i64(c.progress.correct) || !d.f64(c.progress.loss_sum) || !d.f64(c.progress.seconds))
    return malformed("the run's position ends early");
  uint32_t n = 0;
  if (!d.count(n, 8)) return malformed("the settings table ends early");
  for (uint32_t i = 0; i < n; ++i) {
    auto& [flag, value] = c.settings.emplace_back();
    if (!d.str(flag) || !d.str(value)) return malformed("the settings table ends early");
  }
  if (!d.count(n, 8)) return malformed("the split ends early");
  c.split.resize(n);
  for (int64_t& rows : c.split)
    if (!d.i64(rows)) return malformed("the split ends early");
  auto rows = [&d](std::vector<int64_t>& v) {
    uint32_t k = 0;
    if (!d.count(k, 8)) return false;
    v.resize(k);
    for (int64_t& x : v)
      if (!d.i64(x)) return false;
    return true;
  };
  auto metrics = [&d](std::vector<MetricValue>& v) {
    uint32_t k = 0;
    if (!d.count(k, 4 + 8)) return false;
    v.resize(k);
    for (MetricValue& m : v)
      if (!d.str(m.name) || !d.f64(m.value)) return false;
    return true;
  };
  if (!d.count(n, 4 + 7 * 8)) return malformed("the epoch figures end early");
  c.history.resize(n);
  for (EpochFigures& h : c.history)
    if (!d.i32(h.epoch) || !d.f64(h.train_loss) || !d.f64(h.train_accuracy) ||
        !d.f64(h.test_loss) || !d.f64(h.test_accuracy) || !d.f64(h.seconds) ||
        !d.f64(h.images_per_second) || !d.f64(h.eval_seconds) || (version >= 2 && !rows(h.split)) ||
        (version >= 3 && (!metrics(h.train_metrics) || !metrics(h.test_metrics))))
      return malformed("the epoch figures end early");
  if (version >= 2) {
    if (!d.count(n, 4 + 8 + 4)) return malformed("the split's re-plans end early");
    c.replans.resize(n);
    for (SplitReplan& r : c.replans)
      if (!d.i32(r.epoch) || !d.i64(r.step) || !rows(r.rows))
        return malformed("the split's re-plans end early");
    uint8_t has_balancer = 0;
    if (!d.u8(has_balancer)) return malformed("the balancer's state ends early");
    if (has_balancer != 0) {
      SplitBalancer::State& b = c.balancer.emplace();
      uint8_t settled = 0;
      uint32_t k = 0;
      if (!d.i32(b.step) || !d.u8(settled) || !d.count(k, 16))
        return malformed("the balancer's state ends early");
      b.settled = settled != 0;
      b.busy_ns.resize(k);
      b.rows.resize(k);
      for (std::vector<double>* v : {&b.busy_ns, &b.rows})
        for (double& x : *v)
          if (!d.f64(x)) return malformed("the balancer's state ends early");
    }
  }
  if (!d.count(n, 4 + 4 + 4 + 4 + 8)) return malformed("the tensor table ends early");
  c.tensors.resize(n);
  for (CheckpointTensor& t : c.tensors) {
    std::string dtype;
    uint32_t rank = 0;
    if (!d.str(t.name) || !d.u32(t.replica) || !d.str(dtype) || !d.count(rank, 8))
      return malformed("the tensor table ends early");
    auto parsed = ir::parseDType(dtype);
    if (!parsed.ok())
      return ckptError(path,
                       absl::StrCat("is malformed: tensor @", t.name, " has dtype '", dtype, "'"));
    t.type.dtype = *parsed;
    for (uint32_t i = 0; i < rank; ++i) {
      int64_t extent = 0;
      if (!d.i64(extent)) return malformed("the tensor table ends early");
      if (extent < 0)
        return ckptError(path,
                         absl::StrCat("is malformed: tensor @", t.name, " has a negative extent"));
      t.type.shape.push_back(extent);
    }
    uint64_t nbytes = 0;
    if (!d.u64(nbytes) || !d.raw(nbytes, t.bytes)) return malformed("a tensor ends early");
    if (static_cast<int64_t>(nbytes) != t.type.bytes())
      return ckptError(path,
                       absl::StrCat("is malformed: tensor @", t.name, " of ", ir::toString(t.type),
                                    " has ", nbytes, " bytes, not ", t.type.bytes()));
  }
  if (d.at() != content.size())
    return ckptError(path, absl::StrCat("is malformed: ", content.size() - d.at(),
                                        " bytes after the tensor table"));
  if (std::string why = impossibleContents(c); !why.empty())
    return ckptError(path, absl::StrCat("holds impossible contents: ", why,
                                        " (its checksum matches: written by a broken tandem, or "
                                        "edited)"));
  return c;
}

absl::Status writeCheckpointFile(const std::string& dir, const Checkpoint& c,
                                 const std::function<void()>& after_half) {
  const std::string bytes = encodeCheckpoint(c);
  const std::string final_path = checkpointPath(dir);
  auto failure = [&](const std::string& what, int err) {
    return absl::InvalidArgumentError(absl::StrCat("cannot ", what, ": ", errnoText(err)));
  };
  // A name of its own per write (mkstemp), so that no other writer's bytes can be renamed
  // into place; removed again when the write fails.
  std::string tmp = absl::StrCat(dir, "/", kCheckpointTempPrefix, "XXXXXX");
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return failure(absl::StrCat("write a temporary file in '", dir, "'"), errno);
  ::fchmod(fd, 0644);  // mkstemp's 0600 would hide the checkpoint from a group
  const size_t half = bytes.size() / 2;
  errno = 0;
  bool ok = writeAll(fd, bytes.data(), half);
  if (ok && after_half) after_half();
  ok = ok && writeAll(fd, bytes.data() + half, bytes.size() - half);
  // The data must be on disk before the rename makes it the checkpoint: otherwise a crash
  // could leave a renamed file whose blocks were never written.
  ok = ok && ::fsync(fd) == 0;
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  // A full disk (ENOSPC, EFBIG) leaves no partial file behind, and the last checkpoint.
  if (!ok) {
    ::unlink(tmp.c_str());
    return failure(absl::StrCat("write '", tmp, "'"), err);
  }
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    return failure(absl::StrCat("rename '", tmp, "' to '", final_path, "'"), err);
  }
  // The rename lives in the directory: fsync it so that the new name survives a crash.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return failure(absl::StrCat("open directory '", dir, "'"), errno);
  ok = ::fsync(dfd) == 0;
  err = errno;
  ::close(dfd);
  if (!ok) return failure(absl::StrCat("sync directory '", dir, "'"), err);
  return absl::OkStatus();
}

namespace {

/// The bytes of the file at `path`, a regular file (a FIFO or a device named as the
/// checkpoint would block or never end: ir/file_input.h); errors name it.
absl::StatusOr<std::string> readWholeFile(const std::string& path) {
  // No checkpoint comes near this; a bound keeps a mistaken path from filling memory.
  constexpr int64_t kMaxCheckpointBytes = int64_t{1} << 40;
  absl::StatusOr<std::string> bytes = ir::readInputFile(
      path, {absl::StrCat("'", path, "'"), "a checkpoint file"}, kMaxCheckpointBytes);
  if (bytes.status().code() == absl::StatusCode::kNotFound)
    return absl::InvalidArgumentError(
        absl::StrCat(bytes.status().message(), " (no checkpoint was written in that directory)"));
  if (!bytes.ok()) return absl::InvalidArgumentError(bytes.status().message());
  return bytes;
}

}  // namespace

absl::StatusOr<Checkpoint> readCheckpointFile(const std::string& dir) {
  const std::string path = checkpointPath(dir);
  backend::Processes& procs = backend::Processes::current();
  if (!procs.several()) {
    ASSIGN_OR_RETURN(std::string bytes, readWholeFile(path));
    return decodeCheckpoint(bytes, path);
  }
  // Rank 0 reads the file (the others' disks need not have it) and sends every rank
  // either "1" and its bytes or "0" and why it could not: every rank then decides alike.
  std::string message;
  if (procs.rank() == 0) {
    absl::StatusOr<std::string> bytes = readWholeFile(path);
    message = bytes.ok() ? absl::StrCat("1", *bytes) : absl::StrCat("0", bytes.status().message());
  }
  RETURN_IF_ERROR(procs.broadcastFromFirst(message, "the checkpoint's bytes from rank 0"));
  if (message.empty() || message[0] != '1')
    return absl::InvalidArgumentError(message.empty() ? "rank 0 sent no checkpoint"
                                                      : message.substr(1));
  return decodeCheckpoint(absl::string_view(message).substr(1), path);
}

absl::StatusOr<std::vector<CheckpointTensor>> captureVariables(const Executor& ex) {
  const ir::Module& m = ex.module();
  backend::Processes& procs = backend::Processes::current();
  // Each process reads its own devices' variables (devices in order, variables in module
  // order, back to back), and rank 0 gets every process's: the sizes follow from the
  // module, which every rank compiled alike.
  std::string mine;
  for (size_t d = 0; d < m.devices().size(); ++d) {
    if (m.devices()[d].rank != procs.rank()) continue;
    for (const ir::Var& v : m.vars()) {
      ASSIGN_OR_RETURN(HostTensor t, ex.readVariable(v.name, d));
      mine.append(t.buffer.data(), static_cast<size_t>(t.type.bytes()));
    }
  }
  ASSIGN_OR_RETURN(std::vector<std::string> ranks,
                   procs.gatherOnFirst(std::move(mine), "gathering the checkpoint's variables"));
  std::vector<CheckpointTensor> out;
  if (ranks.empty()) return out;  // not rank 0: it writes the file
  // bytes[d][i]: variable i on device d.
  std::vector<std::vector<absl::string_view>> bytes(m.devices().size());
  std::vector<size_t> read(ranks.size(), 0);
  for (size_t d = 0; d < m.devices().size(); ++d) {
    const size_t r = static_cast<size_t>(m.devices()[d].rank);
    for (const ir::Var& v : m.vars()) {
      const size_t n = static_cast<size_t>(v.replicaType(d).bytes());
      if (r >= ranks.size() || read[r] + n > ranks[r].size())
        return absl::InternalError(absl::StrCat("rank ", r, " sent fewer variable bytes than ",
                                                m.name(), " has on its devices"));
      bytes[d].push_back(absl::string_view(ranks[r]).substr(read[r], n));
      read[r] += n;
    }
  }
  for (size_t i = 0; i < m.vars().size(); ++i) {
    const ir::Var& v = m.vars()[i];
    if (!v.packs.empty()) {
      // Written as the unsharded module's variables (the format does not change): a sharded
      // one gathered from the shards of the first shard group's devices (every group holds
      // the same) and cut into them; a bucket's update count once for each of its parameters.
      std::string whole;
      for (size_t d = 0; d < (v.sharded() ? v.shardGroupSize() : 1); ++d) {
        whole.append(bytes[d][i].data(), bytes[d][i].size());
      }
      size_t at = 0;
      for (const ir::VarPiece& p : v.packs) {
        const size_t n = static_cast<size_t>(p.type.bytes());
        out.push_back({p.var, 0, p.type, whole.substr(v.sharded() ? at : 0, n)});
        at += n;
      }
      continue;
    }
    out.push_back({v.name, 0, v.type, std::string(bytes[0][i])});
    for (size_t d = 1; d < m.devices().size(); ++d)
      if (bytes[d][i] != bytes[0][i])
        out.push_back({v.name, static_cast<uint32_t>(d), v.type, std::string(bytes[d][i])});
  }
  return out;
}

namespace {

/// The packed variable of `m` (shard-weight-update's state) that holds the unsharded
/// module's variable `name`, or null.
const ir::Var* packing(const ir::Module& m, const std::string& name) {
  for (const ir::Var& v : m.vars())
    for (const ir::VarPiece& p : v.packs)
      if (p.var == name) return &v;
  return nullptr;
}

}  // namespace

absl::Status restoreVariables(const Checkpoint& c, Executor& ex, const std::string& path) {
  const ir::Module& m = ex.module();
  // name -> replica -> tensor
  std::map<std::string, std::map<uint32_t, const CheckpointTensor*>> stored;
  for (const CheckpointTensor& t : c.tensors) {
    if (m.findVar(t.name) == nullptr && packing(m, t.name) == nullptr)
      return ckptError(path, absl::StrCat("has variable @", t.name, ", which ", m.name(),
                                          " does not (a checkpoint of another model?)"));
    stored[t.name][t.replica] = &t;
  }
  // A packed variable (sharded optimizer state) is read from the unsharded variables it
  // stands for, so a run resumes sharded or not, on any device count: each device takes
  // its shard of them back to back; an update count takes its first parameter's.
  std::map<std::string, std::string> packed;  // var -> its whole value
  for (const ir::Var& v : m.vars()) {
    if (v.packs.empty()) continue;
    std::string& whole = packed[v.name];
    for (const ir::VarPiece& p : v.packs) {
      auto it = stored.find(p.var);
      if (it == stored.end() || !it->second.contains(0))
        return ckptError(path, absl::StrCat("has no value for variable @", p.var, " of ", m.name(),
                                            " (packed into @", v.name, ")"));
      const CheckpointTensor& t = *it->second.at(0);
      if (!(t.type == p.type))
        return ckptError(
            path, absl::StrCat("has variable @", p.var, " as ", ir::toString(t.type), ", but ",
                               m.name(), " has it as ", ir::toString(p.type)));
      if (v.sharded() || whole.empty()) whole.append(t.bytes);
    }
  }
  for (const ir::Var& v : m.vars()) {
    if (!v.packs.empty()) continue;
    auto it = stored.find(v.name);
    if (it == stored.end() || !it->second.contains(0))
      return ckptError(path, absl::StrCat("has no value for variable @", v.name, " of ", m.name()));
    for (const auto& [replica, t] : it->second)
      if (!(t->type == v.type))
        return ckptError(
            path, absl::StrCat("has variable @", v.name, " as ", ir::toString(t->type), ", but ",
                               m.name(), " has it as ", ir::toString(v.type)));
  }
  const bool same_devices = c.devices == m.devices().size();
  for (const ir::Var& v : m.vars()) {
    if (!v.packs.empty()) {
      const std::string& whole = packed.at(v.name);
      for (size_t d = 0; d < m.devices().size(); ++d) {
        if (m.devices()[d].rank != backend::Processes::current().rank()) continue;
        const ir::TensorType type = v.replicaType(d);
        const size_t at = static_cast<size_t>(v.shardOffset(d) * ir::dtypeBytes(v.type.dtype));
        HostTensor value(type);
        std::memcpy(value.buffer.data(), whole.data() + at, static_cast<size_t>(type.bytes()));
        RETURN_IF_ERROR(ex.writeVariable(v.name, d, value));
      }
      continue;
    }
    const auto& replicas = stored.at(v.name);
    for (size_t d = 0; d < m.devices().size(); ++d) {
      if (m.devices()[d].rank != backend::Processes::current().rank()) continue;  // its own
      auto it = same_devices ? replicas.find(static_cast<uint32_t>(d)) : replicas.end();
      const CheckpointTensor& t = *(it != replicas.end() ? it->second : replicas.at(0));
      HostTensor value(t.type);
      std::memcpy(value.buffer.data(), t.bytes.data(), t.bytes.size());
      if (absl::Status s = ex.writeVariable(v.name, d, value); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status checkCompatible(const Checkpoint& c, const std::string& model,
                             const std::vector<std::pair<std::string, std::string>>& settings,
                             const std::string& path, const CompatibilityNotes& notes) {
  if (c.model != model)
    return ckptError(path, absl::StrCat("is a checkpoint of ", c.model, ", not of ", model, " (",
                                        notes.model_setting, ")"));
  // Every setting that differs is named, this run's and then those only the checkpoint
  // lists (one listed only when given): one may follow from another (--warmup sets a
  // schedule, --optimizer its values), and blaming the first alone would name one the
  // user did not give.
  auto find = [](const std::vector<std::pair<std::string, std::string>>& list,
                 const std::string& flag) -> const std::string* {
    for (const auto& [f, v] : list)
      if (f == flag) return &v;
    return nullptr;
  };
  std::vector<std::string> flags;
  for (const auto& [flag, value] : settings) flags.push_back(flag);
  for (const auto& [flag, value] : c.settings)
    if (find(settings, flag) == nullptr) flags.push_back(flag);
  std::vector<std::string> written, here;
  for (const std::string& flag : flags) {
    const std::string* theirs = find(c.settings, flag);
    const std::string* ours = find(settings, flag);
    if (theirs != nullptr && ours != nullptr && *theirs == *ours) continue;
    const std::string name = notes.name_of ? notes.name_of(flag) : flag;
    written.push_back(absl::StrCat(name, " ", theirs != nullptr ? *theirs : "(none)"));
    std::string mine = ours != nullptr ? absl::StrCat(name, " ", *ours) : absl::StrCat("no ", name);
    if (auto note = notes.values.find(flag); note != notes.values.end() && ours != nullptr)
      absl::StrAppend(&mine, " (", note->second, ")");
    here.push_back(std::move(mine));
  }
  if (written.empty()) return absl::OkStatus();
  return ckptError(
      path, absl::StrCat("was written with ", absl::StrJoin(written, ", "), "; this run has ",
                         absl::StrJoin(here, ", "),
                         written.size() == 1 ? " (resume with the value it was written with)"
                                             : " (resume with the values it was written with)"));
}

namespace {

/// In a multi-process run only rank 0 touches the checkpoint file; the others learn from
/// it whether that worked, so that every rank stops alike. `mine` is rank 0's result (OK
/// elsewhere); `what` says what rank 0 could not do, for the other ranks' line.
absl::Status agreeWithFirst(absl::Status mine, absl::string_view what) {
  backend::Processes& procs = backend::Processes::current();
  if (!procs.several()) return mine;
  ASSIGN_OR_RETURN(bool failed, procs.anyRank(!mine.ok(), what));
  if (!failed || !mine.ok()) return mine;
  return absl::AbortedError(absl::StrCat("rank 0 could not ", what, " (its line says why)"));
}

}  // namespace

CheckpointWriter::~CheckpointWriter() {
  if (lock_fd_ < 0) return;
  // Nothing saved: what prepare() made goes, while the lock is still held (a run that
  // opens the file now is refused, and lockDirectory's check sends it to the new file).
  if (!saved_ && made_lock_) ::unlink(checkpointLockPath(dir_).c_str());
  ::close(lock_fd_);                                // releases the flock
  if (!saved_ && made_dir_) ::rmdir(dir_.c_str());  // only when empty
}

absl::Status CheckpointWriter::prepare(bool replacing) {
  return agreeWithFirst(writes_ ? prepareDirectory(replacing) : absl::OkStatus(),
                        "prepare the checkpoint directory");
}

absl::Status CheckpointWriter::lockDirectory() {
  // flock, not a file that exists or not: the kernel releases it when the process ends,
  // however it ends, so a killed run never leaves the directory locked. The file holds
  // who has it, for the refusal's line.
  const std::string path = checkpointLockPath(dir_);
  const bool existed = ::access(path.c_str(), F_OK) == 0;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return absl::InvalidArgumentError(
        absl::StrCat(words_.setting, ": cannot write '", path, "': ", errnoText(errno)));
  // A lock taken on a file that its holder removed (a run that saved nothing) is no lock
  // of the path: take the path's current file instead.
  auto stale = [&] {
    struct stat held = {};
    struct stat now = {};
    return ::fstat(fd, &held) == 0 && (::stat(path.c_str(), &now) != 0 ||
                                       held.st_ino != now.st_ino || held.st_dev != now.st_dev);
  };
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[256] = {};
    const ssize_t n = ::pread(fd, holder, sizeof holder - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK)
      return absl::InvalidArgumentError(
          absl::StrCat(words_.setting, ": cannot lock '", path, "': ", errnoText(err)));
    std::string who(holder, static_cast<size_t>(std::max<ssize_t>(n, 0)));
    while (!who.empty() && (who.back() == '\n' || who.back() == '\0')) who.pop_back();
    return absl::InvalidArgumentError(
        absl::StrCat(words_.setting, ": '", dir_, "' is in use by another run (",
                     who.empty() ? "which has not written its pid yet" : who,
                     "); wait for it to end, or write to another directory"));
  }
  if (stale()) {
    ::close(fd);
    return lockDirectory();
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string who = absl::StrCat("pid ", ::getpid(), " on ", host, "\n");
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, who.data(), who.size(), 0) < 0) {
    const int err = errno;
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(words_.setting, ": cannot write '", path, "': ", errnoText(err)));
  }
  lock_fd_ = fd;
  made_lock_ = !existed;
  return absl::OkStatus();
}

absl::Status CheckpointWriter::prepareDirectory(bool replacing) {
  if (dir_.empty())
    return absl::InvalidArgumentError(
        absl::StrCat(words_.setting, ": the directory name is empty"));
  if (::mkdir(dir_.c_str(), 0755) == 0) {
    made_dir_ = true;
  } else if (errno != EEXIST) {
    return absl::InvalidArgumentError(
        absl::StrCat(words_.setting, ": cannot create directory '", dir_, "': ", errnoText(errno)));
  }
  struct stat st {};
  if (::stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(
        absl::StrCat(words_.setting, ": '", dir_, "' is not a directory"));
  // Locked before anything is looked at: two runs that both found no checkpoint would
  // otherwise both go on and write over each other.
  if (lock_fd_ < 0) RETURN_IF_ERROR(lockDirectory());
  if (!replacing && ::access(checkpointPath(dir_).c_str(), F_OK) == 0)
    return absl::InvalidArgumentError(absl::StrCat(
        words_.setting, ": '", checkpointPath(dir_), "' exists already; continue that run with ",
        words_.resume, " ", dir_, ", or write to another directory"));
  // The lock is ours: a temporary file in the directory is a killed run's.
  for (const std::string& stale : checkpointTempFiles(dir_)) ::unlink(stale.c_str());
  // A directory that cannot take the file fails now, not after an epoch of training.
  std::string probe = absl::StrCat(dir_, "/", kCheckpointTempPrefix, "XXXXXX");
  const int fd = ::mkostemp(probe.data(), O_CLOEXEC);
  if (fd < 0)
    return absl::InvalidArgumentError(
        absl::StrCat(words_.setting, ": cannot write a file in '", dir_, "': ", errnoText(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
  return absl::OkStatus();
}

absl::Status CheckpointWriter::save(const Executor& ex, Checkpoint c) const {
  // Every rank takes part (rank 0 gathers the others' devices); rank 0 writes. The file is
  // put together in memory (the variables twice over at most): under a memory limit that
  // fails as one line naming the checkpoint, and the last complete one stays.
  absl::Status status;
  try {
    auto tensors = captureVariables(ex);
    if (!tensors.ok()) return tensors.status();
    if (!writes_) return agreeWithFirst(absl::OkStatus(), "write the checkpoint");
    c.tensors = std::move(*tensors);
    status = writeCheckpointFile(dir_, c);
    if (status.ok()) saved_ = true;
    if (!status.ok())
      status = absl::Status(status.code(), absl::StrCat(words_.setting, ": ", status.message()));
  } catch (const std::bad_alloc&) {
    int64_t bytes = 0;
    for (const ir::Var& v : ex.module().vars()) bytes += v.type.bytes();
    status = absl::ResourceExhaustedError(absl::StrFormat(
        "%s: out of memory writing '%s' (about %.1f MB of variables per device, held "
        "twice while the file is put together); the last complete checkpoint is kept",
        words_.setting, checkpointPath(dir_), bytes / 1e6));
  }
  return agreeWithFirst(status, "write the checkpoint");
}

}  // namespace tandem::runtime
