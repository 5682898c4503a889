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

// Hands `batch` to graph `name`'s next launch.
absl::Status handOver(Executor& ex, absl::string_view name, const data::Batch& b,
                      const ir::TensorType& images, const ir::TensorType& labels) {
  backend::TensorView in[2] = {{const_cast<float*>(b.images), images},
                               {const_cast<int32_t*>(b.labels), labels}};
  return ex.prefetch(name, in);
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

void finish(PassResult& r, double loss_sum, int64_t correct) {
  if (r.examples == 0) return;
  r.loss = loss_sum / static_cast<double>(r.examples);
  r.accuracy = static_cast<double>(correct) / static_cast<double>(r.examples);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::create(std::unique_ptr<ir::Module> compiled,
                                                         ExecutorOptions options) {
  for (absl::string_view name : {ir::kTrainGraph, ir::kEvalGraph}) {
    const ir::Graph* g = compiled->graph(name);
    if (g == nullptr || g->inputs().size() != 2 || g->outputs().size() != 2)
      return absl::InvalidArgumentError(
          absl::StrCat("module ", compiled->name(), ": @", name,
                       " must take images and labels and return the loss and the correct count"));
  }
  auto trainer = std::unique_ptr<Trainer>(new Trainer());
  std::vector<ir::Node*> inputs = compiled->graph(ir::kTrainGraph)->inputs();
  trainer->image_type_ = inputs[0]->result()->type();
  trainer->label_type_ = inputs[1]->result()->type();
  auto ex = Executor::create(std::move(compiled), options);
  if (!ex.ok()) return ex.status();
  trainer->executor_ = std::move(*ex);
  trainer->options_ = options;
  return trainer;
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
  std::vector<ir::Node*> inputs = executor_->module().graph(ir::kTrainGraph)->inputs();
  image_type_ = inputs[0]->result()->type();
  label_type_ = inputs[1]->result()->type();
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
  const data::Dataset& d = loader.data();
  const ir::Graph* g = executor_->module().graph(name);
  if (g == nullptr || g->inputs().size() != 2)
    return absl::InvalidArgumentError(absl::StrCat("module ", executor_->module().name(),
                                                   " has no @", name, " of images and labels"));
  const ir::Value& images = *g->inputs()[0]->result();
  const ir::Value& labels = *g->inputs()[1]->result();
  const std::string model = executor_->module().name();
  const std::string purpose = name == ir::kTrainGraph ? "train on" : "evaluate";
  if (d.count == 0)
    return absl::InvalidArgumentError(
        absl::StrCat(d.source, " holds no images: nothing to ", purpose));
  // Every dimension of an example against the module: channels, height, width.
  const ir::Shape& shape = images.type().shape;
  const std::vector<int64_t> example = d.exampleShape();
  if (shape.size() != example.size() + 1 ||
      !std::equal(example.begin(), example.end(), shape.begin() + 1) ||
      images.type().dtype != ir::DType::kF32)
    return absl::InvalidArgumentError(absl::StrCat(
        d.source, " holds ", d.count, " images of ", shapeText(example), ", but ", model,
        " takes images of ",
        shapeText(absl::MakeConstSpan(shape).subspan(std::min<size_t>(1, shape.size()))), " (@",
        name, "'s input %", images.name(), ": ", ir::toString(images.type()), ")"));
  if (shape[0] != loader.batch() || labels.type().shape.size() != 1 ||
      labels.type().shape[0] != loader.batch() || labels.type().dtype != ir::DType::kI32)
    return absl::InvalidArgumentError(absl::StrCat(
        "batches of ", loader.batch(), " images and labels from ", d.source, ", but @", name,
        " of ", model, " takes %", images.name(), ": ", ir::toString(images.type()), " and %",
        labels.name(), ": ", ir::toString(labels.type())));
  if (const int64_t classes = classesOf(*g); classes > 0 && d.classes > classes)
    return absl::InvalidArgumentError(absl::StrCat(d.labels_source, " holds labels of ", d.classes,
                                                   " classes, but ", model, " tells apart ",
                                                   classes, " (its logits in @", name, ")"));
  return absl::OkStatus();
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

absl::StatusOr<std::pair<double, int64_t>> Trainer::trainStep(const data::Batch& b) {
  backend::TensorView in[2] = {{const_cast<float*>(b.images), image_type_},
                               {const_cast<int32_t*>(b.labels), label_type_}};
  auto out = executor_->run(ir::kTrainGraph, in);
  if (!out.ok()) return out.status();
  return std::make_pair((*out)[0].scalar(), static_cast<int64_t>((*out)[1].scalar()));
}

absl::StatusOr<PassResult> Trainer::trainEpoch(data::BatchLoader& loader, const EpochProgress& from,
                                               const StepCallback& on_step) {
  RETURN_IF_ERROR(checkData(loader, ir::kTrainGraph));
  PassResult r;
  r.steps = from.steps;
  r.examples = from.examples;
  double loss_sum = from.loss_sum;
  int64_t correct = from.correct;
  const int64_t total = loader.batchesPerEpoch();
  auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return from.seconds + secondsSince(start); };
  // The input pipeline: while step k runs, batch k+1 is taken from the loader and handed
  // to the devices, whose copies of it overlap step k. The first batch is handed over
  // here, whatever an earlier pass that stopped early left waiting.
  std::optional<data::Batch> batch = loader.next();
  if (batch)
    RETURN_IF_ERROR(handOver(*executor_, ir::kTrainGraph, *batch, image_type_, label_type_));
  while (batch) {
    // A callback that replaced the module (--split auto) left the batch with the old one.
    if (!executor_->prefetched(ir::kTrainGraph))
      RETURN_IF_ERROR(handOver(*executor_, ir::kTrainGraph, *batch, image_type_, label_type_));
    // The step before has ended (waited for below), so no kernel reads @lr_scale now.
    RETURN_IF_ERROR(feedStep(first_step_ + r.steps));
    RETURN_IF_ERROR(executor_->launch(ir::kTrainGraph));
    const int64_t valid = batch->valid;
    batch = loader.next();  // the step's batch is in staging: the loader may reuse its slot
    const absl::Status handed =
        batch ? handOver(*executor_, ir::kTrainGraph, *batch, image_type_, label_type_)
              : absl::OkStatus();
    auto out = executor_->wait();
    if (!out.ok()) return out.status();
    RETURN_IF_ERROR(handed);
    const double loss = (*out)[0].scalar();
    // The step's loss is a mean over the global batch; padding rows add nothing to it.
    loss_sum += loss * static_cast<double>(image_type_.shape[0]);
    correct += static_cast<int64_t>((*out)[1].scalar());
    r.examples += valid;
    ++r.steps;
    r.seconds = seconds();
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
  r.seconds = seconds();
  finish(r, loss_sum, correct);
  return r;
}

absl::StatusOr<PassResult> Trainer::evaluate(data::BatchLoader& loader,
                                             const std::function<bool()>& keep_going) {
  RETURN_IF_ERROR(checkData(loader, ir::kEvalGraph));
  PassResult r;
  double loss_sum = 0;
  int64_t correct = 0;
  auto start = std::chrono::steady_clock::now();
  // Batch k+1 handed over while step k runs, as in trainEpoch.
  std::optional<data::Batch> batch = loader.next();
  if (batch)
    RETURN_IF_ERROR(handOver(*executor_, ir::kEvalGraph, *batch, image_type_, label_type_));
  while (batch) {
    RETURN_IF_ERROR(executor_->launch(ir::kEvalGraph));
    const int64_t valid = batch->valid;
    batch = loader.next();
    const absl::Status handed =
        batch ? handOver(*executor_, ir::kEvalGraph, *batch, image_type_, label_type_)
              : absl::OkStatus();
    auto out = executor_->wait();
    if (!out.ok()) return out.status();
    RETURN_IF_ERROR(handed);
    loss_sum += (*out)[0].scalar();  // eval_step sums the loss
    correct += static_cast<int64_t>((*out)[1].scalar());
    r.examples += valid;
    ++r.steps;
    if (keep_going && !keep_going()) {
      r.stopped = true;
      break;
    }
  }
  r.seconds = secondsSince(start);
  finish(r, loss_sum, correct);
  return r;
}

}  // namespace tandem::runtime
