#pragma once

// Shared plumbing of the oneDNN-backed CPU kernels: memory descriptors for IR tensor
// types, errors as absl::Status, and DnnlProgram, a fixed sequence of primitives (and
// the reorders around them) bound to a kernel's operands and results.

#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "backend/cpu/conv_choice.h"
#include "backend/cpu/cpu_context.h"
#include "backend/cpu/kernels.h"
#include "backend/tensor_view.h"
#include "ir/ir.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace tandem::backend::cpu {

/// The shape of `t` as oneDNN dims.
dnnl::memory::dims dnnlDims(const ir::TensorType& t);

/// oneDNN's name of an f32, bf16 or i32 dtype (f64 has none in oneDNN 2.6: internal error).
dnnl::memory::data_type dnnlType(ir::DType t);

/// Dense row-major memory of `t` in its dtype (NCHW images, OIHW filters, [C] vectors): the
/// layout every tensor has between kernels.
dnnl::memory::desc plainDesc(const ir::TensorType& t);

/// nChw16c (oneDNN's aBcd16b) of an [N,C,H,W] tensor whose C is a multiple of 16: the
/// layout of the activations a CPU device keeps channel-blocked (layout_plan.h).
dnnl::memory::desc channelBlockedDesc(const ir::TensorType& t);

/// The layout `v` has between kernels: channel-blocked or plain.
dnnl::memory::desc userDesc(const KernelInit& init, const ir::Value* v);

/// `t`'s dims with format_tag::any: the primitive picks its preferred (blocked) layout.
dnnl::memory::desc anyDesc(const ir::TensorType& t);

/// OK unless `node` reads or writes bf16 on a CPU without bf16 instructions; then an
/// error naming the node and what the CPU reported (checked once per kernel, at load).
absl::Status checkBf16Support(const ir::Node& node);

/// A primitive attribute with a user-managed scratchpad: DnnlProgram hands every
/// primitive its scratchpad from the thread's arena instead of letting oneDNN allocate
/// (and page-fault) a fresh one on each execution.
dnnl::primitive_attr userScratchpadAttr();

/// "<node>: oneDNN could not create the <what>: <oneDNN message> (status N)", for the
/// dnnl::error a factory catches.
absl::Status dnnlFailure(const ir::Node& node, absl::string_view what, const dnnl::error& e);

/// Conv-family factories with a forced strategy, for benchmarks and tests that compare
/// them (the kernel table uses kAuto: the plan's algorithm, else the rule). implementations() of
/// the kernel's program says whether a forced kWinograd got Winograd ("jit_wino...") or fell back.
KernelOr makeConv2dKernelWithStrategy(const KernelInit& init, ConvStrategy strategy);
KernelOr makeConv2dBackwardDataKernelWithStrategy(const KernelInit& init, ConvStrategy strategy);
KernelOr makeConv2dBackwardFilterKernelWithStrategy(const KernelInit& init, ConvStrategy strategy);

/// A fixed list of oneDNN primitives over slots: the kernel's operands and results
/// (plain layout, pointers bound on each run) and temporaries (reordered copies,
/// scratchpads) laid out in one per-thread arena. Built once in a factory;
/// run() only sets data handles and executes.
class DnnlProgram {
 public:
  using Slot = size_t;

  explicit DnnlProgram(CpuContext& ctx) : engine_(ctx.engine()), stream_(ctx.stream()) {}

  dnnl::engine& engine() { return engine_; }

  /// Operand `i` (in) or result `i` (out) of the kernel, in its plain layout.
  Slot input(size_t i, const ir::TensorType& t) { return addSlot(plainDesc(t), Kind::kIn, i); }
  Slot output(size_t i, const ir::TensorType& t) { return addSlot(plainDesc(t), Kind::kOut, i); }
  /// The same in layout `md` (an activation kept channel-blocked between kernels).
  Slot input(size_t i, const dnnl::memory::desc& md) { return addSlot(md, Kind::kIn, i); }
  Slot output(size_t i, const dnnl::memory::desc& md) { return addSlot(md, Kind::kOut, i); }
  /// A temporary of layout `md`; its content does not survive the run.
  Slot temp(const dnnl::memory::desc& md);

  /// `s` when it already has layout `md`, else a temporary filled from `s` by a reorder
  /// step appended now (call before adding the primitive that reads it).
  Slot inputAs(Slot s, const dnnl::memory::desc& md);
  /// `s` when it already has layout `md`, else a temporary for the primitive to write;
  /// pass the pair to storeTo() after adding that primitive.
  Slot outputAs(Slot s, const dnnl::memory::desc& md);
  /// Appends the reorder from `from` into `to` (nothing when they are the same slot).
  void storeTo(Slot from, Slot to);

  /// Appends a primitive step. `args` maps DNNL_ARG_* to slots; the scratchpad of `pd`
  /// (created with userScratchpadAttr()) gets a temporary.
  void add(const dnnl::primitive_desc_base& pd, const dnnl::primitive& p,
           const std::vector<std::pair<int, Slot>>& args);

  /// Points the slots at this run's tensors and the thread's arena, submits every step
  /// to the stream in order, and waits for them.
  void run(absl::Span<const TensorView> in, absl::Span<const TensorView> out);

  /// "impl, impl, ..." of the primitive steps (reorders included), for benchmarks.
  const std::string& implementations() const { return impls_; }

 private:
  enum class Kind { kIn, kOut, kTemp };
  struct SlotInfo {
    dnnl::memory mem;
    Kind kind;
    size_t index;  // operand/result index, or byte offset in the arena for temporaries
  };
  struct Step {
    dnnl::primitive prim;
    std::unordered_map<int, dnnl::memory> args;
  };

  Slot addSlot(const dnnl::memory::desc& md, Kind kind, size_t index);
  void noteImpl(const dnnl::primitive_desc_base& pd);

  dnnl::engine engine_;
  dnnl::stream stream_;
  std::vector<SlotInfo> slots_;
  std::vector<Step> steps_;
  size_t temp_bytes_ = 0;
  std::string impls_;
};

/// The exact program a kernel runs instead of its fast one when an operand in `watched`
/// holds NaN or infinities, which the fast algorithm mishandles (a convolution's Winograd
/// transforms, or GEMM over zero padding: conv_kernels.cc); the check is one read of those
/// operands. ProgramKernel and the GEMM convolutions (gemm_conv.h) hold one.
class ExactFallback {
 public:
  ExactFallback(DnnlProgram exact, std::vector<size_t> watched)
      : exact_(std::move(exact)), watched_(std::move(watched)) {}
  /// Runs the exact program and returns true when a watched operand of this run is not
  /// finite; else false, having run nothing.
  bool ranExact(absl::Span<const TensorView> in, absl::Span<const TensorView> out);
  const DnnlProgram& program() const { return exact_; }

 private:
  DnnlProgram exact_;
  std::vector<size_t> watched_;
};

/// A kernel that is one DnnlProgram and nothing else (the convolutions), with an exact one
/// for non-finite operands where its algorithm needs it (ExactFallback).
class ProgramKernel final : public CpuKernel {
 public:
  explicit ProgramKernel(DnnlProgram program) : program_(std::move(program)) {}
  ProgramKernel(DnnlProgram program, DnnlProgram exact, std::vector<size_t> watched)
      : program_(std::move(program)), exact_(std::in_place, std::move(exact), std::move(watched)) {}
  void compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) override;
  /// The program that runs on finite operands.
  const DnnlProgram& program() const { return program_; }
  /// The one that runs otherwise, or null.
  const DnnlProgram* exact() const { return exact_ ? &exact_->program() : nullptr; }

 private:
  DnnlProgram program_;
  std::optional<ExactFallback> exact_;
};

}  // namespace tandem::backend::cpu
