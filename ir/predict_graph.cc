#include "ir/predict_graph.h"

#include "absl/strings/str_cat.h"
#include "ir/op_views.h"
#include "ir/placement.h"

namespace tandem::ir {
namespace {

absl::Status predictError(const Graph& g, absl::string_view msg) {
  return absl::FailedPreconditionError(absl::StrCat("graph @", g.name(), ": ", msg));
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> rowsPerDevice(const Graph& g) {
  const std::vector<Node*> inputs = g.inputs();
  if (inputs.empty())
    return predictError(g, "reads no input; a prediction's rows are its inputs' examples");
  const Module& m = *g.module();
  const Value* first = inputs[0]->result();
  if (first->type().rank() == 0)
    return predictError(g, absl::StrCat("input %", first->name(), " is a scalar, not a batch"));
  if (!m.isReplicated()) return std::vector<int64_t>{first->type().shape[0]};
  // After replicate each device has its inputs; after insert-collectives one host input
  // per model input, split across the devices.
  if (inputs[0]->device()) {
    std::vector<int64_t> rows(m.devices().size(), -1);
    for (const Node* in : inputs) {
      const std::optional<size_t> d = in->device() ? m.deviceIndex(*in->device()) : std::nullopt;
      if (!d || in->result()->type().rank() == 0)
        return predictError(
            g, absl::StrCat("input %", in->result()->name(), " is not a batch on a module device"));
      if (rows[*d] < 0) rows[*d] = in->result()->type().shape[0];
    }
    for (size_t d = 0; d < rows.size(); ++d)
      if (rows[d] < 0)
        return predictError(g, absl::StrCat(toString(m.devices()[d]), " has no input"));
    return rows;
  }
  for (const auto& n : g.nodes())
    if (SplitView::is(*n) && SplitView(*n).x() == first) return SplitView(*n).sizes();
  return predictError(g, absl::StrCat("input %", first->name(),
                                      " is neither on a device nor split across the devices"));
}

absl::Status verifyPredictGraph(const Graph& g) {
  absl::StatusOr<std::vector<int64_t>> rows = rowsPerDevice(g);
  if (!rows.ok()) return rows.status();
  const Module& m = *g.module();
  const std::vector<Value*>& outs = g.outputs();
  const size_t devices = rows->size();
  if (outs.empty() || outs.size() % devices != 0)
    return predictError(g, absl::StrCat("returns ", outs.size(), " values; a prediction returns ",
                                        "its outputs once per device (", devices, " device",
                                        devices == 1 ? "" : "s", ")"));
  const size_t k = outs.size() / devices;
  for (size_t d = 0; d < devices; ++d)
    for (size_t j = 0; j < k; ++j) {
      const Value& v = *outs[d * k + j];
      const Node& def = *v.def();
      if (def.info().has(kCollective))
        return predictError(
            g, absl::StrCat("returns %", v.name(), " from a collective, ", def.describe(),
                            "; a prediction's rows stay on the devices that computed them, "
                            "each example's own"));
      if (m.isReplicated()) {
        const std::optional<size_t> at = deviceIndexOfValue(m, v);
        if (at != d)
          return predictError(
              g, absl::StrCat("returns %", v.name(), " as output ", j, " of ",
                              toString(m.devices()[d]), ", but it lives on ",
                              at ? toString(m.devices()[*at]) : std::string("no module device")));
      }
      const TensorType& type = v.type();
      if (type.rank() == 0 || type.shape[0] != (*rows)[d])
        return predictError(
            g, absl::StrCat("returns %", v.name(), ": ", toString(type),
                            "; an output holds one row per example, so its first axis must be ",
                            m.isReplicated() ? absl::StrCat(toString(m.devices()[d]), "'s rows, ")
                                             : std::string("the batch, "),
                            (*rows)[d]));
      TensorType want = outs[j]->type(), got = type;
      want.shape[0] = got.shape[0] = 0;
      if (got != want)
        return predictError(g, absl::StrCat("returns %", v.name(), ": ", toString(type), ", but %",
                                            outs[j]->name(), " of the first device is ",
                                            toString(outs[j]->type()), " beyond the batch axis"));
    }
  return absl::OkStatus();
}

}  // namespace tandem::ir
