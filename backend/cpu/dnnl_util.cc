#include "backend/cpu/dnnl_util.h"

#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "backend/cpu/cpu_info.h"
#include "backend/cpu/finite_scan.h"

namespace tandem::backend::cpu {
namespace {

using dnnl::memory;

/// The calling thread's arena for kernel temporaries. Kernels of one device run one
/// after another on that device's worker thread, so they can all share one buffer (the
/// largest need wins) instead of each holding its own reorder copies and scratchpads.
/// Contents do not survive from one kernel run to the next.
char* threadArena(size_t bytes) {
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<char, Free> arena;
  thread_local size_t capacity = 0;
  if (bytes > capacity) {
    arena.reset();  // free first: the old contents are not needed
    capacity = (bytes + 4095) / 4096 * 4096;
    arena.reset(static_cast<char*>(std::aligned_alloc(4096, capacity)));
    // A kernel's compute has no error path: out of memory here (a ulimit -v, say) is the
    // bad_alloc the CLI's terminate handler names in one line, not a null arena to crash on.
    if (arena == nullptr) {
      capacity = 0;
      throw std::bad_alloc();
    }
  }
  return arena.get();
}

constexpr size_t kTempAlign = 64;

}  // namespace

memory::dims dnnlDims(const ir::TensorType& t) {
  return memory::dims(t.shape.begin(), t.shape.end());
}

memory::data_type dnnlType(ir::DType t) {
  switch (t) {
    case ir::DType::kF32:
      return memory::data_type::f32;
    case ir::DType::kBF16:
      return memory::data_type::bf16;
    case ir::DType::kI32:
      return memory::data_type::s32;
    case ir::DType::kF64:
    case ir::DType::kI64:
      break;
  }
  throw std::logic_error("an f64 or i64 tensor has no oneDNN memory descriptor");
}

memory::desc plainDesc(const ir::TensorType& t) {
  // Explicit row-major strides work for any rank (and equal the a/ab/abcd tags).
  memory::dims dims = dnnlDims(t);
  memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return memory::desc(dims, dnnlType(t.dtype), strides);
}

absl::Status checkBf16Support(const ir::Node& node) {
  bool bf16 = false;
  for (const ir::Value* v : node.operands()) bf16 = bf16 || v->type().dtype == ir::DType::kBF16;
  for (size_t i = 0; i < node.numResults(); ++i)
    bf16 = bf16 || node.result(i)->type().dtype == ir::DType::kBF16;
  if (!bf16) return absl::OkStatus();
  // Read once: the answer does not change while the process runs.
  static const CpuInfo cpu = hostCpuInfo();
  if (cpu.bf16) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      node.describe(), ": bf16 kernels need a CPU with AVX512_BF16 (or AMX) instructions, and "
      "this one (", cpu.model, ") runs oneDNN at ISA ", cpu.isa,
      "; train in f32 (--precision f32) or on a CPU with bf16"));
}

memory::desc channelBlockedDesc(const ir::TensorType& t) {
  return memory::desc(dnnlDims(t), dnnlType(t.dtype), memory::format_tag::nChw16c);
}

memory::desc userDesc(const KernelInit& init, const ir::Value* v) {
  return init.isBlocked(v) ? channelBlockedDesc(v->type()) : plainDesc(v->type());
}

memory::desc anyDesc(const ir::TensorType& t) {
  return memory::desc(dnnlDims(t), dnnlType(t.dtype), memory::format_tag::any);
}

dnnl::primitive_attr userScratchpadAttr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

absl::Status dnnlFailure(const ir::Node& node, absl::string_view what, const dnnl::error& e) {
  return absl::InternalError(absl::StrCat(node.describe(), ": oneDNN could not create the ", what,
                                          ": ", e.what(), " (status ", static_cast<int>(e.status),
                                          ")"));
}

DnnlProgram::Slot DnnlProgram::addSlot(const memory::desc& md, Kind kind, size_t index) {
  slots_.push_back({memory(md, engine_, DNNL_MEMORY_NONE), kind, index});
  return slots_.size() - 1;
}

DnnlProgram::Slot DnnlProgram::temp(const memory::desc& md) {
  size_t offset = temp_bytes_;
  temp_bytes_ += (md.get_size() + kTempAlign - 1) / kTempAlign * kTempAlign;
  return addSlot(md, Kind::kTemp, offset);
}

DnnlProgram::Slot DnnlProgram::inputAs(Slot s, const memory::desc& md) {
  if (slots_[s].mem.get_desc() == md) return s;
  Slot t = temp(md);
  storeTo(s, t);
  return t;
}

DnnlProgram::Slot DnnlProgram::outputAs(Slot s, const memory::desc& md) {
  if (slots_[s].mem.get_desc() == md) return s;
  return temp(md);
}

void DnnlProgram::storeTo(Slot from, Slot to) {
  if (from == to) return;
  dnnl::reorder::primitive_desc pd(engine_, slots_[from].mem.get_desc(), engine_,
                                   slots_[to].mem.get_desc(), userScratchpadAttr());
  add(pd, dnnl::reorder(pd), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

void DnnlProgram::add(const dnnl::primitive_desc_base& pd, const dnnl::primitive& p,
                      const std::vector<std::pair<int, Slot>>& args) {
  Step step{p, {}};
  for (const auto& [arg, slot] : args) step.args.emplace(arg, slots_[slot].mem);
  memory::desc scratch = pd.scratchpad_desc();
  if (scratch.get_size() > 0) step.args.emplace(DNNL_ARG_SCRATCHPAD, slots_[temp(scratch)].mem);
  steps_.push_back(std::move(step));
  noteImpl(pd);
}

void DnnlProgram::noteImpl(const dnnl::primitive_desc_base& pd) {
  if (!impls_.empty()) impls_ += ", ";
  impls_ += pd.impl_info_str();
}

void DnnlProgram::run(absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
  char* arena = temp_bytes_ > 0 ? threadArena(temp_bytes_) : nullptr;
  for (const SlotInfo& slot : slots_) {
    void* p = slot.kind == Kind::kIn    ? in[slot.index].data
              : slot.kind == Kind::kOut ? out[slot.index].data
                                        : arena + slot.index;
    slot.mem.set_data_handle(p);
  }
  for (Step& step : steps_) step.prim.execute(stream_, step.args);
  stream_.wait();
}

bool ExactFallback::ranExact(absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
  for (size_t i : watched_)
    if (!allFinite(in[i])) {
      exact_.run(in, out);
      return true;
    }
  return false;
}

void ProgramKernel::compute(absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
  if (exact_ && exact_->ranExact(in, out)) return;
  program_.run(in, out);
}

}  // namespace tandem::backend::cpu
