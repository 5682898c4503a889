#include "frontend/onnx/window_attributes.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/onnx/graph_index.h"
#include "ir/status_macros.h"

namespace tandem::onnx_import {
namespace {

bool isOneOf(const onnx::NodeProto& n, std::initializer_list<const char*> ops) {
  if (!n.domain().empty() && n.domain() != "ai.onnx") return false;
  return std::any_of(ops.begin(), ops.end(), [&](const char* op) { return n.op_type() == op; });
}

const onnx::AttributeProto* find(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

std::vector<int64_t> intsOf(const onnx::AttributeProto* a) {
  if (a == nullptr) return {};
  if (a->type() == onnx::AttributeProto::INT) return {a->i()};
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::string listText(const std::vector<int64_t>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ","), "]");
}

absl::Status checkNode(const onnx::NodeProto& n, int index, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", describeNode(n, index), ": ", why));
  };
  // Attributes that are counts or steps: every entry at least 1.
  struct AtLeastOne {
    const char* attr;
    const char* noun;
  };
  for (const AtLeastOne& a :
       {AtLeastOne{"strides", "stride"}, AtLeastOne{"dilations", "dilation"},
        AtLeastOne{"kernel_shape", "kernel size"}, AtLeastOne{"group", "group count"}}) {
    const onnx::AttributeProto* attr = find(n, a.attr);
    const std::vector<int64_t> v = intsOf(attr);
    if (std::any_of(v.begin(), v.end(), [](int64_t x) { return x < 1; }))
      return bad(
          absl::StrCat("attribute '", a.attr, "' is ",
                       attr->type() == onnx::AttributeProto::INT ? absl::StrCat(v[0]) : listText(v),
                       "; every ", a.noun, " must be >= 1"));
  }
  const std::vector<int64_t> pads = intsOf(find(n, "pads"));
  if (std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p < 0; }))
    return bad(absl::StrCat("attribute 'pads' is ", listText(pads), "; every pad must be >= 0"));
  // A pooling window that lies wholly in the padding has no element to take the maximum
  // or mean of: each pad must be less than the window's extent on its axis.
  const std::vector<int64_t> kernel = intsOf(find(n, "kernel_shape"));
  if (isOneOf(n, {"MaxPool", "AveragePool", "LpPool"}) && !kernel.empty() &&
      pads.size() == 2 * kernel.size()) {
    std::vector<int64_t> dilations = intsOf(find(n, "dilations"));
    if (dilations.size() != kernel.size()) dilations.assign(kernel.size(), 1);
    for (size_t a = 0; a < kernel.size(); ++a) {
      const int64_t extent = (kernel[a] - 1) * dilations[a] + 1;
      if (pads[a] >= extent || pads[a + kernel.size()] >= extent)
        return bad(absl::StrCat("attribute 'pads' is ", listText(pads), " with kernel_shape ",
                                listText(kernel),
                                "; a window would hold padding only (each pad must be less than "
                                "the window's extent, ",
                                extent, " on axis ", a, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status checkWindowAttributes(const onnx::GraphProto& g, const std::string& what) {
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (isOneOf(n, {"Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "MaxPool", "AveragePool",
                    "LpPool", "MaxUnpool"}))
      RETURN_IF_ERROR(checkNode(n, i, what));
    // The bodies of If, Loop and Scan: shape inference runs over them too.
    for (const auto& a : n.attribute()) {
      if (a.has_g()) RETURN_IF_ERROR(checkWindowAttributes(a.g(), what));
      for (const auto& sub : a.graphs()) RETURN_IF_ERROR(checkWindowAttributes(sub, what));
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::onnx_import
