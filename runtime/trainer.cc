#include "runtime/trainer.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "backend/processes.h"
#include "ir/interfaces.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"

namespace tandem::runtime {
namespace {

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// "1x28x28"
std::string shapeText(absl::Span<const int64_t> shape) { return absl::StrJoin(shape, "x"); }

// The class count of graph `g`'s logits (the loss's or the accuracy's first operand), or
// 0 when it has neither.
int64_t classesOf(const ir::Graph& g) {
  for (const auto& n : g.nodes())
    if ((n->op() == ir::Op::kSoftmaxCrossEntropy || n->op() == ir::Op::kAccuracy) &&
        n->operand(0)->type().rank() == 2)
      return n->operand(0)->type().shape[1];
  return 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::create(std::unique_ptr<ir::Module> compiled,
                                                         std::vector<std::string> metrics,
                                                         ExecutorOptions options) {
  const ir::Graph* train = compiled->graph(ir::kTrainGraph);
  for (absl::string_view name : {ir::kTrainGraph, ir::kEvalGraph}) {
    const ir::Graph* g = compiled->graph(name);
    if (g == nullptr || g->inputs().empty() || g->outputs().size() != metrics.size() + 1)
      return absl::InvalidArgumentError(absl::StrCat(
          "module ", compiled->name(), ": @", name, " must take the model's inputs and return ",
          "the loss and ", metrics.size(), " metric", metrics.size() == 1 ? "" : "s", " (",
          absl::StrJoin(metrics, ", "), ")"));
    if (g->inputs().size() != train->inputs().size())
      return absl::InvalidArgumentError(absl::StrCat("module ", compiled->name(), ": @", name,
                                                     " and @", ir::kTrainGraph,
                                                     " take other inputs"));
  }
  auto trainer = std::unique_ptr<Trainer>(new Trainer());
  trainer->metrics_ = std::move(metrics);
  for (size_t k = 0; k < trainer->metrics_.size(); ++k)
    if (trainer->metrics_[k] == "accuracy") trainer->accuracy_ = static_cast<int>(k);
  auto ex = Executor::create(std::move(compiled), options);
  if (!ex.ok()) return ex.status();
  trainer->executor_ = std::move(*ex);
  trainer->options_ = options;
  trainer->readSignature();
  return trainer;
}

void Trainer::readSignature() {
  input_types_.clear();
  for (const ir::Node* in : executor_->module().graph(ir::kTrainGraph)->inputs())
    input_types_.push_back(in->result()->type());
  batch_ = input_types_.front().shape.empty() ? 0 : input_types_.front().shape[0];
}

absl::Status Trainer::replaceModule(std::unique_ptr<ir::Module> compiled) {
  const ir::Module& old = executor_->module();
  if (compiled->devices() != old.devices())
    return absl::InvalidArgumentError(absl::StrCat("the new module runs on ",
                                                   ir::toString(compiled->devices()), ", not ",
                                                   ir::toString(old.devices())));
  for (const ir::Var& v : old.vars()) {
    const ir::Var* mine = compiled->findVar(v.name);
    if (mine == nullptr || !(mine->type == v.type))
      return absl::InvalidArgumentError(
          absl::StrCat("the new module has no variable @", v.name, " of ", ir::toString(v.type)));
  }
  ExecutorOptions options = options_;
  options.trace = executor_->tracing();
  auto ex = Executor::create(std::move(compiled), options);
  if (!ex.ok()) return ex.status();
  for (const ir::Var& v : old.vars())
    for (size_t d = 0; d < old.devices().size(); ++d) {
      auto value = executor_->readVariable(v.name, d);
      if (!value.ok()) return value.status();
      if (absl::Status s = (*ex)->writeVariable(v.name, d, *value); !s.ok()) return s;
    }
  if (hook_) (*ex)->setBeforeNodeHook(hook_);
  executor_ = std::move(*ex);
  readSignature();
  return absl::OkStatus();
}

void Trainer::setBeforeNodeHook(std::function<void(const ir::Node&, size_t)> hook) {
  hook_ = hook;
  executor_->setBeforeNodeHook(std::move(hook));
}

absl::StatusOr<std::pair<int64_t, int64_t>> Trainer::rowsOfThisProcess(
    absl::string_view name) const {
  const ir::Module& m = executor_->module();
  const ir::Graph* g = m.graph(name);
  const int rank = backend::Processes::current().rank();
  const int64_t batch = g->inputs()[0]->result()->type().shape[0];
  for (const auto& n : g->nodes()) {
    if (!ir::SplitView::is(*n) || ir::SplitView(*n).x() != g->inputs()[0]->result()) continue;
    const ir::SplitView split(*n);
    const auto& sizes = split.sizes();
    const auto& devices = split.devices();
    int64_t at = 0, first = -1, end = -1;
    for (size_t k = 0; k < devices.size(); ++k) {
      if (devices[k].rank == rank) {
        if (first < 0) first = at;
        if (end >= 0 && end != at)
          return absl::FailedPreconditionError(absl::StrCat(
              "@", name, ": the batch rows of rank ", rank, " are not contiguous in ",
              n->describe()));
        end = at + sizes[k];
      }
      at += sizes[k];
    }
    if (first < 0)
      return absl::FailedPreconditionError(
          absl::StrCat("@", name, ": rank ", rank, " has no device in ", n->describe()));
    return std::make_pair(first, end);
  }
  return std::make_pair(int64_t{0}, batch);  // one device: no split
}

absl::Status Trainer::checkData(const data::BatchLoader& loader, absl::string_view name) const {
  const data::ExampleSource& d = loader.data();
  const ir::Graph* g = executor_->module().graph(name);
  const std::string model = executor_->module().name();
  if (g == nullptr)
    return absl::InvalidArgumentError(absl::StrCat("module ", model, " has no @", name));
  const std::string purpose = name == ir::kTrainGraph ? "train on" : "evaluate";
  if (d.size() == 0)
    return absl::InvalidArgumentError(
        absl::StrCat(d.where(), " holds no examples: nothing to ", purpose));
  const std::vector<data::Field>& fields = d.fields();
  for (const ir::Node* in : g->inputs()) {
    const ir::Value& input = *in->result();
    const ir::TensorType& type = input.type();
    const auto field = std::find_if(fields.begin(), fields.end(),
                                    [&](const data::Field& f) { return f.name == input.name(); });
    if (field == fields.end())
      return absl::InvalidArgumentError(absl::StrCat(
          d.where(), " holds ",
          absl::StrJoin(fields, ", ",
                        [](std::string* out, const data::Field& f) { out->append(f.text()); }),
          ", but ", model, " takes input %", input.name(), " (@", name, "'s ", ir::toString(type),
          "), which none of them feeds"));
    // Every dimension of an example against the module's input, less the batch axis.
    const ir::Shape& shape = type.shape;
    if (shape.size() != field->shape.size() + 1 ||
        !std::equal(field->shape.begin(), field->shape.end(), shape.begin() + 1) ||
        type.dtype != field->dtype) {
      if (field->name == "x" && field->dtype == ir::DType::kF32)  // a classifier's images
        return absl::InvalidArgumentError(absl::StrCat(
            d.where(), " holds ", d.size(), " images of ", shapeText(field->shape), ", but ", model,
            " takes images of ",
            shapeText(absl::MakeConstSpan(shape).subspan(std::min<size_t>(1, shape.size()))), " (@",
            name, "'s input %", input.name(), ": ", ir::toString(type), ")"));
      return absl::InvalidArgumentError(absl::StrCat(
          d.where(), " holds examples of ", field->text(), ", but ", model, " takes %",
          input.name(), ": ", ir::toString(type), " (@", name, "'s input, batch first)"));
    }
    if (shape[0] != loader.batch())
      return absl::InvalidArgumentError(
          absl::StrCat("batches of ", loader.batch(), " examples from ", d.where(), ", but @", name,
                       " of ", model, " takes %", input.name(), ": ", ir::toString(type)));
  }
  // Padding rows count for nothing only where labels mark them (-1); in a model without
  // class labels they would count in the sums.
  if (!loader.dropsLast() && d.classLabels().first.empty() && d.size() % loader.batch() != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        d.where(), " holds ", d.size(), " examples, not a multiple of the batch ", loader.batch(),
        ": to ", purpose, " them, ", model,
        " would count the padding of the last batch, having no class labels to mark it; give a "
        "batch that divides ",
        d.size()));
  if (const int64_t classes = classesOf(*g); classes > 0 && d.classLabels().second > classes)
    return absl::InvalidArgumentError(
        absl::StrCat(d.where(), " holds labels of ", d.classLabels().second, " classes, but ",
                     model, " tells apart ", classes, " (its logits in @", name, ")"));
  return absl::OkStatus();
}

std::vector<size_t> Trainer::fieldsOfInputs(const data::BatchLoader& loader,
                                            absl::string_view name) const {
  const std::vector<data::Field>& fields = loader.data().fields();
  std::vector<size_t> out;
  for (const ir::Node* in : executor_->module().graph(name)->inputs())
    for (size_t f = 0; f < fields.size(); ++f)
      if (fields[f].name == in->result()->name()) out.push_back(f);
  return out;
}

absl::Status Trainer::handOver(absl::string_view name, const data::Batch& b,
                               const std::vector<size_t>& fields) {
  std::vector<backend::TensorView> in;
  in.reserve(fields.size());
  for (size_t k = 0; k < fields.size(); ++k)
    in.push_back({const_cast<void*>(b.fields[fields[k]]), input_types_[k]});
  return executor_->prefetch(name, in);
}

void Trainer::finish(PassResult& r, double loss_sum, const std::vector<double>& metric_sums) const {
  r.metrics.clear();
  for (size_t k = 0; k < metrics_.size(); ++k)
    r.metrics.push_back(
        {.name = metrics_[k], .value = r.examples == 0 ? 0 : metric_sums[k] / double(r.examples)});
  if (r.examples == 0) return;
  r.loss = loss_sum / static_cast<double>(r.examples);
  if (accuracy_ >= 0) r.accuracy = r.metrics[static_cast<size_t>(accuracy_)].value;
}

absl::Status Trainer::writeOnThisProcess(const std::string& name, const HostTensor& value) {
  const ir::Module& m = executor_->module();
  for (size_t d = 0; d < m.devices().size(); ++d)
    if (m.devices()[d].rank == backend::Processes::current().rank())
      RETURN_IF_ERROR(executor_->writeVariable(name, d, value));
  return absl::OkStatus();
}

absl::Status Trainer::feedStep(int64_t step) {
  const ir::Module& m = executor_->module();
  if (schedule_) {
    const std::string var(ir::kLrScaleVar);
    if (m.findVar(var) == nullptr)
      return absl::FailedPreconditionError(
          absl::StrCat("module @", m.name(), " has no variable @", var,
                       " for the learning-rate schedule (compile it with feed-learning-rate)"));
    HostTensor value(ir::TensorType{ir::DType::kF32, {1}});
    const float factor = static_cast<float>(schedule_->factor(step));
    std::memcpy(value.buffer.data(), &factor, sizeof factor);
    RETURN_IF_ERROR(writeOnThisProcess(var, value));
  }
  if (const ir::Var* counter = m.findVar(ir::kStepVar); counter != nullptr) {
    HostTensor value(counter->type);
    if (counter->type != ir::TensorType{ir::DType::kI32, {1}})
      return absl::FailedPreconditionError(absl::StrCat(
          "variable @", ir::kStepVar, " of module @", m.name(), " is ",
          ir::toString(counter->type), "; the update's index it is fed is an i32[1]"));
    if (step > INT32_MAX)
      return absl::OutOfRangeError(absl::StrCat("update ", step, " is past @", ir::kStepVar,
                                                "'s i32 range"));
    const int32_t index = static_cast<int32_t>(step);
    std::memcpy(value.buffer.data(), &index, sizeof index);
    RETURN_IF_ERROR(writeOnThisProcess(counter->name, value));
  }
  return absl::OkStatus();
}

absl::Status Trainer::initialize() { return executor_->run(ir::kInitGraph, {}).status(); }

absl::StatusOr<StepResult> Trainer::trainStep(const data::Batch& b) {
  std::vector<backend::TensorView> in;
  for (size_t k = 0; k < input_types_.size(); ++k)
    in.push_back({const_cast<void*>(b.fields[k]), input_types_[k]});
  auto out = executor_->run(ir::kTrainGraph, in);
  if (!out.ok()) return out.status();
  StepResult r{.loss = (*out)[0].scalar()};
  for (size_t k = 1; k < out->size(); ++k) r.metric_sums.push_back((*out)[k].scalar());
  return r;
}

absl::StatusOr<PassResult> Trainer::trainEpoch(data::BatchLoader& loader, const EpochProgress& from,
                                               const StepCallback& on_step) {
  RETURN_IF_ERROR(checkData(loader, ir::kTrainGraph));
  const std::vector<size_t> fields = fieldsOfInputs(loader, ir::kTrainGraph);
  PassResult r;
  r.steps = from.steps;
  r.examples = from.examples;
  double loss_sum = from.loss_sum;
  std::vector<double> metric_sums(metrics_.size(), 0.0);
  if (accuracy_ >= 0)
    metric_sums[static_cast<size_t>(accuracy_)] = static_cast<double>(from.correct);
  const int64_t total = loader.batchesPerEpoch();
  auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return from.seconds + secondsSince(start); };
  // The input pipeline: while step k runs, batch k+1 is taken from the loader and handed
  // to the devices, whose copies of it overlap step k. The first batch is handed over
  // here, whatever an earlier pass that stopped early left waiting.
  // Time blocked on the loader: what the input pipeline failed to hide.
  auto next = [&] {
    const auto asked = std::chrono::steady_clock::now();
    std::optional<data::Batch> b = loader.next();
    r.input_wait_seconds += secondsSince(asked);
    return b;
  };
  std::optional<data::Batch> batch = next();
  if (batch) RETURN_IF_ERROR(handOver(ir::kTrainGraph, *batch, fields));
  while (batch) {
    // A callback that replaced the module (--split auto) left the batch with the old one.
    if (!executor_->prefetched(ir::kTrainGraph))
      RETURN_IF_ERROR(handOver(ir::kTrainGraph, *batch, fields));
    // The step before has ended (waited for below), so no kernel reads @lr_scale now.
    RETURN_IF_ERROR(feedStep(first_step_ + r.steps));
    RETURN_IF_ERROR(executor_->launch(ir::kTrainGraph));
    const int64_t valid = batch->valid;
    batch = next();  // the step's batch is in staging: the loader may reuse its slot
    const absl::Status handed =
        batch ? handOver(ir::kTrainGraph, *batch, fields) : absl::OkStatus();
    auto out = executor_->wait();
    if (!out.ok()) return out.status();
    RETURN_IF_ERROR(handed);
    const double loss = (*out)[0].scalar();
    // The step's loss is a mean over the global batch; padding rows add nothing to it.
    loss_sum += loss * static_cast<double>(batch_);
    for (size_t k = 0; k < metric_sums.size(); ++k) metric_sums[k] += (*out)[k + 1].scalar();
    r.examples += valid;
    ++r.steps;
    r.seconds = seconds();
    const int64_t correct =
        accuracy_ >= 0 ? static_cast<int64_t>(metric_sums[static_cast<size_t>(accuracy_)]) : 0;
    if (on_step && !on_step({.step = r.steps,
                             .steps = total,
                             .examples = r.examples,
                             .seconds = r.seconds,
                             .loss = loss,
                             .mean_loss = loss_sum / static_cast<double>(r.examples),
                             .loss_sum = loss_sum,
                             .correct = correct})) {
      r.stopped = r.steps < total;
      break;
    }
  }
  RETURN_IF_ERROR(loader.status());
  r.seconds = seconds();
  finish(r, loss_sum, metric_sums);
  return r;
}

absl::StatusOr<PassResult> Trainer::evaluate(data::BatchLoader& loader,
                                             const std::function<bool()>& keep_going) {
  RETURN_IF_ERROR(checkData(loader, ir::kEvalGraph));
  const std::vector<size_t> fields = fieldsOfInputs(loader, ir::kEvalGraph);
  PassResult r;
  double loss_sum = 0;
  std::vector<double> metric_sums(metrics_.size(), 0.0);
  auto start = std::chrono::steady_clock::now();
  // Batch k+1 handed over while step k runs, as in trainEpoch.
  std::optional<data::Batch> batch = loader.next();
  if (batch) RETURN_IF_ERROR(handOver(ir::kEvalGraph, *batch, fields));
  while (batch) {
    RETURN_IF_ERROR(executor_->launch(ir::kEvalGraph));
    const int64_t valid = batch->valid;
    batch = loader.next();
    const absl::Status handed = batch ? handOver(ir::kEvalGraph, *batch, fields) : absl::OkStatus();
    auto out = executor_->wait();
    if (!out.ok()) return out.status();
    RETURN_IF_ERROR(handed);
    loss_sum += (*out)[0].scalar();  // eval_step sums the loss
    for (size_t k = 0; k < metric_sums.size(); ++k) metric_sums[k] += (*out)[k + 1].scalar();
    r.examples += valid;
    ++r.steps;
    if (keep_going && !keep_going()) {
      r.stopped = true;
      break;
    }
  }
  RETURN_IF_ERROR(loader.status());
  r.seconds = secondsSince(start);
  finish(r, loss_sum, metric_sums);
  return r;
}

}  // namespace tandem::runtime
