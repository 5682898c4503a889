#include "sim/roofline.h"

#include <algorithm>

namespace tandem::sim {
namespace {

double elements(const ir::Value* v) { return static_cast<double>(v->type().numElements()); }

// The operand named like the op's schema names it ("w", "dy"), or nullptr.
const ir::Value* operandNamed(const ir::Node& n, size_t index) {
  return index < n.numOperands() ? n.operand(index) : nullptr;
}

}  // namespace

NodeWork nodeWork(const ir::Node& n) {
  NodeWork w;
  using ir::Op;
  switch (n.op()) {
    case Op::kInput:
    case Op::kParam:
    case Op::kConstant:
      return w;
    default:
      break;
  }
  for (const ir::Value* v : n.operands()) {
    w.bytes += static_cast<double>(v->type().bytes());
    w.low_precision = w.low_precision || v->type().dtype == ir::DType::kBF16;
  }
  double result_elements = 0;
  for (size_t i = 0; i < n.numResults(); ++i) {
    w.bytes += static_cast<double>(n.result(i)->type().bytes());
    result_elements += elements(n.result(i));
  }
  // GEMM-like passes: (output elements) x (filter elements per output channel) x 2, where
  // "output" is the forward output: the result of a forward pass, dy of a backward one.
  const ir::Value* filter = nullptr;
  const ir::Value* out = nullptr;
  switch (n.op()) {
    case Op::kConv2d:
    case Op::kConv2dStats:
    case Op::kConv2dBiasAct:
    case Op::kLinear:
      filter = operandNamed(n, 1), out = n.result(0);
      break;
    case Op::kConv2dBackwardData:
    case Op::kLinearBackwardData:
      filter = operandNamed(n, 1), out = operandNamed(n, 0);
      break;
    case Op::kConv2dBackwardFilter:
      filter = operandNamed(n, 2), out = operandNamed(n, 0);
      break;
    case Op::kLinearBackwardWeight:  // dy[N,O], x[N,I]: 2 N O I
      w.flops = 2 * elements(operandNamed(n, 0)) *
                static_cast<double>(operandNamed(n, 1)->type().shape.back());
      return w;
    default:
      w.flops = result_elements;
      return w;
  }
  const double per_output = elements(filter) / static_cast<double>(filter->type().shape[0]);
  w.flops = 2 * elements(out) * per_output;
  return w;
}

double rooflineSeconds(const NodeWork& w, const GpuSpec& gpu) {
  const double peak = w.low_precision ? gpu.bf16_flops : gpu.f32_flops;
  return std::max(w.flops / peak, w.bytes / gpu.mem_bytes_per_s);
}

double collectiveBytesPerDevice(const ir::Node& n) {
  double total = 0;
  for (const ir::Value* v : n.operands()) total += static_cast<double>(v->type().bytes());
  const size_t devices = n.info().has(ir::kCollective) && n.op() != ir::Op::kSplit
                             ? std::max<size_t>(1, n.devicesAttr().size())
                             : 1;
  return total / static_cast<double>(devices);
}

}  // namespace tandem::sim
