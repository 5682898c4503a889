#pragma once

// The attributes of ONNX's sliding-window ops that shape rules divide or multiply by,
// checked before ONNX's shape inference runs: it divides by a zero stride (the process
// dies of SIGFPE) and turns negative strides, dilations, kernels and pads into negative
// sizes. One mechanism for every such op, in every graph of a model (If and Loop bodies
// included).

#include <string>

#include "absl/status/status.h"
#include "onnx/onnx_pb.h"

namespace tandem::onnx_import {

/// OK when every Conv, ConvTranspose, ConvInteger, QLinearConv, MaxPool, AveragePool,
/// LpPool and MaxUnpool node of `g` has strides, dilations, kernel_shape and group >= 1,
/// pads >= 0, and (pooling) no pad as wide as its dilated kernel, which would make a
/// window of padding only. Else one line: "`what`: node 'c' (Conv): attribute 'strides'
/// is [1,0]; every stride must be >= 1".
absl::Status checkWindowAttributes(const onnx::GraphProto& g, const std::string& what);

}  // namespace tandem::onnx_import
