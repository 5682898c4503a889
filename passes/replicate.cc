#include "passes/replicate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/number_format.h"
#include "ir/status_macros.h"
#include "ir/target.h"
#include "passes/naming.h"

namespace tandem::passes {

absl::StatusOr<std::vector<int64_t>> splitBatch(int64_t batch, size_t devices,
                                                const std::vector<double>& weights) {
  int64_t n = static_cast<int64_t>(devices);
  if (batch < n)
    return absl::InvalidArgumentError(absl::StrCat("batch ", batch,
                                                   " is smaller than the device count ", n,
                                                   ": every device needs at least one sample"));
  std::vector<int64_t> sizes(devices, batch / n);
  if (weights.empty()) {
    for (int64_t i = 0; i < batch % n; ++i) ++sizes[i];
    return sizes;
  }
  if (weights.size() != devices)
    return absl::InvalidArgumentError(
        absl::StrCat("weights has ", weights.size(), " entries for ", devices, " devices"));
  double largest = 0;
  for (double w : weights) {
    if (!(w > 0)) return absl::InvalidArgumentError("weights must all be > 0");
    if (!std::isfinite(w)) return absl::InvalidArgumentError("weights must all be finite");
    largest = std::max(largest, w);
  }
  // Relative to the largest weight, so that the total cannot overflow.
  double total = 0;
  for (double w : weights) total += w / largest;
  // Everyone gets one sample, the rest goes by weight with largest remainders rounding.
  int64_t rest = batch - n;
  std::vector<std::pair<double, size_t>> remainders;
  int64_t given = 0;
  for (size_t i = 0; i < devices; ++i) {
    double exact = rest * (weights[i] / largest) / total;
    int64_t whole = static_cast<int64_t>(std::floor(exact));
    sizes[i] = 1 + whole;
    given += whole;
    remainders.emplace_back(exact - whole, i);
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (int64_t i = 0; i < rest - given; ++i) ++sizes[remainders[i].second];
  return sizes;
}

namespace {

/// The batch size shared by a graph's inputs (axis 0), or 0 when it has none.
absl::StatusOr<int64_t> graphBatch(const ir::Graph& g) {
  int64_t batch = 0;
  const ir::Node* first = nullptr;
  for (const ir::Node* in : g.inputs()) {
    const ir::TensorType& t = in->result()->type();
    if (t.rank() == 0)
      return absl::InvalidArgumentError(
          absl::StrCat("replicate: input %", in->result()->name(), " of @", g.name(),
                       " is a scalar; batch inputs need a batch axis 0"));
    if (first != nullptr && t.shape[0] != batch)
      return absl::InvalidArgumentError(absl::StrCat(
          "replicate: inputs %", first->result()->name(), " and %", in->result()->name(), " of @",
          g.name(), " disagree on the batch size (", batch, " vs ", t.shape[0], ")"));
    first = in;
    batch = t.shape[0];
  }
  return batch;
}

// opgen requires this int attribute of every op with the sample_indexed trait.
constexpr absl::string_view kSampleOffset = "sample_offset";

/// Points a sample-indexed node's copy at its device's rows: its first operand is `part`
/// on the device and `whole` for the whole batch of `batch` samples, of which the device
/// holds `share` from sample `first` on. With the batch on axis 0 (k rows a sample: one,
/// or a sequence's tokens), the device's rows are rows [k * first, k * (first + share)) of
/// the whole tensor, and the copy computes exactly those rows of what one device would.
absl::Status setSampleOffset(ir::Node& copy, const ir::TensorType& whole, int64_t batch,
                             int64_t share, int64_t first) {
  const ir::TensorType& part = copy.operand(0)->type();
  if (part == whole) return absl::OkStatus();  // no batch flows through it: no offset
  const bool rows_scale =
      whole.rank() >= 1 && part.rank() == whole.rank() && batch > 0 &&
      whole.shape[0] % batch == 0 && part.shape[0] == whole.shape[0] / batch * share &&
      std::equal(part.shape.begin() + 1, part.shape.end(), whole.shape.begin() + 1);
  if (!rows_scale)
    return absl::InvalidArgumentError(absl::StrCat(
        copy.describe(), ": its operand is ", ir::toString(part), " here and ", ir::toString(whole),
        " for the whole batch of ", batch,
        "; a sample-indexed op needs the batch on axis 0 (rows in proportion to the device's "
        "share) to compute the rows one device would"));
  const int64_t offset = copy.intAttr(kSampleOffset) + first * (whole.shape[0] / batch);
  copy.setAttr(kSampleOffset, offset);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> Replicate::run(ir::Module& m) {
  if (m.isReplicated())
    return absl::FailedPreconditionError(
        absl::StrCat("replicate: the module is already replicated on ", ir::toString(m.devices())));
  m.setDevices(devices_);
  for (const auto& src : m.graphs()) {
    auto batch = graphBatch(*src);
    if (!batch.ok()) return batch.status();
    std::vector<int64_t> sizes(devices_.size(), 0);
    if (*batch > 0) {
      auto split = splitBatch(*batch, devices_.size(), weights_);
      if (!split.ok())
        return absl::Status(split.status().code(), absl::StrCat("replicate @", src->name(), ": ",
                                                                split.status().message()));
      sizes = *split;
    }
    std::vector<int64_t> firsts(devices_.size(), 0);  // each device's first sample
    for (size_t d = 1; d < devices_.size(); ++d) firsts[d] = firsts[d - 1] + sizes[d - 1];
    auto dst = std::make_unique<ir::Graph>(&m, src->name());
    // Node-major order (each node once per device, side by side) keeps a node's replicas
    // together, so a collective can sit right after the last replica it waits for.
    // Device 0 takes over the original node. A replica re-runs its shape rule only when
    // one of its operands changed type (the batch flows through it); the rest, such as
    // parameter reads and gradients of parameters, keep the source's types.
    size_t devices = devices_.size();
    // Every source value has a slot: replicas[slot * devices + d] is its replica on device d
    // (device 0's is the value itself, taken over) and slot_type[slot] its source type.
    // Slots are found through the id the taken-over node has in the new graph.
    std::vector<ir::Value*> replicas;
    replicas.reserve(src->numNodes() * devices);
    std::vector<ir::TensorType> slot_type;
    slot_type.reserve(src->numNodes());
    std::vector<size_t> first_slot;  // by node id in dst
    first_slot.reserve(src->numNodes() * devices);
    auto slotOf = [&](const ir::Value* v) { return first_slot[v->def()->id()] + v->index(); };
    std::vector<std::string> suffixes;
    for (size_t d = 0; d < devices; ++d) suffixes.push_back(absl::StrCat(".", d));
    dst->reserve(src->numNodes() * devices);
    std::vector<ir::Value*> src_outputs = src->outputs();
    std::vector<std::unique_ptr<ir::Node>> nodes = src->takeNodes();
    auto where = [&](const absl::Status& s, size_t d) {
      return absl::Status(s.code(), absl::StrCat("replicate @", src->name(), " on ",
                                                 ir::toString(devices_[d]), ": ", s.message()));
    };
    std::vector<ir::TensorType> result_types, slice;
    std::vector<size_t> operand_slots;
    for (auto& n : nodes) {
      bool is_input = n->op() == ir::Op::kInput;
      result_types.clear();
      for (size_t r = 0; r < n->numResults(); ++r) result_types.push_back(n->result(r)->type());
      operand_slots.clear();
      bool same_on_first = true;  // device 0: no operand changed type when taken over
      for (const ir::Value* v : n->operands()) {
        size_t slot = slotOf(v);
        operand_slots.push_back(slot);
        same_on_first = same_on_first && v->type() == slot_type[slot];
      }
      size_t first_result_slot = slot_type.size();
      slot_type.insert(slot_type.end(), result_types.begin(), result_types.end());
      replicas.resize(slot_type.size() * devices);
      for (size_t d = 1; d < devices; ++d) {
        std::vector<ir::Value*> operands;
        operands.reserve(n->numOperands());
        bool same = true;
        for (size_t slot : operand_slots) {
          ir::Value* replica = replicas[slot * devices + d];
          same = same && replica->type() == slot_type[slot];
          operands.push_back(replica);
        }
        if (is_input) {
          slice = result_types;
          slice[0].shape[0] = sizes[d];
        }
        auto copy = dst->createClone(*n, std::move(operands), devices_[d], suffixes[d],
                                     is_input ? &slice
                                     : same   ? &result_types
                                              : nullptr);
        if (!copy.ok()) return where(copy.status(), d);
        if ((*copy)->info().has(ir::kSampleIndexed))
          if (absl::Status s =
                  setSampleOffset(**copy, slot_type[operand_slots[0]], *batch, sizes[d], firsts[d]);
              !s.ok())
            return where(s, d);
        for (size_t r = 0; r < n->numResults(); ++r)
          replicas[(first_result_slot + r) * devices + d] = (*copy)->result(r);
      }
      for (size_t r = 0; r < n->numResults(); ++r)
        replicas[(first_result_slot + r) * devices] = n->result(r);
      if (is_input) {
        slice = result_types;
        slice[0].shape[0] = sizes[0];
      }
      auto self = dst->adoptRenamed(std::move(n), devices_[0], suffixes[0], !same_on_first,
                                    is_input ? &slice : nullptr, dst->numNodes() - (devices - 1));
      if (!self.ok()) return where(self.status(), 0);
      first_slot.resize(dst->idBound());
      first_slot[(*self)->id()] = first_result_slot;
    }
    std::vector<ir::Value*> outputs;
    for (size_t d = 0; d < devices; ++d)
      for (ir::Value* v : src_outputs) outputs.push_back(replicas[slotOf(v) * devices + d]);
    dst->setOutputs(std::move(outputs));
    m.replaceGraph(std::move(dst));
  }
  return true;
}

std::string Replicate::optionsText() const {
  std::string out = absl::StrCat(
      "{devices=[",
      absl::StrJoin(devices_, ",",
                    [](std::string* o, const ir::Device& d) { o->append(ir::toString(d)); }),
      "]");
  if (!weights_.empty())
    absl::StrAppend(&out, ",weights=[",
                    absl::StrJoin(weights_, ",",
                                  [](std::string* o, double w) { o->append(ir::formatDouble(w)); }),
                    "]");
  return out + "}";
}

absl::StatusOr<std::unique_ptr<Pass>> Replicate::create(PassOptions& opts) {
  auto text = opts.getString("devices", "");
  if (!text.ok()) return text.status();
  auto weights = opts.getDoubleList("weights");
  if (!weights.ok()) return weights.status();
  RETURN_IF_ERROR(opts.finish());
  if (text->empty())
    return absl::InvalidArgumentError(
        "pass replicate needs option 'devices' (a count such as devices=2, or a list such as "
        "devices=[cpu:0,cpu:1])");
  absl::string_view list = *text;
  absl::ConsumePrefix(&list, "[");
  absl::ConsumeSuffix(&list, "]");
  auto devices = ir::parseTargetDevices(list);
  if (!devices.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("pass replicate: option 'devices': ", devices.status().message()));
  if (!weights->empty() && weights->size() != devices->size())
    return absl::InvalidArgumentError(absl::StrCat("pass replicate: option 'weights' has ",
                                                   weights->size(), " entries for ",
                                                   devices->size(), " devices"));
  for (double w : *weights)
    if (!(w > 0) || !std::isfinite(w))
      return absl::InvalidArgumentError(
          "pass replicate: option 'weights' must all be finite and > 0");
  return std::unique_ptr<Pass>(new Replicate(*std::move(devices), *std::move(weights)));
}

}  // namespace tandem::passes
