#include "train/loaded_model.h"

#include "ir/op_views.h"
#include "ir/status_macros.h"

namespace tandem::training {

std::vector<int64_t> perDeviceBatch(const ir::Module& m) {
  const ir::Graph& step = *m.graph(ir::kTrainGraph);
  const ir::Value* first = step.inputs()[0]->result();  // every input is split alike
  for (const auto& n : step.nodes())
    if (ir::SplitView::is(*n) && ir::SplitView(*n).x() == first) return ir::SplitView(*n).sizes();
  return {first->type().shape[0]};
}

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadedModel::create(
    std::unique_ptr<ir::Module> compiled, const runtime::data::ExampleSource& train,
    const runtime::data::ExampleSource& test, Options options) {
  std::unique_ptr<LoadedModel> s(new LoadedModel());
  s->options_ = std::move(options);
  ASSIGN_OR_RETURN(s->trainer_, runtime::Trainer::create(std::move(compiled), s->options_.metrics,
                                                         s->options_.executor));
  if (s->options_.schedule) s->trainer_->setLearningRateSchedule(s->options_.schedule);
  s->batch_ = s->trainer_->batch();
  const ir::Module& m = s->trainer_->executor().module();
  s->train_loader_ = std::make_unique<runtime::data::BatchLoader>(
      runtime::data::sourceForInputs(train, *m.graph(ir::kTrainGraph), s->train_view_), s->batch_,
      /*shuffle=*/true, s->options_.seed, /*drop_last=*/true);
  s->test_loader_ = std::make_unique<runtime::data::BatchLoader>(
      runtime::data::sourceForInputs(test, *m.graph(ir::kEvalGraph), s->test_view_), s->batch_,
      /*shuffle=*/false, s->options_.seed, /*drop_last=*/false);
  RETURN_IF_ERROR(s->trainer_->checkData(*s->train_loader_, ir::kTrainGraph));
  RETURN_IF_ERROR(s->trainer_->checkData(*s->test_loader_, ir::kEvalGraph));
  return s;
}

absl::Status LoadedModel::restore(const runtime::Checkpoint& c, const std::string& path) {
  return runtime::restoreVariables(c, trainer_->executor(), path);
}

absl::StatusOr<runtime::PassResult> LoadedModel::trainEpoch(
    int epoch, const runtime::EpochProgress& from, const runtime::Trainer::StepCallback& on_step) {
  train_loader_->startEpoch(epoch, from.steps);
  trainer_->setFirstStep((epoch - 1) * stepsPerEpoch());
  return trainer_->trainEpoch(*train_loader_, from, on_step);
}

absl::StatusOr<runtime::PassResult> LoadedModel::evaluate(const std::function<bool()>& keep_going) {
  test_loader_->startEpoch(0);
  return trainer_->evaluate(*test_loader_, keep_going);
}

absl::StatusOr<runtime::PassResult> LoadedModel::evaluateOn(
    const runtime::data::ExampleSource& data) {
  std::unique_ptr<runtime::data::IntegerWidthSource> view;
  const ir::Graph& eval = *trainer_->executor().module().graph(ir::kEvalGraph);
  runtime::data::BatchLoader loader(runtime::data::sourceForInputs(data, eval, view), batch_,
                                    /*shuffle=*/false, options_.seed, /*drop_last=*/false);
  RETURN_IF_ERROR(trainer_->checkData(loader, ir::kEvalGraph));
  loader.startEpoch(0);
  return trainer_->evaluate(loader);
}

runtime::EpochFigures LoadedModel::figures(int epoch, const runtime::PassResult& train,
                                           const runtime::PassResult& test) {
  return {.epoch = epoch,
          .train_loss = train.loss,
          .train_accuracy = train.accuracy,
          .test_loss = test.loss,
          .test_accuracy = test.accuracy,
          .seconds = train.seconds,
          .images_per_second = train.examples / train.seconds,
          .eval_seconds = test.seconds,
          .split = perDeviceBatch(trainer_->executor().module()),
          .train_metrics = train.metrics,
          .test_metrics = test.metrics};
}

runtime::Checkpoint LoadedModel::checkpoint(
    int epoch, const runtime::EpochProgress& progress,
    const std::vector<runtime::EpochFigures>& history) const {
  const ir::Module& m = trainer_->executor().module();
  return {.model = options_.model,
          .settings = options_.settings,
          .seed = options_.seed,
          .epoch = epoch,
          .progress = progress,
          .steps_per_epoch = train_loader_->batchesPerEpoch(),
          .devices = static_cast<uint32_t>(m.devices().size()),
          .split = perDeviceBatch(m),
          .history = history};
}

}  // namespace tandem::training
