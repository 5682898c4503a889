// A token classifier (i32 ids [N, T] -> embedding -> mean over the tokens -> linear ->
// cross entropy with label smoothing) compiled by the default pipeline and trained two SGD
// steps from PyTorch's initial values: on 1 device, 2 devices and a 3:1 split its
// parameters and losses are PyTorch 1.13's (tests/data/gen_embedding_loss_refs.py). So the
// ids, an integer graph input of rank 2, split on the batch axis like labels (as i32, and
// as i64 cast to i32 on each device: PyTorch's long tensors, issue 42); each
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

/// An index input of dtype `index`: i64 ones (PyTorch's long ids and labels) cast to i32 at
/// the graph's start, as frontend/model.cc does for a model's i64 input.
Tensor indexInput(Builder& b, const std::string& name, ir::Shape shape, ir::DType index) {
  Tensor t = BuilderInternals::addInput(b, name, {index, std::move(shape)});
  if (index != ir::DType::kI64) return t;
  return BuilderInternals::addNode(b,
                                   ir::CastArgs{.x = t.value(), .dtype = ir::CastType::kI32}.spec(),
                                   name + "_i32", std::source_location::current());
}

/// One step graph of the classifier: ids and labels in, the loss and the correct count out.
absl::Status buildStep(Builder& b, ir::Graph* g, bool training, const RefCase& c, ir::DType index) {
  const int64_t batch = c.integer("batch");
  BuilderInternals::beginGraph(b, g, training);
  Tensor ids = indexInput(b, "ids", {batch, c.integer("tokens")}, index);
  Tensor y = indexInput(b, "y", {batch}, index);
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
                                                     const std::vector<double>& weights,
                                                     ir::DType index) {
  const RefCase& c = reference();
  auto m = std::make_unique<ir::Module>("tokens");
  Builder b = BuilderInternals::make(*m, {.batch = c.integer("batch")});
  ASSIGN_OR_RETURN(ir::Graph * init, m->addGraph(std::string(ir::kInitGraph)));
  ASSIGN_OR_RETURN(ir::Graph * train, m->addGraph(std::string(ir::kTrainGraph)));
  ASSIGN_OR_RETURN(ir::Graph * eval, m->addGraph(std::string(ir::kEvalGraph)));
  RETURN_IF_ERROR(buildStep(b, train, true, c, index));
  RETURN_IF_ERROR(buildStep(b, eval, false, c, index));
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
    else if (dtype == ir::DType::kI64)
      reinterpret_cast<int64_t*>(h.buffer.data())[i] = static_cast<int64_t>(t.values[i]);
    else
      reinterpret_cast<float*>(h.buffer.data())[i] = static_cast<float>(t.values[i]);
  }
  return h;
}

/// The classifier on `devices`, initialized to PyTorch's values on every device.
std::unique_ptr<runtime::Executor> loaded(const std::vector<ir::Device>& devices,
                                          const std::vector<double>& weights = {},
                                          ir::DType index = ir::DType::kI32) {
  auto m = compiled(devices, weights, index);
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
  // i64: the ids and labels as PyTorch holds them (long), each cast to i32 on its device
  // after the split (issue 42).
  for (ir::DType index : {ir::DType::kI32, ir::DType::kI64}) {
    for (const Setup& s : {Setup{"1 device", cpus(1), {}}, Setup{"2 devices", cpus(2), {}},
                           Setup{"3:1 split", cpus(2), {3, 1}}}) {
      SCOPED_TRACE(absl::StrCat(s.what, ", ", ir::dtypeName(index), " ids and labels"));
      std::unique_ptr<runtime::Executor> e = loaded(s.devices, s.weights, index);
      ASSERT_NE(e, nullptr);
      for (int64_t step = 0; step < c.integer("steps"); ++step) {
        const runtime::HostTensor ids = hostTensor(c.tensor(absl::StrCat("ids", step)), index);
        const runtime::HostTensor y = hostTensor(c.tensor(absl::StrCat("labels", step)), index);
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

// i64 ids and labels are checked in i64, through their cast: an id of 2^32 + 3 would
// wrap to 3 and a label of -2^40 to padding; both are errors naming the element.
TEST(EmbeddingTraining, I64IdsAndLabelsPastI32AreErrorsNotWrapped) {
  const RefCase& c = reference();
  std::unique_ptr<runtime::Executor> e = loaded(cpus(2), {}, ir::DType::kI64);
  ASSERT_NE(e, nullptr);
  for (int64_t bad :
       {(int64_t{1} << 32) + 3, static_cast<int64_t>(c.integer("vocab")), int64_t{-1}}) {
    SCOPED_TRACE(bad);
    runtime::HostTensor ids = hostTensor(c.tensor("ids0"), ir::DType::kI64);
    const runtime::HostTensor y = hostTensor(c.tensor("labels0"), ir::DType::kI64);
    reinterpret_cast<int64_t*>(ids.buffer.data())[37] = bad;  // on the second device
    auto out = e->run(ir::kTrainGraph, {ids.view(), y.view()});
    ASSERT_FALSE(out.ok());
    const std::string msg(out.status().message());
    EXPECT_NE(msg.find(absl::StrCat("input %ids: element 37 of the batch is id ", bad)),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("table of 11 rows"), std::string::npos) << msg;
  }
  {
    const runtime::HostTensor ids = hostTensor(c.tensor("ids0"), ir::DType::kI64);
    runtime::HostTensor y = hostTensor(c.tensor("labels0"), ir::DType::kI64);
    reinterpret_cast<int64_t*>(y.buffer.data())[5] = -(int64_t{1} << 40);
    auto out = e->run(ir::kTrainGraph, {ids.view(), y.view()});
    ASSERT_FALSE(out.ok());
    const std::string msg(out.status().message());
    EXPECT_NE(
        msg.find(absl::StrCat("input %y: sample 5 of the batch has label ", -(int64_t{1} << 40))),
        std::string::npos)
        << msg;
  }
  // The run goes on with good ids and labels, padding (-1) included.
  const runtime::HostTensor ids = hostTensor(c.tensor("ids0"), ir::DType::kI64);
  runtime::HostTensor y = hostTensor(c.tensor("labels0"), ir::DType::kI64);
  reinterpret_cast<int64_t*>(y.buffer.data())[5] = -1;
  EXPECT_TRUE(e->run(ir::kTrainGraph, {ids.view(), y.view()}).ok());
}

}  // namespace
}  // namespace tandem::testing
