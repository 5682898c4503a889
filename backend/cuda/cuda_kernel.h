#pragma once

// The CUDA kernel table (backend/kernel_table.h): one factory per kernel slot of the op
// spec, defined next to its family in backend/cuda/*_kernels.cc (a missing factory is a
// link error, as on CPU). Factories are
// host code (g++); the own kernels they launch live in *.cu files behind plain launch
// functions (backend/cuda/*_launch.h), whose per-element math is in TANDEM_HD headers
// that the host tests compile too.

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/cuda_status.h"
#include "backend/kernel.h"
#include "backend/kernel_table.h"
#include "ir/ir.h"

namespace tandem::backend::cuda {

/// A CUDA kernel: launching it makes its GPU current, enqueues its library calls or own
/// kernels on the stream's cudaStream_t and returns. A launch error of an own kernel
/// (cudaGetLastError after enqueue) is returned by launch(); errors of the work itself
/// come back from Stream::synchronize.
class CudaKernel : public Kernel {
 public:
  absl::Status launch(Stream& stream, absl::Span<const TensorView> in,
                      absl::Span<const TensorView> out) final;

  /// "%conv1.0 (conv2d @cuda:0)": what errors name (pass it as CUDA_TRY's `where`).
  void setDescription(std::string what) { what_ = std::move(what); }
  const std::string& what() const { return what_; }

  /// The planned workspace (Kernel::bindWorkspace): refused, naming the node, when the
  /// need the kernel declared when it was made (needWorkspace) is larger.
  absl::Status bindWorkspace(const TensorView& workspace) final;

 protected:
  explicit CudaKernel(CudaContext& ctx) : ctx_(ctx) {}
  /// Enqueues the node's work on `stream`; views are in device memory (the node's
  /// operands and results, in the node's order).
  virtual absl::Status enqueue(cudaStream_t stream, absl::Span<const TensorView> in,
                               absl::Span<const TensorView> out) = 0;
  CudaContext& ctx() const { return ctx_; }

  /// The bytes the plan of n's graph gives it as workspace, or -1 when it plans none (a
  /// kernel made outside a planned module: the kernel tests).
  static int64_t plannedWorkspace(const ir::Node& n);
  /// Called once when the kernel is made, with what its launches will use. With a planned
  /// workspace: checked against it (the loader binds the bytes next); without one: reserved
  /// in the device's shared buffer (workspace.h), which only grows at load.
  absl::Status needWorkspace(const ir::Node& n, int64_t bytes);
  /// The workspace of a launch (of the bytes given to needWorkspace).
  absl::StatusOr<void*> workspace() const;

 private:
  CudaContext& ctx_;
  std::string what_;
  int64_t need_ = 0;       // needWorkspace's bytes
  bool planned_ = false;   // the plan gives the node a workspace
  void* bound_ = nullptr;  // bindWorkspace's bytes
};

/// What a factory gets: the node (operand/result types, attributes, the module's
/// variables for `initialize`), its device's context and the device's layout plan.
struct KernelInit {
  const ir::Node& node;
  CudaContext& ctx;
  /// The values kept NHWC between kernels (layout_plan.h); null: all NCHW.
  const absl::flat_hash_set<const ir::Value*>* nhwc = nullptr;
  bool isNhwc(const ir::Value* v) const { return nhwc != nullptr && nhwc->contains(v); }
};

using KernelOr = absl::StatusOr<std::unique_ptr<CudaKernel>>;

TANDEM_DECLARE_KERNEL_FACTORIES()

/// The CUDA backend's kernel table.
const KernelTable<KernelInit, std::unique_ptr<CudaKernel>>& kernelTable();

/// Creates the CUDA kernel of a node (its GPU must be current), taking its tensors in the
/// layouts `nhwc` gives them (null: all NCHW); a layout the kernel cannot take is an
/// internal error naming the node (layout_plan.h's checkNhwcSlots). Ops the runtime
/// executes itself (the `runtime` trait) have no kernel: asking for one is an internal error.
KernelOr makeKernel(const ir::Node& node, CudaContext& ctx,
                    const absl::flat_hash_set<const ir::Value*>* nhwc = nullptr);

/// The cudaStream_t of a stream of the CUDA backend.
cudaStream_t streamHandle(Stream& stream);

}  // namespace tandem::backend::cuda
