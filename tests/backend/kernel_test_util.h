#pragma once

// One node under test: a module with a graph holding an input per operand and the node,
// host buffers for its operands and results, and a run through the CPU kernel table.

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/bf16.h"
#include "backend/cpu/kernels.h"
#include "gtest/gtest.h"
#include "ir/ir.h"
#include "tests/device_kinds.h"

namespace tandem::testing {

/// Host storage for one tensor (64-byte aligned like the runtime's arenas).
class Buffer {
 public:
  explicit Buffer(ir::TensorType type) : type_(std::move(type)) {
    size_t bytes = static_cast<size_t>(std::max<int64_t>(type_.bytes(), 1));
    storage_.reset(static_cast<char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
    std::memset(storage_.get(), 0, bytes);
  }
  const ir::TensorType& type() const { return type_; }
  int64_t size() const { return type_.numElements(); }
  float* f32() { return reinterpret_cast<float*>(storage_.get()); }
  int32_t* i32() { return reinterpret_cast<int32_t*>(storage_.get()); }
  backend::bf16* bf16() { return reinterpret_cast<backend::bf16*>(storage_.get()); }
  double* f64() { return reinterpret_cast<double*>(storage_.get()); }
  /// Element i as a double, whatever the float dtype (f32, bf16, f64) or i32.
  double at(int64_t i) {
    switch (type_.dtype) {
      case ir::DType::kF32:
        return f32()[i];
      case ir::DType::kBF16:
        return static_cast<float>(bf16()[i]);
      case ir::DType::kF64:
        return f64()[i];
      case ir::DType::kI32:
        return i32()[i];
      case ir::DType::kI64:
        return static_cast<double>(reinterpret_cast<int64_t*>(storage_.get())[i]);
    }
    return 0;
  }
  backend::TensorView view() { return {storage_.get(), type_}; }
  /// Uniform values in [lo, hi).
  void fillUniform(std::mt19937& rng, float lo = -1, float hi = 1) {
    std::uniform_real_distribution<float> d(lo, hi);
    for (int64_t i = 0; i < size(); ++i) f32()[i] = d(rng);
  }
  void fillInts(std::mt19937& rng, int lo, int hi) {
    std::uniform_int_distribution<int> d(lo, hi);
    for (int64_t i = 0; i < size(); ++i) i32()[i] = d(rng);
  }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  ir::TensorType type_;
  std::unique_ptr<char, Free> storage_;
};

inline ir::TensorType f32(ir::Shape shape) { return {ir::DType::kF32, std::move(shape)}; }
inline ir::TensorType bf16(ir::Shape shape) { return {ir::DType::kBF16, std::move(shape)}; }
inline ir::TensorType i32(ir::Shape shape) { return {ir::DType::kI32, std::move(shape)}; }

/// A single node with its operands as graph inputs, or variable reads, on cpu:0.
class SingleOp {
 public:
  using Attrs = std::vector<std::pair<std::string, ir::AttrValue>>;
  using KernelFactory = std::function<backend::cpu::KernelOr(const backend::cpu::KernelInit&)>;

  /// The node and its surroundings, by name.
  struct Spec {
    ir::Op op = ir::Op::kInput;
    std::vector<ir::TensorType> operands;
    Attrs attrs;
    /// Added to the module first (for initialize/assign, and to give a variable that
    /// `reads` names its role).
    std::vector<ir::Var> vars;
    /// The result types of ops with kDeclaredType (constant).
    std::vector<ir::TensorType> declared;
    /// Operand i -> the variable it is read from (a param node), as the updates and the
    /// running statistics written in place must be: one of `vars`, else a buffer of the
    /// operand's type. The buffers are the same either way.
    std::map<size_t, std::string> reads;
    /// The kernel; unset, the CPU kernel table's.
    KernelFactory factory;
    uint64_t seed = 1234;
  };

  /// `state`: the operands read from variables "state<i>" (Spec::reads).
  SingleOp(ir::Op op, const std::vector<ir::TensorType>& operand_types, Attrs attrs = {},
           std::vector<ir::Var> vars = {}, std::vector<ir::TensorType> declared = {},
           const std::vector<size_t>& state = {})
      : SingleOp(Spec{.op = op,
                      .operands = operand_types,
                      .attrs = std::move(attrs),
                      .vars = std::move(vars),
                      .declared = std::move(declared),
                      .reads = stateReads(state)}) {}

  explicit SingleOp(Spec spec)
      : module_("kernel_test"),
        ctx_(ir::Device{::tandem::testing::kind("cpu"), 0}, spec.seed),
        factory_(std::move(spec.factory)) {
    for (auto& v : spec.vars) EXPECT_TRUE(module_.addVar(std::move(v)).ok());
    ir::Graph* g = *module_.addGraph("t");
    ir::NodeSpec node;
    node.op = spec.op;
    node.attrs = std::move(spec.attrs);
    node.device = ctx_.device();
    node.declared_types = std::move(spec.declared);
    for (size_t i = 0; i < spec.operands.size(); ++i) {
      ir::NodeSpec in;
      in.device = ctx_.device();
      if (auto read = spec.reads.find(i); read != spec.reads.end()) {
        const std::string& var = read->second;
        if (module_.findVar(var) == nullptr) {
          EXPECT_TRUE(
              module_.addVar({var, spec.operands[i], ir::VarRole::kBuffer, ir::Initializer{}})
                  .ok());
        }
        in.op = ir::Op::kParam;
        in.attrs = {{"var", ir::Symbol{var}}};
      } else {
        in.op = ir::Op::kInput;
        in.names = {"in" + std::to_string(i)};
        in.declared_types = {spec.operands[i]};
      }
      auto n = g->create(std::move(in));
      EXPECT_TRUE(n.ok()) << n.status();
      if (!n.ok()) return;
      node.operands.push_back((*n)->result());
      inputs_.emplace_back(spec.operands[i]);
    }
    auto n = g->create(std::move(node));
    EXPECT_TRUE(n.ok()) << n.status();
    if (!n.ok()) return;
    node_ = *n;
    for (size_t i = 0; i < node_->numResults(); ++i) outputs_.emplace_back(node_->result(i)->type());
  }
  /// False when the node was refused (the constructor's failure says why): node() and
  /// run() must not be used then.
  bool built() const { return node_ != nullptr; }
  const ir::Node& node() const { return *node_; }
  Buffer& in(size_t i) { return inputs_[i]; }
  size_t numInputs() const { return inputs_.size(); }
  Buffer& out(size_t i = 0) { return outputs_[i]; }
  backend::cpu::CpuContext& ctx() { return ctx_; }

  /// Creates the kernel (once; Spec::factory's, or the kernel table's) and runs it over
  /// the buffers.
  void run() {
    ASSERT_NE(node_, nullptr);
    if (!kernel_) {
      auto k = factory_ ? factory_(backend::cpu::KernelInit{*node_, ctx_})
                        : backend::cpu::makeKernel(*node_, ctx_);
      ASSERT_TRUE(k.ok()) << k.status();
      kernel_ = std::move(*k);
    }
    std::vector<backend::TensorView> in, out;
    for (auto& b : inputs_) in.push_back(b.view());
    for (auto& b : outputs_) out.push_back(b.view());
    absl::Status s = kernel_->runHere(in, out);
    ASSERT_TRUE(s.ok()) << s;
  }

 private:
  static std::map<size_t, std::string> stateReads(const std::vector<size_t>& state) {
    std::map<size_t, std::string> reads;
    for (size_t i : state) reads[i] = "state" + std::to_string(i);
    return reads;
  }

  ir::Module module_;
  backend::cpu::CpuContext ctx_;
  KernelFactory factory_;
  ir::Node* node_ = nullptr;
  std::vector<Buffer> inputs_, outputs_;
  std::unique_ptr<backend::cpu::CpuKernel> kernel_;
};

/// Largest |a-b| / max(1, |b|) over two arrays (relative error with an absolute floor
/// for values near zero).
inline double maxRelativeError(const float* a, const double* b, int64_t n) {
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    double d = std::abs(double(a[i]) - b[i]) / std::max(1.0, std::abs(b[i]));
    worst = std::max(worst, d);
  }
  return worst;
}

/// Gives `low` (the node with some operands in bf16) the operands `ref` (the same node in
/// f32) holds: bf16 operands of `low` get ref's values rounded to bf16, and ref's own copy
/// is rounded to the same values, so both runs see identical inputs. Other operands are
/// copied byte for byte (state operands too: both runs start from the same state).
inline void shareInputs(SingleOp& ref, SingleOp& low) {
  for (size_t i = 0; i < ref.node().numOperands(); ++i) {
    Buffer &r = ref.in(i), &l = low.in(i);
    if (l.type().dtype == ir::DType::kBF16) {
      ASSERT_EQ(r.type().dtype, ir::DType::kF32) << "operand " << i;
      for (int64_t k = 0; k < r.size(); ++k) {
        l.bf16()[k] = r.f32()[k];
        r.f32()[k] = l.bf16()[k];
      }
    } else {
      ASSERT_EQ(r.type(), l.type()) << "operand " << i;
      std::memcpy(l.view().data, r.view().data, static_cast<size_t>(r.type().bytes()));
    }
  }
}

/// max |a - b| / max |b| over two buffers of one shape (b the f32 reference): the error
/// relative to the tensor's scale. Per element it would be meaningless where a sum of
/// products cancels to near zero, and bf16's 8-bit mantissa makes every product's error
/// relative to the product, not to the sum.
inline double scaledError(Buffer& a, Buffer& b) {
  double worst = 0, scale = 0;
  for (int64_t k = 0; k < b.size(); ++k) {
    worst = std::max(worst, std::abs(a.at(k) - b.at(k)));
    scale = std::max(scale, std::abs(b.at(k)));
  }
  return scale > 0 ? worst / scale : worst;
}

/// scaledError of result `r` of the bf16 node against the f32 one (state written in place
/// is in operand buffers: compare those with scaledError).
inline double resultRelativeError(SingleOp& ref, SingleOp& low, size_t r) {
  return scaledError(low.out(r), ref.out(r));
}

/// Runs both nodes on the same inputs (shareInputs) and expects every result of the bf16
/// one within `tol` of the f32 one (resultRelativeError).
inline void expectBf16NearF32(SingleOp& ref, SingleOp& low, double tol = 2e-2) {
  shareInputs(ref, low);
  ref.run();
  low.run();
  ASSERT_EQ(ref.node().numResults(), low.node().numResults());
  for (size_t r = 0; r < ref.node().numResults(); ++r)
    EXPECT_LE(resultRelativeError(ref, low, r), tol)
        << low.node().describe() << " result " << r << " against its f32 form";
}

}  // namespace tandem::testing
