#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::ir {

/// Element types a tensor can hold. f64 carries statistics that must add up across
/// devices without losing precision (batch norm's sums); compute is f32 or bf16. i64 is a
/// graph input's type only (NumPy's and PyTorch's int64 ids and labels): a cast to i32
/// at the graph's start feeds the ops that take indices.
enum class DType : uint8_t { kF32, kBF16, kI32, kF64, kI64 };

/// Every dtype, in enum order (for tables and parsers).
inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kBF16, DType::kI32, DType::kF64,
                                       DType::kI64};

/// Text name of a dtype ("f32", "bf16", "i32", "f64", "i64").
absl::string_view dtypeName(DType t);
/// Inverse of dtypeName; an error names the unknown word.
absl::StatusOr<DType> parseDType(absl::string_view s);
/// Bytes per element.
int64_t dtypeBytes(DType t);

/// Tensor extents. Inline storage: nearly every tensor has rank <= 4, and types are copied
/// for every node a pass creates.
using Shape = absl::InlinedVector<int64_t, 4>;

/// A dense tensor type: element type and static shape (row-major, NCHW for images).
/// A rank-0 shape is a scalar.
struct TensorType {
  DType dtype = DType::kF32;
  Shape shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numElements() const;
  int64_t bytes() const { return numElements() * dtypeBytes(dtype); }
  bool operator==(const TensorType&) const = default;
};

/// "f32[256,1,28,28]", "i32[]".
std::string toString(const TensorType& t);

/// The kind of a device, by name: "cpu", "cuda", ... The IR does not interpret it: a
/// backend registers under its kind's name (backend/registry.cc) and tells the compiler
/// what its devices can do (ir/target.h). Interned as a small id, so that a Device stays
/// cheap to copy, compare and hash.
class DeviceKind {
 public:
  /// "cpu": the kind of a device count ("4" is cpu:0 .. cpu:3).
  constexpr DeviceKind() = default;
  /// The kind named `name`, interned on first use; an error past kMaxKinds names.
  static absl::StatusOr<DeviceKind> named(absl::string_view name);
  absl::string_view name() const;
  uint16_t id() const { return id_; }
  bool operator==(const DeviceKind&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, DeviceKind k) {
    return H::combine(std::move(h), k.id_);
  }
  /// How many kind names one process interns at most.
  static constexpr size_t kMaxKinds = 64;

 private:
  explicit constexpr DeviceKind(uint16_t id) : id_(id) {}
  uint16_t id_ = 0;
};

/// A logical device such as cpu:0 or cuda:1. `share` tells apart logical devices that
/// run on one GPU: cuda:0.1 is the second logical device on GPU 0 (cuda:0 is cuda:0.0),
/// so that the multi-device path runs on a one-GPU machine (CPU devices are logical
/// already: cpu:0, cpu:1 are two worker threads). `rank` is the process (MPI rank) that
/// drives the device in a multi-process run: cpu:0@1 is process 1's cpu:0. Share and rank
/// 0 are written without them, so a module reads and prints as before either existed.
struct Device {
  DeviceKind kind;
  int index = 0;
  int rank = 0;
  int share = 0;
  bool operator==(const Device&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const Device& d) {
    return H::combine(std::move(h), d.kind, d.index, d.rank, d.share);
  }
};

/// The most devices a module may span, however they are given (a count or a list). Every
/// pass and the loader are linear in nodes x devices (the pass benchmarks check it), but a
/// module holds every device's copy of the step: 1024 LeNet devices compile in about 2 s
/// and hold 3.8 GB once loaded (each device's parameters, momentum and arenas); 4096 would
/// be 15 GB and ResNet-152's step 16 million nodes (13 GB to compile). Larger counts are
/// for `tandem simulate`, which compiles the step at 2 devices.
inline constexpr size_t kMaxDevices = 1024;

std::string toString(const Device& d);
/// Parses KIND:INDEX[.SHARE][@RANK]: "cpu:0", "cuda:3", "cuda:0.1" (GPU 0's second logical
/// device), "cpu:1@2" (rank 2's cpu:1). Any kind word parses: whether a kind exists, and
/// whether its devices take a share, is for the kinds' registry to say (ir/target.h).
absl::StatusOr<Device> parseDevice(absl::string_view s);
/// Whether a kind's devices may share one physical device (ir/target.h knows).
using SharesDevices = std::function<bool(DeviceKind)>;
/// Parses a device list: "cpu:0,cpu:1", or a count "4" meaning cpu:0..cpu:3. A device of
/// a kind that `shares` says shares devices, written again without a share, is that
/// device's next share: "cuda:0,cuda:0" is cuda:0, cuda:0.1. Rejects other duplicates,
/// empty lists and more than kMaxDevices devices. (parseTargetDevices in ir/target.h also
/// checks the kinds.)
absl::StatusOr<std::vector<Device>> parseDeviceList(absl::string_view s,
                                                    const SharesDevices& shares = nullptr);
std::string toString(const std::vector<Device>& ds);  // "[cpu:0, cpu:1]"
/// The devices of `ranks` processes that each drive `local` (given without ranks), rank
/// by rank: cpu:0,cpu:1 over 2 ranks is cpu:0, cpu:1, cpu:0@1, cpu:1@1. Rank-major, so
/// each process's devices are contiguous (groups=ranks maps one group to a process).
std::vector<Device> devicesAcrossRanks(const std::vector<Device>& local, int ranks);

/// How a persistent variable gets its first value.
struct Initializer {
  enum class Kind : uint8_t { kZeros, kOnes, kNormal, kKaiming };
  Kind kind = Kind::kZeros;
  double std = 0;  // kNormal only

  /// True when every device could compute the value itself (no randomness), so the
  /// data-parallel init needs no broadcast.
  bool isDeterministic() const { return kind == Kind::kZeros || kind == Kind::kOnes; }
  bool operator==(const Initializer&) const = default;
};

/// "zeros", "ones", "normal(std=0.01)", "kaiming".
std::string toString(const Initializer& i);

}  // namespace tandem::ir
