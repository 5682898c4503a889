#include "runtime/trainer.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "passes/pass_manager.h"
#include "passes/pipeline.h"

namespace tandem::runtime {
namespace {

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

ModelDefaults defaultsFor(absl::string_view model) {
  using K = ir::Initializer::Kind;
  if (model == "lenet") return {0.1, 0.9, 0, {K::kKaiming}};
  return {0.1, 0, 0, {K::kKaiming}};  // resnets: the lessons' SGD at lr 0.1
}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::create(const ModelSpec& spec,
                                                         const TrainOptions& o) {
  if (o.devices.empty()) return absl::InvalidArgumentError("no devices to train on");
  if (o.batch < static_cast<int64_t>(o.devices.size()))
    return absl::InvalidArgumentError(
        absl::StrCat("batch ", o.batch, " is smaller than the device count ", o.devices.size(),
                     "; every device needs at least one example"));
  auto module = buildModule(spec, {.batch = o.batch, .weight_init = o.weight_init});
  if (!module.ok()) return module.status();
  passes::PipelineConfig config{.devices = o.devices,
                                .weights = o.weights,
                                .lr = o.lr,
                                .momentum = o.momentum,
                                .weight_decay = o.weight_decay,
                                .bucket_mb = o.bucket_mb,
                                .first_bucket_mb = o.first_bucket_mb};
  auto pipeline = passes::parsePipeline(passes::defaultPipeline(config));
  if (!pipeline.ok()) return pipeline.status();
  passes::PassManager pm({.verify = true});
  for (auto& p : *pipeline) pm.add(std::move(p));
  if (absl::Status s = pm.run(**module); !s.ok()) return s;

  auto trainer = std::unique_ptr<Trainer>(new Trainer());
  std::vector<ir::Node*> inputs = (*module)->graph(ir::kTrainGraph)->inputs();
  if (inputs.size() != 2) return absl::InternalError("train_step must take images and labels");
  trainer->image_type_ = inputs[0]->result()->type();
  trainer->label_type_ = inputs[1]->result()->type();
  auto ex = Executor::create(
      std::move(*module),
      {.seed = o.seed, .threads_per_device = o.threads_per_device, .trace = o.trace});
  if (!ex.ok()) return ex.status();
  trainer->executor_ = std::move(*ex);
  return trainer;
}

absl::Status Trainer::initialize() { return executor_->run(ir::kInitGraph, {}).status(); }

absl::StatusOr<std::pair<double, int64_t>> Trainer::trainStep(const data::Batch& b) {
  backend::TensorView in[2] = {{const_cast<float*>(b.images), image_type_},
                               {const_cast<int32_t*>(b.labels), label_type_}};
  auto out = executor_->run(ir::kTrainGraph, in);
  if (!out.ok()) return out.status();
  return std::make_pair((*out)[0].scalar(), static_cast<int64_t>((*out)[1].scalar()));
}

absl::StatusOr<PassResult> Trainer::trainEpoch(
    data::BatchLoader& loader, const std::function<void(int64_t, int64_t, double, double)>& on_step,
    const std::atomic<bool>* stop) {
  PassResult r;
  double loss_sum = 0;
  int64_t correct = 0, steps = 0;
  const int64_t total = loader.batchesPerEpoch();
  auto start = std::chrono::steady_clock::now();
  while (auto batch = loader.next()) {
    auto step = trainStep(*batch);
    if (!step.ok()) return step.status();
    // The step's loss is a mean over the global batch; padding rows add nothing to it.
    loss_sum += step->first * static_cast<double>(image_type_.shape[0]);
    correct += step->second;
    r.examples += batch->valid;
    ++steps;
    r.seconds = secondsSince(start);
    if (on_step) on_step(steps, total, r.examples / r.seconds, loss_sum / r.examples);
    if (stop != nullptr && stop->load()) break;
  }
  r.seconds = secondsSince(start);
  if (r.examples > 0) {
    r.loss = loss_sum / static_cast<double>(r.examples);
    r.accuracy = static_cast<double>(correct) / static_cast<double>(r.examples);
  }
  return r;
}

absl::StatusOr<PassResult> Trainer::evaluate(data::BatchLoader& loader) {
  PassResult r;
  double loss_sum = 0;
  int64_t correct = 0;
  auto start = std::chrono::steady_clock::now();
  while (auto b = loader.next()) {
    backend::TensorView in[2] = {{const_cast<float*>(b->images), image_type_},
                                 {const_cast<int32_t*>(b->labels), label_type_}};
    auto out = executor_->run(ir::kEvalGraph, in);
    if (!out.ok()) return out.status();
    loss_sum += (*out)[0].scalar();  // eval_step sums the loss
    correct += static_cast<int64_t>((*out)[1].scalar());
    r.examples += b->valid;
  }
  r.seconds = secondsSince(start);
  if (r.examples > 0) {
    r.loss = loss_sum / static_cast<double>(r.examples);
    r.accuracy = static_cast<double>(correct) / static_cast<double>(r.examples);
  }
  return r;
}

}  // namespace tandem::runtime
