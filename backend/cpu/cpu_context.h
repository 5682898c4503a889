#pragma once

#include <cstdint>

#include "ir/types.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace tandem::backend::cpu {

/// What the kernels of one CPU device share: the oneDNN engine and stream they execute
/// on and the run's seed. One context per logical device; it is used only from that
/// device's compute stream (a single worker thread), so it needs no locking.
class CpuContext {
 public:
  CpuContext(ir::Device device, uint64_t seed, bool winograd = true)
      : device_(device),
        seed_(seed),
        winograd_(winograd),
        engine_(dnnl::engine::kind::cpu, 0),
        stream_(engine_) {}

  const ir::Device& device() const { return device_; }
  /// Seed of the run; `initialize` derives each variable's random stream from it and the
  /// variable's name, so a value does not depend on the device count or node order.
  uint64_t seed() const { return seed_; }
  /// Whether the convolution kernels' rule may choose Winograd (less exact than direct
  /// convolution; CpuOptions::conv_algorithm kDirect turns it off).
  bool winograd() const { return winograd_; }
  dnnl::engine& engine() { return engine_; }
  dnnl::stream& stream() { return stream_; }

 private:
  ir::Device device_;
  uint64_t seed_;
  bool winograd_;
  dnnl::engine engine_;
  dnnl::stream stream_;
};

}  // namespace tandem::backend::cpu
