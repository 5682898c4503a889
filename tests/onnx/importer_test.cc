// The ONNX importer on hand-made models: what each op becomes (a linear layer, batch
// norm's buffers, values known at import), that unsupported nodes are all named in one
// line, and, on hostile input, that every truncation and thousands of byte mutations of a
// valid model give an error naming the file, never a crash or a hang.

#include "frontend/onnx/importer.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"
#include "ir/verifier.h"
#include "tests/onnx/model_builder.h"

namespace tandem::onnx_import {
namespace {

/// A small CNN as PyTorch 1.13 exports one: conv, batch norm, relu, max pool, flatten, and
/// nn.Linear as Gemm(transB=1); the batch dimension left open.
onnx::ModelProto sampleModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("sample");
  *g->add_input() = floatInput("x", {-1, 1, 6, 6});
  *g->add_initializer() = floats("conv.weight", {2, 1, 3, 3}, -0.04f);
  *g->add_initializer() = floats("conv.bias", {2}, 0.1f);
  *g->add_initializer() = floats("bn.weight", {2}, 1);
  *g->add_initializer() = floats("bn.bias", {2}, 0);
  *g->add_initializer() = floats("bn.running_mean", {2}, 0.05f);
  *g->add_initializer() = floats("bn.running_var", {2}, 0.9f);
  *g->add_initializer() = floats("fc.weight", {3, 8}, -0.02f);
  *g->add_initializer() = floats("fc.bias", {3}, 0);
  node(g, "Conv", "Conv_0", {"x", "conv.weight", "conv.bias"}, {"c"});
  node(g, "BatchNormalization", "BatchNormalization_1",
       {"c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}, {"b"});
  node(g, "Relu", "Relu_2", {"b"}, {"r"});
  onnx::NodeProto* pool = node(g, "MaxPool", "MaxPool_3", {"r"}, {"p"});
  auto* k = pool->add_attribute();
  k->set_name("kernel_shape");
  k->set_type(onnx::AttributeProto::INTS);
  k->add_ints(2);
  k->add_ints(2);
  auto* s = pool->add_attribute();
  s->set_name("strides");
  s->set_type(onnx::AttributeProto::INTS);
  s->add_ints(2);
  s->add_ints(2);
  node(g, "Flatten", "Flatten_4", {"p"}, {"f"});
  onnx::NodeProto* gemm = node(g, "Gemm", "Gemm_5", {"f", "fc.weight", "fc.bias"}, {"y"});
  intAttr(gemm, "transB", 1);
  *g->add_output() = floatInput("y", {-1, 3});
  return m;
}

absl::StatusOr<ImportedModel> importBytes(const std::string& bytes, int64_t batch = 4) {
  auto model = parseOnnxModel(bytes, "m.onnx");
  if (!model.ok()) return model.status();
  ImportOptions options;
  for (const ModelInput& in : modelInputs(**model)) {
    ir::Shape s = in.shape;
    if (!s.empty() && s[0] < 0) s[0] = batch;
    options.input_shapes[in.name] = s;
  }
  return importModel(**model, options);
}

std::vector<ir::Op> opsOf(const ir::Graph& g) {
  std::vector<ir::Op> ops;
  for (const auto& n : g.nodes())
    if (n->op() != ir::Op::kInput && n->op() != ir::Op::kParam) ops.push_back(n->op());
  return ops;
}

TEST(OnnxImport, SampleBecomesTheDslOpsWithItsWeights) {
  auto imported = importBytes(bytesOf(sampleModel()));
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ir::Module& m = *imported->module;
  EXPECT_TRUE(ir::verifyModule(m).ok()) << ir::verifyModule(m);
  const ir::Graph& g = *m.graph(kInferGraph);
  EXPECT_EQ(opsOf(g), (std::vector<ir::Op>{ir::Op::kConv2d, ir::Op::kBatchNorm, ir::Op::kRelu,
                                           ir::Op::kMaxPool2d, ir::Op::kFlatten, ir::Op::kLinear}));
  EXPECT_EQ(g.outputs()[0]->type(), (ir::TensorType{ir::DType::kF32, {4, 3}}));
  // The weights are parameters, batch norm's running statistics buffers.
  ASSERT_NE(m.findVar("bn.running_mean"), nullptr);
  EXPECT_EQ(m.findVar("bn.running_mean")->role, ir::VarRole::kBuffer);
  EXPECT_EQ(m.findVar("bn.running_var")->role, ir::VarRole::kBuffer);
  EXPECT_EQ(m.findVar("conv.weight")->role, ir::VarRole::kParam);
  EXPECT_EQ(m.findVar("fc.weight")->type, (ir::TensorType{ir::DType::kF32, {3, 8}}));
  ASSERT_EQ(imported->values.count("conv.weight"), 1u);
  EXPECT_FLOAT_EQ(imported->values.at("conv.weight")[3], -0.04f + 0.03f);
  EXPECT_EQ(imported->values.size(), 8u);
  EXPECT_EQ(imported->inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(imported->outputs, std::vector<std::string>{"y"});
  // ONNX's momentum weighs the running statistic (0.9 by default), Tandem's the batch's.
  for (const auto& n : g.nodes())
    if (n->op() == ir::Op::kBatchNorm) {
      EXPECT_NEAR(n->floatAttr("momentum"), 0.1, 1e-7);
      EXPECT_FALSE(n->boolAttr("training"));
    }
}

TEST(OnnxImport, EveryUnsupportedNodeIsNamedInOneError) {
  onnx::ModelProto m = sampleModel();
  onnx::GraphProto* g = m.mutable_graph();
  g->mutable_node(2)->set_op_type("Elu");   // Relu_2
  intAttr(g->mutable_node(0), "group", 2);  // an invalid group for 1 channel: the checker
  g->mutable_node(0)->mutable_attribute()->RemoveLast();
  node(g, "Erf", "Erf_6", {"y"}, {"e"});
  auto imported = importBytes(bytesOf(m));
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(imported.status().message(),
            "ONNX model 'm.onnx': Tandem does not support 2 nodes: node 'Relu_2' (Elu); node "
            "'Erf_6' (Erf)");
}

TEST(OnnxImport, AnUnsupportedUseOfAnOpNamesTheNodeAndWhy) {
  onnx::ModelProto m = sampleModel();
  onnx::NodeProto* pool = m.mutable_graph()->mutable_node(3);
  pool->mutable_attribute(0)->set_ints(1, 3);  // kernel 2x3
  auto imported = importBytes(bytesOf(m));
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().message(),
            "ONNX model 'm.onnx': Tandem does not support 1 node: node 'MaxPool_3' (MaxPool): "
            "kernel [2,3] (Tandem's windows are square)");
}

TEST(OnnxImport, KnownValuesAreComputedAtImport) {
  // x.view(x.size(0), -1) as PyTorch exports it: Shape, Gather, Unsqueeze, Concat, Reshape.
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("view");
  *g->add_input() = floatInput("x", {2, 3, 4});
  node(g, "Shape", "s", {"x"}, {"shape"});
  onnx::NodeProto* zero = node(g, "Constant", "c0", {}, {"zero"});
  auto* a = zero->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
  a->mutable_t()->add_int64_data(0);
  node(g, "Gather", "g", {"shape", "zero"}, {"n"});
  onnx::NodeProto* axes = node(g, "Constant", "c1", {}, {"axes"});
  auto* b = axes->add_attribute();
  b->set_name("value_ints");
  b->set_type(onnx::AttributeProto::INTS);
  b->add_ints(0);
  node(g, "Unsqueeze", "u", {"n", "axes"}, {"n1"});
  onnx::NodeProto* minus = node(g, "Constant", "c2", {}, {"minus1"});
  auto* c = minus->add_attribute();
  c->set_name("value_ints");
  c->set_type(onnx::AttributeProto::INTS);
  c->add_ints(-1);
  onnx::NodeProto* cat = node(g, "Concat", "cat", {"n1", "minus1"}, {"target"});
  intAttr(cat, "axis", 0);
  node(g, "Reshape", "r", {"x", "target"}, {"y"});
  *g->add_output() = floatInput("y", {2, 12});
  auto imported = importBytes(bytesOf(m));
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ir::Graph& graph = *imported->module->graph(kInferGraph);
  ASSERT_EQ(opsOf(graph), std::vector<ir::Op>{ir::Op::kReshape});
  // The batch axis is -1, so that replicate's slices reshape alike.
  for (const auto& n : graph.nodes()) {
    if (n->op() == ir::Op::kReshape) {
      EXPECT_EQ(n->attrAs<std::vector<int64_t>>("shape"), (std::vector<int64_t>{-1, 12}));
    }
  }
}

TEST(OnnxImport, MalformedModelsNameTheFileAndTheFieldOrNode) {
  EXPECT_EQ(importBytes("not a model").status().message(),
            "ONNX model 'm.onnx': not an ONNX ModelProto (protobuf could not parse it: truncated "
            "or corrupt)");
  onnx::ModelProto m = sampleModel();
  m.mutable_graph()->mutable_initializer(1)->add_float_data(7);  // conv.bias: 3 values for [2]
  EXPECT_TRUE(absl::StrContains(importBytes(bytesOf(m)).status().message(), "conv.bias"))
      << importBytes(bytesOf(m)).status();
  m = sampleModel();
  m.mutable_graph()->mutable_node(2)->set_input(0, "nowhere");  // Relu_2 reads nothing
  auto s = importBytes(bytesOf(m)).status();
  EXPECT_TRUE(absl::StartsWith(s.message(), "ONNX model 'm.onnx': onnx.checker: ")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "Relu")) << s;
  EXPECT_FALSE(absl::StrContains(s.message(), "\n"));
  m = sampleModel();
  m.clear_opset_import();
  EXPECT_EQ(importBytes(bytesOf(m)).status().message(),
            "ONNX model 'm.onnx': field 'opset_import' names no version of the default (ai.onnx) "
            "domain, which node 'Conv_0' is of");
}

TEST(OnnxImportFuzz, EveryTruncationIsAnErrorOrTheSameModel) {
  const std::string bytes = bytesOf(sampleModel());
  int errors = 0;
  for (size_t len = 0; len < bytes.size(); ++len) {
    auto imported = importBytes(bytes.substr(0, len));
    if (!imported.ok()) {
      ++errors;
      EXPECT_TRUE(absl::StartsWith(imported.status().message(), "ONNX model 'm.onnx'"))
          << len << ": " << imported.status();
    }
  }
  // A cut between two fields of the outermost message can leave a well-formed model
  // (fewer opsets, say); most cuts do not.
  EXPECT_GT(errors, int(bytes.size() * 9 / 10));
}

/// A small deterministic PRNG (SplitMix64), so failures reproduce everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }

 private:
  uint64_t state_;
};

TEST(OnnxImportFuzz, MutatedModelsGiveAnErrorOrAValidModule) {
  const std::string bytes = bytesOf(sampleModel());
  Rng rng(25);
  int ok = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string b = bytes;
    for (size_t k = 0, n = 1 + rng.below(4); k < n; ++k) {
      const size_t at = rng.below(b.size());
      switch (rng.below(3)) {
        case 0:
          b[at] = char(rng.next());
          break;  // a byte changed
        case 1:
          b.erase(at, 1 + rng.below(8));
          break;  // bytes dropped
        default:
          b.insert(at, 1, char(rng.next()));
          break;  // a byte inserted
      }
    }
    auto imported = importBytes(b);
    if (imported.ok()) {
      ++ok;
      EXPECT_TRUE(ir::verifyModule(*imported->module).ok()) << i;
    } else {
      EXPECT_TRUE(absl::StartsWith(imported.status().message(), "ONNX model 'm.onnx'"))
          << i << ": " << imported.status();
      EXPECT_FALSE(absl::StrContains(imported.status().message(), "\n")) << i;
    }
  }
  EXPECT_LT(ok, 3000);
}

/// Mutations of the model's fields rather than its bytes: what a buggy exporter or a
/// hand-edited model gets wrong (sizes, attributes, op types, references), which byte
/// flips mostly turn into protobuf parse errors instead.
void mutateField(onnx::ModelProto& m, Rng& rng) {
  static const int64_t kSizes[] = {-1, 0, 1, 2, 3, 7, int64_t{1} << 40, -(int64_t{1} << 62)};
  static const char* kOps[] = {"Relu",
                               "Conv",
                               "Gemm",
                               "MatMul",
                               "Add",
                               "Flatten",
                               "Reshape",
                               "BatchNormalization",
                               "Softmax",
                               "Transpose",
                               "Concat",
                               "Slice",
                               "ReduceMean",
                               "MaxPool",
                               "Unsqueeze",
                               "Erf",
                               ""};
  onnx::GraphProto* g = m.mutable_graph();
  switch (rng.below(7)) {
    case 0: {  // an initializer's dimension
      onnx::TensorProto* t = g->mutable_initializer(int(rng.below(size_t(g->initializer_size()))));
      if (t->dims_size() > 0)
        t->set_dims(int(rng.below(size_t(t->dims_size()))), kSizes[rng.below(8)]);
      break;
    }
    case 1: {  // an attribute's value
      onnx::NodeProto* n = g->mutable_node(int(rng.below(size_t(g->node_size()))));
      auto* a = n->add_attribute();
      static const char* kNames[] = {"axis",    "group", "transB",   "kernel_shape", "pads",
                                     "strides", "perm",  "keepdims", "epsilon"};
      a->set_name(kNames[rng.below(9)]);
      if (rng.below(2) == 0) {
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(kSizes[rng.below(8)]);
      } else {
        a->set_type(onnx::AttributeProto::INTS);
        for (size_t k = 0, n_ints = rng.below(5); k < n_ints; ++k)
          a->add_ints(kSizes[rng.below(8)]);
      }
      break;
    }
    case 2:  // another op
      g->mutable_node(int(rng.below(size_t(g->node_size()))))->set_op_type(kOps[rng.below(17)]);
      break;
    case 3: {  // an input dropped or renamed
      onnx::NodeProto* n = g->mutable_node(int(rng.below(size_t(g->node_size()))));
      if (n->input_size() > 0) {
        if (rng.below(2) == 0)
          n->mutable_input()->RemoveLast();
        else
          n->set_input(int(rng.below(size_t(n->input_size()))), g->node(0).output(0));
      }
      break;
    }
    case 4: {  // an initializer's type or data
      onnx::TensorProto* t = g->mutable_initializer(int(rng.below(size_t(g->initializer_size()))));
      if (rng.below(2) == 0)
        t->set_data_type(int32_t(rng.below(17)));
      else
        t->add_float_data(1);
      break;
    }
    case 5:  // an input's shape
      g->mutable_input(0)
          ->mutable_type()
          ->mutable_tensor_type()
          ->mutable_shape()
          ->mutable_dim(int(rng.below(4)))
          ->set_dim_value(kSizes[rng.below(8)]);
      break;
    default:  // the opset
      m.mutable_opset_import(0)->set_version(int64_t(rng.below(20)));
      break;
  }
}

TEST(OnnxImportFuzz, FieldMutationsGiveAnErrorOrAValidModule) {
  Rng rng(2025);
  int ok = 0;
  for (int i = 0; i < 2000; ++i) {
    onnx::ModelProto m = sampleModel();
    for (size_t k = 0, n = 1 + rng.below(3); k < n; ++k) mutateField(m, rng);
    auto imported = importBytes(bytesOf(m));
    if (imported.ok()) {
      ++ok;
      EXPECT_TRUE(ir::verifyModule(*imported->module).ok()) << i;
    } else {
      EXPECT_TRUE(absl::StartsWith(imported.status().message(), "ONNX model 'm.onnx'") ||
                  absl::StartsWith(imported.status().message(), "input 'x'"))
          << i << ": " << imported.status();
      EXPECT_FALSE(absl::StrContains(imported.status().message(), "\n")) << i;
    }
  }
  EXPECT_LT(ok, 2000);
}

}  // namespace
}  // namespace tandem::onnx_import
