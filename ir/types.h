#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::ir {

/// Element types a tensor can hold. f64 carries statistics that must add up across
/// devices without losing precision (batch norm's sums); compute is f32 or bf16.
enum class DType : uint8_t { kF32, kBF16, kI32, kF64 };

/// Text name of a dtype ("f32", "bf16", "i32", "f64").
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

/// The kinds of device a node can be placed on.
enum class DeviceKind : uint8_t { kCpu, kCuda };

/// A logical device such as cpu:0 or cuda:1. `share` tells apart logical devices that
/// run on one GPU: cuda:0.1 is the second logical device on GPU 0 (cuda:0 is cuda:0.0),
/// so that the multi-device path runs on a one-GPU machine (CPU devices are logical
/// already: cpu:0, cpu:1 are two worker threads). `rank` is the process (MPI rank) that
/// drives the device in a multi-process run: cpu:0@1 is process 1's cpu:0. Share and rank
/// 0 are written without them, so a module reads and prints as before either existed.
struct Device {
  DeviceKind kind = DeviceKind::kCpu;
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
/// Parses "cpu:0" / "cuda:3" / "cuda:0.1" (GPU 0's second logical device) / "cpu:1@2"
/// (rank 2's cpu:1); the error names the text and the known kinds.
absl::StatusOr<Device> parseDevice(absl::string_view s);
/// Parses a device list: "cpu:0,cpu:1", or a count "4" meaning cpu:0..cpu:3. A CUDA
/// device written again without a share is the GPU's next logical device: "cuda:0,cuda:0"
/// is cuda:0, cuda:0.1. Rejects other duplicates, empty lists and more than kMaxDevices
/// devices.
absl::StatusOr<std::vector<Device>> parseDeviceList(absl::string_view s);
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
