#include "sim/gpu_specs.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::sim {
namespace {

constexpr double kT = 1e12, kG = 1e9;

// Datasheet figures, dense (no 2:4 sparsity), SXM parts:
// - A100 80GB SXM: NVIDIA A100 Tensor Core GPU datasheet (2021): TF32 156 TFLOPS, BF16
//   312 TFLOPS, HBM2e 2,039 GB/s. Memory: A100 and H100 80 GB, H200 141 GB, P100 16 GB,
//   V100 32 GB (the datasheets' SXM parts).
// - H100 SXM5: NVIDIA H100 Tensor Core GPU datasheet (2023): TF32 494.7 (989 sparse),
//   BF16 989.4 (1,979 sparse) TFLOPS, HBM3 3.35 TB/s.
// - H200 SXM: NVIDIA H200 datasheet (2024): H100's compute, HBM3e 4.8 TB/s.
// - V100 SXM2 32GB: NVIDIA V100 datasheet: FP32 15.7, FP16 tensor 125 TFLOPS, 900 GB/s.
// - P100 SXM2: NVIDIA Tesla P100 datasheet: FP32 10.6, FP16 21.2 TFLOPS, 732 GB/s.
// NVLink all_reduce busbw of 8 GPUs at large sizes as nccl-tests reports it: 460-480 GB/s
// on 8x H100 SXM (NVLink 4, NVSwitch), 230-250 GB/s on 8x A100 SXM (NVLink 3); the lower
// end is used. V100 (DGX-1 hybrid cube mesh, NVLink 2) ~130 GB/s, P100 (NVLink 1) ~65 GB/s
// in NVIDIA's DGX-1 NCCL 2 results.
const std::vector<GpuSpec>& gpus() {
  static const auto* specs = new std::vector<GpuSpec>{
      {"a100", 156 * kT, 312 * kT, 2039 * kG, 230 * kG, "NVIDIA A100 80GB SXM datasheet", 80 * kG},
      {"h100", 494.7 * kT, 989.4 * kT, 3350 * kG, 460 * kG, "NVIDIA H100 SXM5 datasheet", 80 * kG},
      {"h200", 494.7 * kT, 989.4 * kT, 4800 * kG, 460 * kG, "NVIDIA H200 SXM datasheet", 141 * kG},
      {"p100", 10.6 * kT, 21.2 * kT, 732 * kG, 65 * kG, "NVIDIA Tesla P100 SXM2 datasheet",
       16 * kG},
      {"v100", 15.7 * kT, 125 * kT, 900 * kG, 130 * kG, "NVIDIA V100 SXM2 datasheet", 32 * kG},
  };
  return *specs;
}

}  // namespace

absl::StatusOr<GpuSpec> gpuByName(const std::string& name) {
  for (const GpuSpec& g : gpus())
    if (g.name == name) return g;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown GPU '", name, "' (expected ", absl::StrJoin(gpuNames(), ", "), ")"));
}

std::vector<std::string> gpuNames() {
  std::vector<std::string> out;
  for (const GpuSpec& g : gpus()) out.push_back(g.name);
  return out;
}

// Latencies: NCCL's own tuning model (src/graph/tuning.cc) charges a few microseconds per
// step on NVLink and ~5-10 us per network hop; 3 us and 8 us are used. Inter-node bus
// bandwidths are 90 % of the line rate per GPU, what nccl-tests reaches across nodes with
// one NIC per GPU (DGX H100: 8x ConnectX-7 NDR 400 Gb/s; DGX A100: 8x HDR 200 Gb/s).
std::vector<std::string> linkNames() { return {"nvlink", "pcie", "ib", "ib-hdr", "roce-25g"}; }

absl::StatusOr<LinkSpec> linkByName(const std::string& name, const GpuSpec& gpu) {
  if (name == "nvlink")
    return LinkSpec{name, 3e-6, gpu.nvlink_busbw, absl::StrCat(gpu.source, "; nccl-tests")};
  // PCIe Gen4 x16 through the host bridge: ~20 GB/s all_reduce busbw.
  if (name == "pcie") return LinkSpec{name, 5e-6, 20 * kG, "PCIe Gen4 x16, nccl-tests"};
  if (name == "ib") return LinkSpec{name, 8e-6, 0.9 * 400e9 / 8, "InfiniBand NDR 400 Gb/s"};
  if (name == "ib-hdr") return LinkSpec{name, 8e-6, 0.9 * 200e9 / 8, "InfiniBand HDR 200 Gb/s"};
  // Horovod's benchmark cluster (Sergeev & Del Balso 2018): one 25 Gb/s RoCE NIC per server
  // of 4 GPUs. A ring enters and leaves each server once, so its bus bandwidth is the NIC's.
  if (name == "roce-25g") return LinkSpec{name, 10e-6, 0.9 * 25e9 / 8, "25 Gb/s RoCE (Horovod)"};
  return absl::InvalidArgumentError(
      absl::StrCat("unknown link '", name, "' (expected ", absl::StrJoin(linkNames(), ", "), ")"));
}

}  // namespace tandem::sim
