#pragma once

// The devices and links `tandem simulate` can model: peak arithmetic and memory bandwidth
// of a GPU (for the roofline cost of a node) and the alpha-beta parameters of a link (for
// the cost of a collective), each with the public source of its figures.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::sim {

/// A GPU as the roofline model sees it.
struct GpuSpec {
  std::string name;
  /// Dense peak FLOP/s of f32 work (TF32 tensor cores where the GPU has them: cuDNN and
  /// cuBLAS use them for f32 convolutions and GEMMs by default in PyTorch) and of bf16 (or,
  /// before Ampere, fp16) work.
  double f32_flops = 0, bf16_flops = 0;
  /// Peak memory bandwidth, bytes/s.
  double mem_bytes_per_s = 0;
  /// all_reduce bus bandwidth (bytes/s) between the GPUs of one node over NVLink, as
  /// nccl-tests reports it, and the node's GPU count.
  double nvlink_busbw = 0;
  std::string source;
  /// Device memory, bytes: what one device's step (activations and variables) must fit.
  double memory_bytes = 0;
};

/// A link between devices in the alpha-beta model: a fixed latency per message step and a
/// bus bandwidth (NCCL's busbw: what a ring all_reduce achieves per GPU on large messages).
struct LinkSpec {
  std::string name;
  double alpha_s = 0;  // seconds per ring or tree step
  double busbw = 0;    // bytes/s
  std::string source;
};

/// The GPUs by name (a100, h100, h200, p100, v100); errors list the known names.
absl::StatusOr<GpuSpec> gpuByName(const std::string& name);
std::vector<std::string> gpuNames();

/// A link by name for `gpu`: nvlink (the GPU's NVLink busbw), pcie, ib (NDR 400 Gb/s per
/// GPU), ib-hdr (200 Gb/s), roce-25g (25 Gb/s Ethernet, Horovod's 2017 cluster).
absl::StatusOr<LinkSpec> linkByName(const std::string& name, const GpuSpec& gpu);
std::vector<std::string> linkNames();

}  // namespace tandem::sim
