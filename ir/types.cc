#include "ir/types.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <limits>
#include <mutex>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ir/number_format.h"
#include "ir/status_macros.h"

namespace tandem::ir {

absl::string_view dtypeName(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kI32:
      return "i32";
    case DType::kF64:
      return "f64";
    case DType::kI64:
      return "i64";
  }
  return "?";
}

absl::StatusOr<DType> parseDType(absl::string_view s) {
  for (DType t : kAllDTypes)
    if (dtypeName(t) == s) return t;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", s, "' (expected f32, bf16, i32, f64 or i64)"));
}

int64_t dtypeBytes(DType t) {
  switch (t) {
    case DType::kBF16:
      return 2;
    case DType::kF64:
    case DType::kI64:
      return 8;
    default:
      return 4;
  }
}

int64_t TensorType::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string toString(const TensorType& t) {
  return absl::StrCat(dtypeName(t.dtype), "[", absl::StrJoin(t.shape, ","), "]");
}

namespace {

// The interned kind names: slot i holds kind i's name once set; names are never removed,
// so name() reads without a lock. Kind 0 is "cpu", the kind of a device count.
struct KindNames {
  std::mutex mu;  // held while adding
  std::array<std::atomic<const std::string*>, DeviceKind::kMaxKinds> names{};
  std::atomic<size_t> count{0};
  KindNames() {
    names[0] = new std::string("cpu");
    count = 1;
  }
};

KindNames& kindNames() {
  static KindNames* k = new KindNames();  // never destroyed: devices outlive static teardown
  return *k;
}

}  // namespace

absl::StatusOr<DeviceKind> DeviceKind::named(absl::string_view name) {
  KindNames& k = kindNames();
  auto find = [&]() -> std::optional<DeviceKind> {
    const size_t n = k.count.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; ++i)
      if (*k.names[i].load(std::memory_order_acquire) == name)
        return DeviceKind(static_cast<uint16_t>(i));
    return std::nullopt;
  };
  if (auto found = find()) return *found;
  std::lock_guard<std::mutex> l(k.mu);
  if (auto found = find()) return *found;
  const size_t n = k.count.load(std::memory_order_relaxed);
  if (n == kMaxKinds)
    return absl::ResourceExhaustedError(absl::StrCat(
        "device kind '", name, "' is one more than the ", kMaxKinds, " kinds a process names"));
  k.names[n].store(new std::string(name), std::memory_order_release);
  k.count.store(n + 1, std::memory_order_release);
  return DeviceKind(static_cast<uint16_t>(n));
}

absl::string_view DeviceKind::name() const {
  return *kindNames().names[id_].load(std::memory_order_acquire);
}

std::string toString(const Device& d) {
  return absl::StrCat(d.kind.name(), ":", d.index, d.share == 0 ? "" : absl::StrCat(".", d.share),
                      d.rank == 0 ? "" : absl::StrCat("@", d.rank));
}

std::vector<Device> devicesAcrossRanks(const std::vector<Device>& local, int ranks) {
  std::vector<Device> out;
  out.reserve(local.size() * static_cast<size_t>(std::max(ranks, 0)));
  for (int r = 0; r < ranks; ++r)
    for (Device d : local) {
      d.rank = r;
      out.push_back(d);
    }
  return out;
}

absl::StatusOr<Device> parseDevice(absl::string_view s) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("unknown device '", s, "': ", why));
  };
  size_t colon = s.find(':');
  if (colon == absl::string_view::npos) return bad("expected KIND:INDEX such as cpu:0 or cuda:1");
  absl::string_view kind = s.substr(0, colon), index = s.substr(colon + 1), rank, share;
  const size_t at = index.find('@');
  if (at != absl::string_view::npos) {
    rank = index.substr(at + 1);
    index = index.substr(0, at);
  }
  const size_t dot = index.find('.');
  if (dot != absl::string_view::npos) {
    share = index.substr(dot + 1);
    index = index.substr(0, dot);
  }
  // Any word names a kind: the kinds' registry (ir/target.h) says which exist.
  const bool word = !kind.empty() && absl::ascii_isalpha(static_cast<unsigned char>(kind[0])) &&
                    std::all_of(kind.begin(), kind.end(), [](char c) {
                      return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
                    });
  if (!word) return bad("the device kind must be a word such as cpu or cuda");
  Device d;
  ASSIGN_OR_RETURN(d.kind, DeviceKind::named(kind));
  auto [end, ec] = std::from_chars(index.data(), index.data() + index.size(), d.index);
  if (ec == std::errc::result_out_of_range)
    return bad(absl::StrCat("the index must be at most ", kMaxDevices - 1));
  if (index.empty() || ec != std::errc() || end != index.data() + index.size() || d.index < 0)
    return bad("the index must be a non-negative integer");
  // A module has at most kMaxDevices devices, numbered from 0 within a kind.
  if (static_cast<size_t>(d.index) >= kMaxDevices)
    return bad(absl::StrCat("the index must be at most ", kMaxDevices - 1));
  if (dot != absl::string_view::npos) {
    auto [share_end, share_ec] =
        std::from_chars(share.data(), share.data() + share.size(), d.share);
    if (share.empty() || share_ec != std::errc() || share_end != share.data() + share.size() ||
        d.share < 0)
      return bad(
          "the share after '.' must be a non-negative integer (cuda:0.1: GPU 0's second "
          "logical device)");
    if (static_cast<size_t>(d.share) >= kMaxDevices)
      return bad(absl::StrCat("the share after '.' must be at most ", kMaxDevices - 1));
  }
  if (at != absl::string_view::npos) {
    auto [rank_end, rank_ec] = std::from_chars(rank.data(), rank.data() + rank.size(), d.rank);
    if (rank.empty() || rank_ec != std::errc() || rank_end != rank.data() + rank.size() ||
        d.rank < 0)
      return bad("the rank after '@' must be a non-negative integer (cpu:0@1: rank 1's cpu:0)");
    if (static_cast<size_t>(d.rank) >= kMaxDevices)
      return bad(absl::StrCat("the rank after '@' must be at most ", kMaxDevices - 1));
  }
  return d;
}

absl::StatusOr<std::vector<Device>> parseDeviceList(absl::string_view s,
                                                    const SharesDevices& shares) {
  std::vector<Device> out;
  // Spaces around a count or an entry are fine, as the printer writes lists "[cpu:0, cpu:1]".
  const absl::string_view trimmed = absl::StripAsciiWhitespace(s);
  int count = 0;
  auto [end, ec] = std::from_chars(trimmed.data(), trimmed.data() + trimmed.size(), count);
  if (!trimmed.empty() && ec == std::errc() && end == trimmed.data() + trimmed.size()) {
    if (count < 1 || static_cast<size_t>(count) > kMaxDevices)
      return absl::InvalidArgumentError(
          absl::StrCat("device count ", trimmed, " is out of range (1 to ", kMaxDevices, ")"));
    for (int i = 0; i < count; ++i) out.push_back({DeviceKind(), i});  // cpu:i
    return out;
  }
  if (trimmed.empty()) return absl::InvalidArgumentError("the device list is empty");
  absl::flat_hash_set<Device> seen;
  for (absl::string_view part : absl::StrSplit(s, ',')) {
    absl::string_view text = absl::StripAsciiWhitespace(part);
    auto d = parseDevice(text);
    if (!d.ok()) return d.status();
    // "cuda:0,cuda:0": the second is GPU 0's next logical device (cuda:0.1).
    const bool implicit_share = shares && shares(d->kind) && !absl::StrContains(text, '.');
    while (implicit_share && seen.contains(*d)) ++d->share;
    if (!seen.insert(*d).second)
      return absl::InvalidArgumentError(
          absl::StrCat("device ", toString(*d), " is listed twice in '", s, "'"));
    // Checked as the list grows, so that a huge list is refused before it is all parsed.
    if (out.size() == kMaxDevices)
      return absl::InvalidArgumentError(absl::StrCat("the device list has more than ", kMaxDevices,
                                                     " devices (", toString(*d), " is number ",
                                                     kMaxDevices + 1, ")"));
    out.push_back(*d);
  }
  return out;
}

std::string toString(const std::vector<Device>& ds) {
  return absl::StrCat(
      "[", absl::StrJoin(ds, ", ", [](std::string* o, const Device& d) { o->append(toString(d)); }),
      "]");
}

std::string toString(const Initializer& i) {
  switch (i.kind) {
    case Initializer::Kind::kZeros:
      return "zeros";
    case Initializer::Kind::kOnes:
      return "ones";
    case Initializer::Kind::kKaiming:
      return "kaiming";
    case Initializer::Kind::kNormal:
      return absl::StrCat("normal(std=", formatDouble(i.std), ")");
  }
  return "?";
}

}  // namespace tandem::ir
