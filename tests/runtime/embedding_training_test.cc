// A token classifier (i32 ids [N, T] -> embedding -> mean over the tokens -> linear ->
// cross entropy with label smoothing) compiled by the default pipeline and trained two SGD
// steps from PyTorch's initial values: on 1 device, 2 devices and a 3:1 split its
// parameters and losses are PyTorch 1.13's (tests/data/gen_embedding_loss_refs.py). So the
// ids, an integer graph input of rank 2, split on the batch axis like labels; each
// device's table gradient is its own rows' scatter-add, which the all_reduce adds; and the
// smoothed loss and its gradient are PyTorch's. An id outside the table in a batch is an
// error naming the input, the element and the embedding node before anything runs.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/backend.h"
#include "backend/backends.h"
#include "frontend/builder.h"
#include "frontend/builder_internals.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"
#include "ir/target.h"
#include "passes/pass_manager.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "tests/cores/ref_case.h"
#include "tests/runtime/runtime_test_util.h"

namespace tandem::testing {
namespace {

const RefCase& reference() {
  static const RefCase* c = [] {
    auto loaded = RefCase::load("../embedding_loss_refs/token_classifier");
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return new RefCase(loaded.ok() ? *loaded : RefCase());
  }();
  return *c;
}

/// One step graph of the classifier: ids and labels in, the loss and the correct count out.
absl::Status buildStep(Builder& b, ir::Graph* g, bool training, const RefCase& c) {
  const int64_t batch = c.integer("batch");
  BuilderInternals::beginGraph(b, g, training);
  Tensor ids =
      BuilderInternals::addInput(b, "ids", {ir::DType::kI32, {batch, c.integer("tokens")}});
  Tensor y = BuilderInternals::addInput(b, "y", {ir::DType::kI32, {batch}});
  Tensor pooled = b.mean(b.embedding(ids, c.integer("vocab"), c.integer("width"), "emb"), 1);
  Tensor logits = b.linear(pooled, {.out_features = c.integer("classes"), .name = "fc"});
  Tensor loss = BuilderInternals::addNode(
      b,
      ir::SoftmaxCrossEntropyArgs{
          .logits = logits.value(),
          .labels = y.value(),
          .reduction = training ? ir::Reduction::kMean : ir::Reduction::kSum,
          .divisor = training ? batch : 1,
          .label_smoothing = training ? c.num("smoothing") : 0.0}
          .spec(),
      "loss", std::source_location::current());
  Tensor correct = BuilderInternals::addNode(
      b, ir::AccuracyArgs{.logits = logits.value(), .labels = y.value()}.spec(), "correct",
      std::source_location::current());
  RETURN_IF_ERROR(b.status());
  g->setOutputs({loss.value(), correct.value()});
  return absl::OkStatus();
}

/// The module compiled by the default pipeline for `devices` (split by `weights`).
absl::StatusOr<std::unique_ptr<ir::Module>> compiled(const std::vector<ir::Device>& devices,
                                                     const std::vector<double>& weights) {
  const RefCase& c = reference();
  auto m = std::make_unique<ir::Module>("tokens");
  Builder b = BuilderInternals::make(*m, {.batch = c.integer("batch")});
  ASSIGN_OR_RETURN(ir::Graph * init, m->addGraph(std::string(ir::kInitGraph)));
  ASSIGN_OR_RETURN(ir::Graph * train, m->addGraph(std::string(ir::kTrainGraph)));
  ASSIGN_OR_RETURN(ir::Graph * eval, m->addGraph(std::string(ir::kEvalGraph)));
  RETURN_IF_ERROR(buildStep(b, train, true, c));
  RETURN_IF_ERROR(buildStep(b, eval, false, c));
  for (const ir::Var& v : m->vars()) {
    ASSIGN_OR_RETURN(ir::Node * value,
                     init->create(ir::InitializeArgs{.var = v.name}.spec({.names = {v.name}})));
    RETURN_IF_ERROR(
        init->create(ir::AssignArgs{.value = value->result(), .var = v.name}.spec()).status());
  }
  passes::PipelineConfig config{
      .devices = devices, .weights = weights, .optimizer = ir::SgdConfig{.lr = c.num("lr")}};
  backend::registerBackends();  // the targets' facts: the arena alignment
  ASSIGN_OR_RETURN(config.alignment, ir::targetAlignment(devices));
  passes::PassManager pm;
  RETURN_IF_ERROR(pm.addPipeline(passes::defaultPipeline(config)));
  RETURN_IF_ERROR(pm.run(*m));
  return m;
}

runtime::HostTensor hostTensor(const RefTensor& t, ir::DType dtype) {
  runtime::HostTensor h(ir::TensorType{dtype, ir::Shape(t.shape.begin(), t.shape.end())});
  for (int64_t i = 0; i < t.size(); ++i) {
    if (dtype == ir::DType::kI32)
      reinterpret_cast<int32_t*>(h.buffer.data())[i] = static_cast<int32_t>(t.values[i]);
    else
      reinterpret_cast<float*>(h.buffer.data())[i] = static_cast<float>(t.values[i]);
  }
  return h;
}

/// The classifier on `devices`, initialized to PyTorch's values on every device.
std::unique_ptr<runtime::Executor> loaded(const std::vector<ir::Device>& devices,
                                          const std::vector<double>& weights = {}) {
  auto m = compiled(devices, weights);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return nullptr;
  auto e = runtime::Executor::create(std::move(*m));
  EXPECT_TRUE(e.ok()) << e.status();
  if (!e.ok()) return nullptr;
  EXPECT_TRUE((*e)->run(ir::kInitGraph, {}).ok());
  const RefCase& c = reference();
  for (size_t d = 0; d < devices.size(); ++d)
    for (auto [var, ref] :
         {std::pair{"emb.table", "table0"}, std::pair{"fc.w", "w0"}, std::pair{"fc.b", "b0"}}) {
      absl::Status s = (*e)->writeVariable(var, d, hostTensor(c.tensor(ref), ir::DType::kF32));
      EXPECT_TRUE(s.ok()) << s;
    }
  return std::move(*e);
}

// PyTorch averages the tokens, the smoothed losses and the gradients in its own order: a
// few f32 roundings of each tensor's scale after two steps, 1e-5 relative. The table's
// rows picked by many samples (token 0 and 1 start every sample) are the sums a wrong
// scatter, split or reduction would change by a whole row's share.
TEST(EmbeddingTraining, TwoStepsMatchPyTorchOnOneTwoAndUnevenDevices) {
  const RefCase& c = reference();
  struct Setup {
    std::string what;
    std::vector<ir::Device> devices;
    std::vector<double> weights;
  };
  for (const Setup& s : {Setup{"1 device", cpus(1), {}}, Setup{"2 devices", cpus(2), {}},
                         Setup{"3:1 split", cpus(2), {3, 1}}}) {
    SCOPED_TRACE(s.what);
    std::unique_ptr<runtime::Executor> e = loaded(s.devices, s.weights);
    ASSERT_NE(e, nullptr);
    for (int64_t step = 0; step < c.integer("steps"); ++step) {
      const runtime::HostTensor ids =
          hostTensor(c.tensor(absl::StrCat("ids", step)), ir::DType::kI32);
      const runtime::HostTensor y =
          hostTensor(c.tensor(absl::StrCat("labels", step)), ir::DType::kI32);
      auto out = e->run(ir::kTrainGraph, {ids.view(), y.view()});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_LE(relativeError(std::vector<float>{static_cast<float>((*out)[0].scalar())},
                              c.tensor(absl::StrCat("loss", step))),
                1e-5)
          << "step " << step;
      for (size_t d = 0; d < s.devices.size(); ++d)
        for (auto [var, ref] :
             {std::pair{"emb.table", "table"}, std::pair{"fc.w", "w"}, std::pair{"fc.b", "b"}}) {
          auto v = e->readVariable(var, d);
          ASSERT_TRUE(v.ok()) << v.status();
          const std::vector<float> got(v->f32(), v->f32() + v->type.numElements());
          EXPECT_LE(relativeError(got, c.tensor(absl::StrCat(ref, step + 1))), 1e-5)
              << var << " on device " << d << " after step " << step + 1;
        }
    }
  }
}

TEST(EmbeddingTraining, AnIdOutsideTheTableInABatchIsAnErrorNamingTheInputAndTheNode) {
  const RefCase& c = reference();
  std::unique_ptr<runtime::Executor> e = loaded(cpus(2));
  ASSERT_NE(e, nullptr);
  for (int32_t bad : {static_cast<int32_t>(c.integer("vocab")), -1}) {
    SCOPED_TRACE(bad);
    runtime::HostTensor ids = hostTensor(c.tensor("ids0"), ir::DType::kI32);
    const runtime::HostTensor y = hostTensor(c.tensor("labels0"), ir::DType::kI32);
    reinterpret_cast<int32_t*>(ids.buffer.data())[37] = bad;  // on the second device
    auto out = e->run(ir::kTrainGraph, {ids.view(), y.view()});
    ASSERT_FALSE(out.ok());
    const std::string msg(out.status().message());
    EXPECT_NE(msg.find("input %ids"), std::string::npos) << msg;
    EXPECT_NE(msg.find(absl::StrCat("element 37 of the batch is id ", bad)), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("embedding"), std::string::npos) << msg;
    EXPECT_NE(msg.find("table of 11 rows"), std::string::npos) << msg;
  }
  // The run goes on with good ids.
  const runtime::HostTensor ids = hostTensor(c.tensor("ids0"), ir::DType::kI32);
  const runtime::HostTensor y = hostTensor(c.tensor("labels0"), ir::DType::kI32);
  EXPECT_TRUE(e->run(ir::kTrainGraph, {ids.view(), y.view()}).ok());
}

}  // namespace
}  // namespace tandem::testing
