#include "runtime/predictor.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/predict_graph.h"
#include "ir/status_macros.h"
#include "runtime/data/integer_width_source.h"

namespace tandem::runtime {

absl::StatusOr<std::unique_ptr<Predictor>> Predictor::create(std::unique_ptr<ir::Module> compiled,
                                                             std::vector<std::string> outputs,
                                                             ExecutorOptions options) {
  const ir::Graph* g = compiled->graph(ir::kPredictGraph);
  if (g == nullptr || !compiled->isReplicated())
    return absl::InvalidArgumentError(
        absl::StrCat("module ", compiled->name(), " has no compiled @", ir::kPredictGraph));
  for (const ir::Device& d : compiled->devices())
    if (d.rank != 0)
      return absl::InvalidArgumentError(absl::StrCat(
          "prediction runs in one process; ", ir::toString(d), " is another process's device"));
  const size_t devices = compiled->devices().size();
  if (outputs.empty() || g->outputs().size() != outputs.size() * devices)
    return absl::InvalidArgumentError(
        absl::StrCat("module ", compiled->name(), ": @", ir::kPredictGraph, " returns ",
                     g->outputs().size(), " values, not the outputs (",
                     absl::StrJoin(outputs, ", "), ") of each of its ", devices, " devices"));
  auto p = std::unique_ptr<Predictor>(new Predictor());
  p->outputs_ = std::move(outputs);
  for (const ir::Node* in : g->inputs()) p->input_types_.push_back(in->result()->type());
  p->batch_ = p->input_types_.front().shape[0];
  ASSIGN_OR_RETURN(p->executor_, Executor::create(std::move(compiled), options));
  return p;
}

absl::Status Predictor::setVariable(const std::string& name, const HostTensor& value) {
  for (size_t d = 0; d < executor_->module().devices().size(); ++d)
    RETURN_IF_ERROR(executor_->writeVariable(name, d, value));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<HostTensor>> Predictor::run(absl::Span<const HostTensor> inputs) {
  if (inputs.size() != input_types_.size())
    return absl::InvalidArgumentError(
        absl::StrCat("@", ir::kPredictGraph, " of ", executor_->module().name(), " takes ",
                     input_types_.size(), " inputs, not ", inputs.size()));
  std::vector<backend::TensorView> views;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].type != input_types_[i])
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " of @", ir::kPredictGraph,
                                                     " is ", ir::toString(input_types_[i]),
                                                     ", not ", ir::toString(inputs[i].type)));
    views.push_back(inputs[i].view());
  }
  return executor_->run(ir::kPredictGraph, views);
}

absl::Status Predictor::checkData(const data::ExampleSource& d, const std::string& what) const {
  const std::string where = what.empty() ? d.where() : what;
  const std::string& model = executor_->module().name();
  const std::vector<data::Field>& fields = d.fields();
  for (const ir::Node* in : executor_->module().graph(ir::kPredictGraph)->inputs()) {
    const ir::Value& input = *in->result();
    ir::TensorType example = input.type();
    example.shape.erase(example.shape.begin());
    const auto field = std::find_if(fields.begin(), fields.end(),
                                    [&](const data::Field& f) { return f.name == input.name(); });
    if (field == fields.end())
      return absl::InvalidArgumentError(absl::StrCat(
          where, " holds ",
          absl::StrJoin(fields, ", ",
                        [](std::string* out, const data::Field& f) { out->append(f.text()); }),
          ", but ", model, " predicts from ", input.name(), ": ", ir::toString(example),
          ", which none of them is"));
    if (field->dtype != example.dtype || !std::equal(field->shape.begin(), field->shape.end(),
                                                     example.shape.begin(), example.shape.end()))
      return absl::InvalidArgumentError(absl::StrCat(where, " holds examples of ", field->text(),
                                                     ", but ", model, " predicts from ",
                                                     input.name(), ": ", ir::toString(example)));
  }
  if (d.size() == 0)
    return absl::InvalidArgumentError(
        absl::StrCat(where, " holds no examples: nothing to predict"));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PredictedOutput>> Predictor::predict(const data::ExampleSource& given,
                                                                const BatchCallback& on_batch) {
  const ir::Graph& g = *executor_->module().graph(ir::kPredictGraph);
  // The given source at the inputs' integer widths (an i64 input from an i32 field).
  std::unique_ptr<data::IntegerWidthSource> view;
  const data::ExampleSource& data = data::sourceForInputs(given, g, view);
  RETURN_IF_ERROR(checkData(data));
  // Which field feeds each input (checked above).
  std::vector<size_t> fields;
  for (const ir::Node* in : g.inputs())
    for (size_t f = 0; f < data.fields().size(); ++f)
      if (data.fields()[f].name == in->result()->name()) fields.push_back(f);
  // Device d computes rows [offset[d], offset[d] + rows[d]) of every batch (the verifier
  // holds each output to its device's rows).
  const size_t k = outputs_.size();
  const size_t devices = g.outputs().size() / k;
  std::vector<int64_t> rows(devices), offset(devices);
  for (size_t d = 0; d < devices; ++d) {
    rows[d] = g.outputs()[d * k]->type().shape[0];
    offset[d] = d == 0 ? 0 : offset[d - 1] + rows[d - 1];
  }
  const int64_t count = data.size();
  std::vector<PredictedOutput> out;
  std::vector<int64_t> row_bytes;
  for (size_t j = 0; j < k; ++j) {
    ir::TensorType type = g.outputs()[j]->type();
    row_bytes.push_back(type.bytes() / type.shape[0]);
    type.shape[0] = count;
    out.push_back({outputs_[j], HostTensor(type)});
  }
  data::BatchLoader loader(data, batch_, /*shuffle=*/false, /*seed=*/0, /*drop_last=*/false);
  loader.startEpoch(0);
  const int64_t batches = loader.batchesPerEpoch();
  const auto hand_over = [&](const data::Batch& b) {
    std::vector<backend::TensorView> in;
    for (size_t i = 0; i < fields.size(); ++i)
      in.push_back({const_cast<void*>(b.fields[fields[i]]), input_types_[i]});
    return executor_->prefetch(ir::kPredictGraph, in);
  };
  std::optional<data::Batch> batch = loader.next();
  if (batch) RETURN_IF_ERROR(hand_over(*batch));
  while (batch) {
    RETURN_IF_ERROR(executor_->launch(ir::kPredictGraph));
    const int64_t first = batch->index * batch_;
    const bool go_on = !on_batch || on_batch(*batch, batches);
    batch = go_on ? loader.next() : std::nullopt;
    const absl::Status handed = batch ? hand_over(*batch) : absl::OkStatus();
    absl::StatusOr<std::vector<HostTensor>> step = executor_->wait();
    if (!step.ok()) return step.status();
    RETURN_IF_ERROR(handed);
    // Each device's rows in device order; the padding of the last batch is left out.
    for (size_t d = 0; d < devices; ++d) {
      const int64_t at = first + offset[d];
      const int64_t take = std::min(rows[d], count - at);
      if (take <= 0) continue;
      for (size_t j = 0; j < k; ++j)
        std::memcpy(out[j].value.buffer.data() + at * row_bytes[j],
                    (*step)[d * k + j].buffer.data(), static_cast<size_t>(take * row_bytes[j]));
    }
    if (!go_on) {
      // Stopped: the outputs hold the examples predicted so far.
      for (PredictedOutput& o : out) o.value.type.shape[0] = std::min(count, first + batch_);
      break;
    }
  }
  RETURN_IF_ERROR(loader.status());
  return out;
}

}  // namespace tandem::runtime
