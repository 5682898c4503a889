#pragma once

// A graph of input nodes and ops on cpu:0, evaluated node by node by the CPU kernels; and
// an op's gradient rule applied to one node with a given result gradient. Tests of ops
// whose gradient is other ops (matmul's is matmul, reshape and transpose) run the rule's
// nodes the same way, against PyTorch's autograd and finite differences.

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "ir/grad.h"
#include "ir/op_views.h"
#include "kernel_test_util.h"

namespace tandem::testing {

/// A graph of input nodes and ops on cpu:0, evaluated in order by the CPU kernels.
class GraphEval {
 public:
  GraphEval() : module_("eval"), ctx_(ir::Device{kind("cpu"), 0}, /*seed=*/1) {
    graph_ = *module_.addGraph("g");
  }

  ir::Value* input(const std::string& name, const ir::TensorType& t) {
    auto n = graph_->create(ir::NodeSpec{
        .op = ir::Op::kInput, .device = ctx_.device(), .names = {name}, .declared_types = {t}});
    EXPECT_TRUE(n.ok()) << n.status();
    return (*n)->result();
  }
  /// A read of variable `var` (declared on the first read); the test fills its buffer.
  ir::Value* variable(const ir::Var& var) {
    if (module_.findVar(var.name) == nullptr) {
      EXPECT_TRUE(module_.addVar(var).ok());
    }
    auto n = graph_->create(
        ir::ParamArgs{.var = var.name}.spec({.device = ctx_.device(), .names = {var.name}}));
    EXPECT_TRUE(n.ok()) << n.status();
    return (*n)->result();
  }
  absl::StatusOr<ir::Node*> add(ir::NodeSpec spec) {
    spec.device = ctx_.device();
    return graph_->create(std::move(spec));
  }
  /// Runs `n`'s gradient rule with `dc` as its result 0's gradient (the others none);
  /// the operands' gradients. `needs`: which operands lead back to a trained weight
  /// (GradContext::needsGrad); empty: all of them.
  std::vector<ir::Value*> grad(const ir::Node& n, ir::Value* dc, std::vector<bool> needs = {}) {
    struct Context final : ir::GradContext {
      GraphEval* eval;
      const ir::Node* fwd;
      ir::Value* dc;
      std::vector<ir::Value*> grads;
      const ir::Node& node() const override { return *fwd; }
      ir::Value* resultGrad(size_t i) const override { return i == 0 ? dc : nullptr; }
      std::vector<bool> needs;
      bool needsGrad(size_t i) const override { return needs.empty() || needs.at(i); }
      void addOperandGrad(size_t i, ir::Value* g) override { grads[i] = g; }
      absl::StatusOr<ir::Node*> emit(ir::NodeSpec spec) override {
        return eval->add(std::move(spec));
      }
    } c;
    c.eval = this, c.fwd = &n, c.dc = dc, c.grads.assign(n.numOperands(), nullptr);
    c.needs = std::move(needs);
    absl::Status s = n.info().rules->grad(c);
    EXPECT_TRUE(s.ok()) << s;
    return c.grads;
  }
  Buffer& buffer(const ir::Value* v) {
    auto it = buffers_.find(v);
    if (it == buffers_.end()) it = buffers_.emplace(v, std::make_unique<Buffer>(v->type())).first;
    return *it->second;
  }
  /// Runs every node but the inputs and variable reads, in order.
  void run() {
    for (const auto& n : graph_->nodes()) {
      if (ir::isSource(n->op())) continue;
      auto k = backend::cpu::makeKernel(*n, ctx_);
      ASSERT_TRUE(k.ok()) << k.status();
      std::vector<backend::TensorView> in, out;
      for (const ir::Value* v : n->operands()) in.push_back(buffer(v).view());
      for (size_t r = 0; r < n->numResults(); ++r) out.push_back(buffer(n->result(r)).view());
      absl::Status s = (*k)->runHere(in, out);
      ASSERT_TRUE(s.ok()) << s;
    }
  }
  ir::Graph& graph() { return *graph_; }

 private:
  ir::Module module_;
  backend::cpu::CpuContext ctx_;
  ir::Graph* graph_ = nullptr;
  std::map<const ir::Value*, std::unique_ptr<Buffer>> buffers_;
};

inline ir::TensorType f32Of(const std::vector<int64_t>& shape) {
  return ir::TensorType{ir::DType::kF32, ir::Shape(shape.begin(), shape.end())};
}

inline void fillFrom(Buffer& b, const std::vector<double>& v) {
  ASSERT_EQ(b.size(), static_cast<int64_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) b.f32()[i] = static_cast<float>(v[i]);
}

inline std::vector<float> valuesOf(Buffer& b) { return {b.f32(), b.f32() + b.size()}; }

}  // namespace tandem::testing
