// The ONNX importer on hand-made models: what each op becomes (a linear layer, batch
// norm's buffers, values known at import), that unsupported nodes are all named in one
// line, and, on hostile input, that every truncation and thousands of byte mutations of a
// valid model give an error naming the file, never a crash or a hang.

#include "frontend/onnx/importer.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontend/onnx/export.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "tests/onnx/model_builder.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::onnx_import {
namespace {

using testing::TempDir;

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

/// Errors are one line, but for the report of refused nodes (refusals.h): its lines after
/// the first are indented two spaces, one per op type.
bool isOneLineOrARefusalList(const absl::Status& s) {
  const absl::string_view m = s.message();
  if (!absl::StrContains(m, "\n")) return true;
  if (!absl::IsUnimplemented(s)) return false;
  for (size_t at = m.find('\n'); at != absl::string_view::npos; at = m.find('\n', at + 1))
    if (m.substr(at + 1, 2) != "  ") return false;
  return true;
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
    if (!ir::isSource(n->op())) ops.push_back(n->op());
  return ops;
}

// PyTorch's eval-mode export merges initializers of equal values: a fresh model's batch
// norm bias and running mean (zeros) become one, the mean read through an Identity. They
// stay two variables, a weight and a buffer, each with the merged values.
TEST(OnnxImport, InitializersMergedByValueStayTwoVariables) {
  onnx::ModelProto m = sampleModel();
  onnx::GraphProto* g = m.mutable_graph();
  for (int i = 0; i < g->initializer_size(); ++i)
    if (g->initializer(i).name() == "bn.running_mean") {
      g->mutable_initializer()->DeleteSubrange(i, 1);
      break;
    }
  node(g, "Identity", "Identity_9", {"bn.bias"}, {"bn.running_mean"});
  // The Identity first: the graph is in topological order.
  for (int i = g->node_size() - 1; i > 0; --i) g->mutable_node()->SwapElements(i, i - 1);
  auto imported = importBytes(bytesOf(m));
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ir::Module& mod = *imported->module;
  EXPECT_TRUE(ir::verifyModule(mod).ok()) << ir::verifyModule(mod);
  const ir::Var* bias = mod.findVar("bn.bias");
  const ir::Var* mean = mod.findVar("bn.running_mean");
  ASSERT_NE(bias, nullptr);
  ASSERT_NE(mean, nullptr);
  EXPECT_EQ(bias->role, ir::VarRole::kParam);
  EXPECT_EQ(mean->role, ir::VarRole::kBuffer);
  EXPECT_EQ(imported->values.at("bn.running_mean"), imported->values.at("bn.bias"));
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
  node(g, "Hardmax", "Hardmax_6", {"y"}, {"e"});
  auto imported = importBytes(bytesOf(m));
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(std::string(imported.status().message()),
            "ONNX model 'm.onnx': Tandem does not support 2 of its 7 nodes, of 2 op types:\n"
            "  Elu (1 node): 'Relu_2'\n"
            "  Hardmax (1 node): 'Hardmax_6'");
}

/// x [batch,4,6,6] through `convs` dilated convolutions (dilations 2, which Tandem refuses)
/// with a Relu after each, then an Elu (no converter), a MaxPool of a 2x3 kernel (refused
/// for its use) and another Elu: refusals of three op types, the first early.
onnx::ModelProto manyRefusals(int convs, int64_t batch) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("many");
  *g->add_input() = floatInput("x", {batch, 4, 6, 6});
  std::string at = "x";
  for (int i = 0; i < convs; ++i) {
    const std::string w = absl::StrCat("w", i), c = absl::StrCat("c", i), r = absl::StrCat("r", i);
    *g->add_initializer() = floats(w, {4, 4, 1, 1}, 0.5f);
    intsAttr(node(g, "Conv", absl::StrCat("conv", i), {at, w}, {c}), "dilations", {2, 2});
    node(g, "Relu", absl::StrCat("relu", i), {c}, {r});
    at = r;
  }
  node(g, "Elu", "elu0", {at}, {"e0"});
  onnx::NodeProto* pool = node(g, "MaxPool", "pool", {"e0"}, {"p"});
  intsAttr(pool, "kernel_shape", {2, 3});
  intsAttr(pool, "pads", {0, 0, 1, 1});  // SAME_UPPER's: padded at the ends only
  node(g, "Elu", "", {"p"}, {"e1"});
  *g->add_output() = floatInput("e1", {batch, 4, 6, 5});
  return m;
}

// Issue 40: every node is checked, also past the first refused one (a refused node's
// results are stand-ins of the shapes ONNX's inference gives), and the report is one
// line per op type: efficientnet_b0's 16 grouped convolutions were "1 node".
TEST(OnnxImport, EveryRefusedNodeIsFoundAndGroupedByOpType) {
  const std::string want =
      "ONNX model 'm.onnx': Tandem does not support 8 of its 13 nodes, of 3 op types:\n"
      "  Conv (5 nodes): 'conv0': dilations [2,2]; 'conv1': dilations [2,2]; 'conv2': dilations "
      "[2,2]; and 2 more\n"
      "  Elu (2 nodes): 'elu0', #12 (output 'e1')\n"
      "  MaxPool (1 node): 'pool': pads [0,0,1,1] (an axis padded unevenly at its two ends)";
  // The model's own batch, and one it leaves open (its shapes inferred again at 4).
  for (int64_t batch : {4, -1}) {
    auto imported = importBytes(bytesOf(manyRefusals(5, batch)));
    ASSERT_FALSE(imported.ok()) << batch;
    EXPECT_EQ(imported.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_EQ(std::string(imported.status().message()), want) << batch;
  }
}

TEST(OnnxImport, PastTwentyOpTypesTheRestAreCounted) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("custom");
  *g->add_input() = floatInput("x", {2, 3});
  std::string at = "x";
  for (int i = 0; i < 23; ++i) {
    onnx::NodeProto* n =
        node(g, absl::StrCat("Custom", i), absl::StrCat("n", i), {at}, {absl::StrCat("v", i)});
    n->set_domain("tandem.test");
    at = absl::StrCat("v", i);
  }
  *g->add_output() = floatInput(at, {2, 3});
  m.add_opset_import()->set_domain("tandem.test");
  m.mutable_opset_import(1)->set_version(1);
  auto model = parseOnnxModel(bytesOf(m), "m.onnx");
  ASSERT_TRUE(model.ok()) << model.status();
  auto imported = importModel(**model, {});
  ASSERT_FALSE(imported.ok());
  const std::string text(imported.status().message());
  EXPECT_TRUE(absl::StartsWith(
      text,
      "ONNX model 'm.onnx': Tandem does not support 23 of its 23 nodes, of 23 op types:\n"
      "  Custom0 of domain 'tandem.test' (1 node): 'n0'\n"))
      << text;
  EXPECT_TRUE(absl::EndsWith(text,
                             "\n  Custom19 of domain 'tandem.test' (1 node): 'n19'\n"
                             "  and 3 more op types (3 nodes)"))
      << text;
}

// Every op ir/ops.td maps one to one (`onnx NAME SINCE..`, softsign among them) is read
// through the converter generated from the spec: its ONNX op becomes exactly that op.
TEST(OnnxImport, SpecMappedOpsImportAsTheirOp) {
  size_t mapped = 0;
  for (const ir::OpInfo& info : ir::allOps()) {
    if (info.onnx == nullptr) continue;
    ++mapped;
    onnx::ModelProto m;
    m.set_ir_version(8);
    // The op's first opset, or 13 where older (HardSwish is 14's).
    m.add_opset_import()->set_version(std::max(13, info.onnx->since));
    onnx::GraphProto* g = m.mutable_graph();
    g->set_name("one_to_one");
    *g->add_input() = floatInput("x", {2, 3});
    node(g, std::string(info.onnx->name), "n0", {"x"}, {"y"});
    *g->add_output() = floatInput("y", {2, 3});
    auto imported = importBytes(bytesOf(m));
    ASSERT_TRUE(imported.ok()) << info.name << ": " << imported.status();
    const ir::Graph* infer = imported->module->graph(kInferGraph);
    ASSERT_NE(infer, nullptr);
    EXPECT_EQ(opsOf(*infer), std::vector<ir::Op>{info.op}) << info.name;
  }
  EXPECT_GE(mapped, 5u);  // relu, sigmoid, tanh, softsign, hardswish
}

// MobileNet's relu6 and hardsigmoid have no one-to-one ONNX op: they export as Clip
// (bounds 0 and 6 as initializers) and HardSigmoid (alpha 1/6, beta 1/2), as
// torch.onnx.export writes nn.ReLU6 and nn.Hardsigmoid, and read back as the same op.
TEST(OnnxImport, Relu6AndHardsigmoidGoThroughClipAndHardSigmoidAndBack) {
  for (const auto& [op, onnx_op] : {std::pair{ir::Op::kRelu6, "Clip"},
                                    std::pair{ir::Op::kHardsigmoid, "HardSigmoid"}}) {
    const std::string name(ir::opInfo(op).name);
    auto m = ir::parseModule(absl::StrCat("module @m {\ngraph @g(%x: f32[2,3]) {\n  %y = ", name,
                                          "(%x) : f32[2,3]\n  return %y\n}\n}\n"));
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    const ir::Graph& g = *(*m)->graph("g");
    auto proto =
        onnx_export::exportGraph(g, {{g.findValue("x"), "x"}}, {{g.findValue("y"), "y"}}, {});
    ASSERT_TRUE(proto.ok()) << name << ": " << proto.status();
    ASSERT_EQ(proto->graph().node_size(), 1) << name;
    EXPECT_EQ(proto->graph().node(0).op_type(), onnx_op);
    onnx::ModelProto model;
    model.set_ir_version(8);
    model.add_opset_import()->set_version(17);
    *model.mutable_graph() = proto->graph();
    auto imported = importBytes(bytesOf(model));
    ASSERT_TRUE(imported.ok()) << name << ": " << imported.status();
    EXPECT_EQ(opsOf(*imported->module->graph(kInferGraph)), std::vector<ir::Op>{op}) << name;
  }
}

// Issue 40: the .tir's outputs carry the model's output names (as identifiers), so that
// `tandem run` names output_K.pb's tensors after them, whatever the nodes are called.
TEST(OnnxImport, OutputsKeepTheModelsNames) {
  onnx::ModelProto m = sampleModel();
  onnx::GraphProto* g = m.mutable_graph();
  g->mutable_output(0)->set_name("logits:0");
  g->mutable_node(5)->set_output(0, "logits:0");
  // A node named as the second output would be, computing another value.
  g->mutable_node(2)->set_name("probs");
  // Two outputs of one value (through Identity): each its own.
  node(g, "Identity", "Identity_6", {"logits:0"}, {"probs"});
  *g->add_output() = floatInput("probs", {-1, 3});
  auto imported = importBytes(bytesOf(m));
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ir::Graph& infer = *imported->module->graph(kInferGraph);
  ASSERT_EQ(infer.outputs().size(), 2u);
  EXPECT_EQ(infer.outputs()[0]->name(), "logits_0");
  EXPECT_EQ(infer.outputs()[1]->name(), "probs");
  EXPECT_NE(infer.outputs()[0], infer.outputs()[1]);
  EXPECT_TRUE(ir::verifyModule(*imported->module).ok()) << ir::verifyModule(*imported->module);
  EXPECT_EQ(imported->outputs, (std::vector<std::string>{"logits:0", "probs"}));
}

// Issue 40: strides, dilations, kernels and groups ONNX's shape inference divides or
// multiplies by are checked before it runs (a zero stride killed it with SIGFPE), one line
// naming the node; a pooling window of padding only is refused too.
TEST(OnnxImport, WindowAttributesAreCheckedBeforeShapeInference) {
  struct Case {
    int node;  // in sampleModel: 0 Conv_0, 3 MaxPool_3
    const char* attr;
    std::vector<int64_t> value;
    std::string want;
  };
  const std::vector<Case> cases = {
      {0,
       "strides",
       {0, 0},
       "node 'Conv_0' (Conv): attribute 'strides' is [0,0]; every stride "
       "must be >= 1"},
      {0,
       "strides",
       {1, 0},
       "node 'Conv_0' (Conv): attribute 'strides' is [1,0]; every stride "
       "must be >= 1"},
      {3,
       "strides",
       {0, 2},
       "node 'MaxPool_3' (MaxPool): attribute 'strides' is [0,2]; every "
       "stride must be >= 1"},
      {0,
       "dilations",
       {1, -1},
       "node 'Conv_0' (Conv): attribute 'dilations' is [1,-1]; every "
       "dilation must be >= 1"},
      {0,
       "kernel_shape",
       {0, 3},
       "node 'Conv_0' (Conv): attribute 'kernel_shape' is [0,3]; "
       "every kernel size must be >= 1"},
      {0,
       "pads",
       {-1, 0, 0, 0},
       "node 'Conv_0' (Conv): attribute 'pads' is [-1,0,0,0]; every "
       "pad must be >= 0"},
      {3,
       "pads",
       {0, 2, 0, 0},
       "node 'MaxPool_3' (MaxPool): attribute 'pads' is [0,2,0,0] "
       "with kernel_shape [2,2]; a window would hold padding only "
       "(each pad must be less than the window's extent, 2 on axis "
       "1)"},
  };
  for (const Case& c : cases) {
    onnx::ModelProto m = sampleModel();
    onnx::NodeProto* n = m.mutable_graph()->mutable_node(c.node);
    for (int i = 0; i < n->attribute_size(); ++i)
      if (n->attribute(i).name() == c.attr) n->mutable_attribute()->DeleteSubrange(i, 1);
    intsAttr(n, c.attr, c.value);
    auto model = parseOnnxModel(bytesOf(m), "m.onnx");
    ASSERT_FALSE(model.ok()) << c.want;
    EXPECT_EQ(model.status().message(), "ONNX model 'm.onnx': " + c.want);
  }
  for (const auto& [op, attr] : {std::pair{"Conv", "group"}, std::pair{"AveragePool", "strides"}}) {
    onnx::ModelProto m = sampleModel();
    onnx::NodeProto* n = m.mutable_graph()->mutable_node(op == std::string("Conv") ? 0 : 3);
    n->set_op_type(op);
    if (attr == std::string("group")) {
      intAttr(n, "group", 0);
    } else {
      n->mutable_attribute()->DeleteSubrange(1, 1);  // MaxPool_3's strides
      intsAttr(n, "strides", {0, 0});
    }
    auto model = parseOnnxModel(bytesOf(m), "m.onnx");
    ASSERT_FALSE(model.ok()) << op;
    EXPECT_TRUE(absl::StrContains(model.status().message(),
                                  absl::StrCat("(", op, "): attribute '", attr, "' is ")))
        << model.status();
  }
}

// Issue 40: where the model leaves a dimension open, the message gives the remedy of the
// command that imports (each passes its own).
TEST(OnnxImport, AnOpenDimensionNamesTheCommandsRemedy) {
  auto model = parseOnnxModel(bytesOf(sampleModel()), "m.onnx");
  ASSERT_TRUE(model.ok()) << model.status();
  auto imported = importModel(**model, {.open_dimension_remedy = "give --batch N"});
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(std::string(imported.status().message()),
            "ONNX model 'm.onnx': input 'x' leaves dimension 0 open; give --batch N");
  // A given shape that still leaves it open is no shape.
  imported = importModel(
      **model, {.input_shapes = {{"x", {-1, 1, 6, 6}}}, .open_dimension_remedy = "give the input"});
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(std::string(imported.status().message()),
            "ONNX model 'm.onnx': input 'x' leaves dimension 0 open; give the input");
}

TEST(OnnxImport, AnUnsupportedUseOfAnOpNamesTheNodeAndWhy) {
  onnx::ModelProto m = sampleModel();
  onnx::NodeProto* pool = m.mutable_graph()->mutable_node(3);
  onnx::AttributeProto* dilations = pool->add_attribute();
  dilations->set_name("dilations");
  dilations->set_type(onnx::AttributeProto::INTS);
  dilations->add_ints(1);
  dilations->add_ints(2);
  auto imported = importBytes(bytesOf(m));
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(std::string(imported.status().message()),
            "ONNX model 'm.onnx': Tandem does not support 1 node: node 'MaxPool_3' (MaxPool): "
            "dilations [1,2] (1 node reading its results could not be checked)");
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

// Issue 44: a Pad of zeros read only by convolutions and average pools becomes their own
// padding (PyTorch exports AvgPool2d(padding=1) and ZeroPad2d so); its pads computed at
// import by PyTorch's arithmetic (a Slice of step -1 and a Transpose of known integers, as
// ZeroPad2d writes them). A Pad something else reads is the pad op.
TEST(OnnxImport, APadOfZerosBecomesItsReadersPadding) {
  auto intsConstant = [](onnx::GraphProto* g, const std::string& out, std::vector<int64_t> dims,
                         std::vector<int64_t> values) {
    onnx::NodeProto* n = node(g, "Constant", out, {}, {out});
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) a->mutable_t()->add_dims(d);
    for (int64_t v : values) a->mutable_t()->add_int64_data(v);
  };
  auto model = [&](const std::string& reader) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    onnx::GraphProto* g = m.mutable_graph();
    g->set_name("pad");
    *g->add_input() = floatInput("x", {2, 4, 6, 6});
    // [[1,1],[1,1],[0,0],[0,0]] reversed along axis 0 and transposed: [0,0,1,1, 0,0,1,1].
    intsConstant(g, "pairs", {4, 2}, {1, 1, 1, 1, 0, 0, 0, 0});
    intsConstant(g, "start", {1}, {-1});
    intsConstant(g, "end", {1}, {-1000});
    intsConstant(g, "axis", {1}, {0});
    intsConstant(g, "step", {1}, {-1});
    node(g, "Slice", "reverse", {"pairs", "start", "end", "axis", "step"}, {"reversed"});
    onnx::NodeProto* t = node(g, "Transpose", "swap", {"reversed"}, {"swapped"});
    intsAttr(t, "perm", {1, 0});
    intsConstant(g, "flat", {1}, {-1});
    node(g, "Reshape", "flatten", {"swapped", "flat"}, {"pads"});
    node(g, "Pad", "pad", {"x", "pads"}, {"padded"});
    if (reader == "AveragePool") {
      intsAttr(node(g, "AveragePool", "pool", {"padded"}, {"y"}), "kernel_shape", {3, 3});
    } else if (reader == "Conv") {
      *g->add_initializer() = floats("w", {4, 1, 3, 3}, 0.1f);
      intAttr(node(g, "Conv", "conv", {"padded", "w"}, {"y"}), "group", 4);
    } else {
      node(g, "Relu", "relu", {"padded"}, {"y"});
    }
    *g->add_output() = floatInput("y", {2, 4, reader == "Relu" ? 8 : 6, reader == "Relu" ? 8 : 6});
    return m;
  };
  for (const std::string reader : {"AveragePool", "Conv"}) {
    auto imported = importBytes(bytesOf(model(reader)));
    ASSERT_TRUE(imported.ok()) << reader << ": " << imported.status();
    const ir::Graph& g = *imported->module->graph(kInferGraph);
    const ir::Op op = reader == "Conv" ? ir::Op::kConv2d : ir::Op::kAvgPool2d;
    ASSERT_EQ(opsOf(g), std::vector<ir::Op>{op}) << reader;
    for (const auto& n : g.nodes())
      if (n->op() == op) {
        EXPECT_EQ(n->intAttr("pad"), 1) << reader;
        EXPECT_EQ(n->operand(0)->type().shape, (ir::Shape{2, 4, 6, 6})) << reader;
      }
  }
  // Read by another op: not folded, the pad op.
  auto relu = importBytes(bytesOf(model("Relu")));
  ASSERT_TRUE(relu.ok()) << relu.status();
  EXPECT_EQ(opsOf(*relu->module->graph(kInferGraph)),
            (std::vector<ir::Op>{ir::Op::kPad, ir::Op::kRelu}));
}

// Issue 44: windows whose height and width differ (a Conv of W [5,4,3,2] at strides
// [2,1] and pads [1,0,1,0]: per axis, the same at both ends) become one conv2d with hw
// attributes; 1-D windows over [N,C,L] run as [N,C,L,1] between two reshapes.
TEST(OnnxImport, WindowsDifferPerAxisAndOneDWindowsRunAsTwoD) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("windows");
  *g->add_input() = floatInput("x", {2, 4, 7, 6});
  *g->add_initializer() = floats("w", {5, 4, 3, 2}, 0.1f);
  onnx::NodeProto* conv = node(g, "Conv", "conv", {"x", "w"}, {"c"});
  intsAttr(conv, "strides", {2, 1});
  intsAttr(conv, "pads", {1, 0, 1, 0});
  onnx::NodeProto* pool = node(g, "AveragePool", "pool", {"c"}, {"p"});
  intsAttr(pool, "kernel_shape", {1, 3});
  intsAttr(pool, "strides", {1, 2});
  *g->add_output() = floatInput("p", {2, 5, 4, 2});
  *g->add_input() = floatInput("s", {2, 3, 10});
  *g->add_initializer() = floats("v", {6, 3, 3}, 0.1f);
  onnx::NodeProto* conv1d = node(g, "Conv", "conv1d", {"s", "v"}, {"t"});
  intsAttr(conv1d, "strides", {2});
  intsAttr(conv1d, "pads", {1, 1});
  onnx::NodeProto* pool1d = node(g, "MaxPool", "pool1d", {"t"}, {"u"});
  intsAttr(pool1d, "kernel_shape", {2});
  *g->add_output() = floatInput("u", {2, 6, 4});
  auto imported = importBytes(bytesOf(m));
  ASSERT_TRUE(imported.ok()) << imported.status();
  const std::string text = ir::printModule(*imported->module);
  EXPECT_TRUE(absl::StrContains(text, "conv2d(%x, %w) {stride=[2,1], pad=[1,0]} : f32[2,5,4,5]"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "{kernel=[1,3], stride=[1,2], pad=0} : f32[2,5,4,2]"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "{stride=[2,1], pad=[1,0]} : f32[2,6,5,1]")) << text;
  EXPECT_TRUE(absl::StrContains(text, "reshape(%v) {shape=[6,3,3,1]}")) << text;
  EXPECT_TRUE(absl::StrContains(text, "{kernel=[2,1], stride=1, pad=0} : f32[2,6,4,1]")) << text;
  const ir::Graph& infer = *imported->module->graph(kInferGraph);
  EXPECT_EQ(opsOf(infer),
            (std::vector<ir::Op>{ir::Op::kConv2d, ir::Op::kAvgPool2d, ir::Op::kReshape,
                                 ir::Op::kReshape, ir::Op::kConv2d, ir::Op::kReshape,
                                 ir::Op::kReshape, ir::Op::kMaxPool2d, ir::Op::kReshape}));
}

// Issue 44: a Slice of step k from a start below k to the end of an axis k divides (swin's
// patch merging, x[:, 1::2]) is the axis seen as [dim / k, k] and one column of it; other
// steps at run time are refused, saying which ones are read.
TEST(OnnxImport, AStridedSliceIsAReshapeAndASlice) {
  auto model = [](int64_t step) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    onnx::GraphProto* g = m.mutable_graph();
    g->set_name("strided");
    *g->add_input() = floatInput("x", {2, 4, 6, 6});
    for (const auto& [name, v] : std::vector<std::pair<std::string, int64_t>>{
             {"starts", 1}, {"ends", 1000}, {"axes", 2}, {"steps", step}}) {
      onnx::NodeProto* n = node(g, "Constant", name, {}, {name});
      auto* a = n->add_attribute();
      a->set_name("value_ints");
      a->set_type(onnx::AttributeProto::INTS);
      a->add_ints(v);
    }
    node(g, "Slice", "slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
    *g->add_output() = floatInput("y", {2, 4, 6 / step, 6});
    return m;
  };
  auto imported = importBytes(bytesOf(model(2)));
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ir::Graph& g = *imported->module->graph(kInferGraph);
  EXPECT_EQ(opsOf(g),
            (std::vector<ir::Op>{ir::Op::kReshape, ir::Op::kSliceAxis, ir::Op::kReshape}));
  for (const auto& n : g.nodes())
    if (n->op() == ir::Op::kSliceAxis) {
      EXPECT_EQ(n->operand(0)->type().shape, (ir::Shape{2, 4, 3, 2, 6}));
      EXPECT_EQ(n->intAttr("axis"), 3);
      EXPECT_EQ(n->intAttr("start"), 1);
      EXPECT_EQ(n->intAttr("end"), 2);
    }
  auto refused = importBytes(bytesOf(model(4)));  // 4 does not divide 6
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(),
                                "node 'slice' (Slice): step 4 (slice_axis takes every element; a "
                                "step that divides the axis, from a start below it to the end, "
                                "is read as a reshape)"))
      << refused.status();
}

// --- patterns PyTorch writes for ops ONNX lacks, and the class token's shape arithmetic ---

onnx::ModelProto emptyModel(const std::string& name, int64_t opset = 14) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(opset);
  m.mutable_graph()->set_name(name);
  return m;
}

/// A Constant node `name` whose output `name` is a float scalar (PyTorch's constants).
void scalarConstant(onnx::GraphProto* g, const std::string& name, float v) {
  auto* a = node(g, "Constant", name, {}, {name})->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  a->mutable_t()->add_float_data(v);
}

/// A Constant node `name` whose output `name` is an int64 tensor (a scalar when dims is
/// empty and there is one value).
void intConstant(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> v,
                 std::vector<int64_t> dims) {
  auto* a = node(g, "Constant", name, {}, {name})->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) a->mutable_t()->add_dims(d);
  for (int64_t x : v) a->mutable_t()->add_int64_data(x);
}

/// nn.GELU() as torch.onnx.export writes it at opsets up to 17: x/2 (1 + erf(x / sqrt 2))
/// as Div, Erf, Add, Mul, Mul, on x [N, 5]; `divisor` is sqrt 2's float.
onnx::ModelProto geluModel(float divisor = 1.4142135381698608f) {
  onnx::ModelProto m = emptyModel("gelu");
  onnx::GraphProto* g = m.mutable_graph();
  *g->add_input() = floatInput("x", {-1, 5});
  scalarConstant(g, "sqrt2", divisor);
  node(g, "Div", "div", {"x", "sqrt2"}, {"d"});
  node(g, "Erf", "erf", {"d"}, {"e"});
  scalarConstant(g, "one", 1);
  node(g, "Add", "add", {"e", "one"}, {"a"});
  node(g, "Mul", "mul", {"x", "a"}, {"m"});
  scalarConstant(g, "half", 0.5f);
  node(g, "Mul", "mul_1", {"m", "half"}, {"y"});
  *g->add_output() = floatInput("y", {-1, 5});
  return m;
}

// A known scalar and a known one-element list fold to the list's shape, [1], whichever
// comes first (numpy's broadcast; ONNX's expanded LayerNormalization computes Size(Shape)
// - [axis] so, which the oracle of inferred shapes refused as [] once every node was
// checked).
TEST(OnnxImport, AScalarAndAOneElementListFoldToTheList) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(14);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("fold");
  *g->add_input() = floatInput("x", {2, 3});
  node(g, "Shape", "s", {"x"}, {"shape"});
  node(g, "Size", "rank", {"shape"}, {"r"});
  onnx::NodeProto* one = node(g, "Constant", "c1", {}, {"one"});
  auto* a = one->add_attribute();
  a->set_name("value_ints");
  a->set_type(onnx::AttributeProto::INTS);
  a->add_ints(1);
  node(g, "Sub", "sub", {"r", "one"}, {"n"});        // [] - [1]: [1] holding 1
  node(g, "ConstantOfShape", "ones", {"n"}, {"o"});  // [0.] of shape [1]
  node(g, "Add", "add", {"x", "o"}, {"y"});
  *g->add_output() = floatInput("y", {2, 3});
  auto imported = importBytes(bytesOf(m));
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(imported->module->graph(kInferGraph)->outputs()[0]->type(),
            (ir::TensorType{ir::DType::kF32, {2, 3}}));
}

TEST(OnnxImport, GeluWrittenOutBecomesTheGeluOp) {
  auto imported = importBytes(bytesOf(geluModel()));
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ir::Graph& g = *imported->module->graph(kInferGraph);
  EXPECT_EQ(opsOf(g), std::vector<ir::Op>{ir::Op::kGelu});
  EXPECT_TRUE(ir::verifyModule(*imported->module).ok());
  EXPECT_EQ(g.outputs()[0]->type(), (ir::TensorType{ir::DType::kF32, {4, 5}}));
  // Named as the pattern's last node.
  EXPECT_EQ(g.outputs()[0]->def()->location(), "m.onnx#7");

  // The other orders exporters write: x * (1/sqrt 2), and (1 + erf) * (x * 0.5).
  onnx::ModelProto m = geluModel();
  onnx::GraphProto* graph = m.mutable_graph();
  graph->mutable_node(0)->mutable_attribute(0)->mutable_t()->set_float_data(0, float(M_SQRT1_2));
  graph->mutable_node(1)->set_op_type("Mul");
  graph->mutable_node(5)->set_input(0, "x");  // mul: x * 0.5 ...
  graph->mutable_node(5)->set_input(1, "half");
  graph->mutable_node(5)->set_output(0, "h");
  graph->mutable_node(7)->set_input(0, "a");  // mul_1: (1 + erf) * h
  graph->mutable_node(7)->set_input(1, "h");
  // half's Constant must come before its reader.
  graph->mutable_node()->SwapElements(5, 6);
  auto other = importBytes(bytesOf(m));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(opsOf(*other->module->graph(kInferGraph)), std::vector<ir::Op>{ir::Op::kGelu});
}

// An Erf that is not nn.GELU's pattern runs as the erf op, the pieces around it as theirs.
TEST(OnnxImport, AnErfOutsideTheGeluPatternRunsAsTheErfOp) {
  auto contains = [](const ir::Graph& g, ir::Op op) {
    const std::vector<ir::Op> ops = opsOf(g);
    return std::find(ops.begin(), ops.end(), op) != ops.end();
  };
  // x / 2 is not x / sqrt 2: not nn.GELU.
  auto imported = importBytes(bytesOf(geluModel(2.0f)));
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_TRUE(contains(*imported->module->graph(kInferGraph), ir::Op::kErf));
  EXPECT_FALSE(contains(*imported->module->graph(kInferGraph), ir::Op::kGelu));
  // The pattern's inside read elsewhere (an output of the graph): not fused either.
  onnx::ModelProto m = geluModel();
  *m.mutable_graph()->add_output() = floatInput("e", {-1, 5});
  imported = importBytes(bytesOf(m));
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_TRUE(contains(*imported->module->graph(kInferGraph), ir::Op::kErf));
  // The pattern itself is one gelu.
  imported = importBytes(bytesOf(geluModel()));
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_TRUE(contains(*imported->module->graph(kInferGraph), ir::Op::kGelu));
  EXPECT_FALSE(contains(*imported->module->graph(kInferGraph), ir::Op::kErf));
}

// Issue 44's activations: x * Sigmoid(x) is one silu (a Sigmoid read otherwise stays
// sigmoid), a Clip of any known bounds is clip (0 and 6 stay relu6, an open bound is
// infinite), and a HardSigmoid of other slopes is clip(alpha x + beta, 0, 1).
TEST(OnnxImport, SiluClipAndHardSigmoidOfAnySlope) {
  onnx::ModelProto m = emptyModel("acts", 13);
  onnx::GraphProto* g = m.mutable_graph();
  *g->add_input() = floatInput("x", {-1, 6});
  node(g, "Sigmoid", "sig", {"x"}, {"s"});
  node(g, "Mul", "silu", {"x", "s"}, {"a"});
  node(g, "Sigmoid", "gate", {"a"}, {"t"});
  node(g, "Mul", "gated", {"t", "x"}, {"b"});  // the Sigmoid's input is a, not x: no silu
  scalarConstant(g, "lo", -1.5f);
  scalarConstant(g, "hi", 2.0f);
  node(g, "Clip", "clip", {"b", "lo", "hi"}, {"c"});
  node(g, "Clip", "floor_only", {"c", "lo"}, {"d"});
  onnx::NodeProto* hs = node(g, "HardSigmoid", "hs", {"d"}, {"y"});
  auto* alpha = hs->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(0.25f);
  *g->add_output() = floatInput("y", {-1, 6});
  auto imported = importBytes(bytesOf(m));
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ir::Graph& infer = *imported->module->graph(kInferGraph);
  EXPECT_EQ(opsOf(infer),
            (std::vector<ir::Op>{ir::Op::kSilu, ir::Op::kSigmoid, ir::Op::kMulBcast, ir::Op::kClip,
                                 ir::Op::kClip, ir::Op::kScale, ir::Op::kAddBcast, ir::Op::kClip}));
  const std::string text = ir::printModule(*imported->module);
  EXPECT_TRUE(absl::StrContains(text, "{min=-1.5, max=2}")) << text;
  EXPECT_TRUE(absl::StrContains(text, "{min=-1.5, max=inf}")) << text;
  EXPECT_TRUE(absl::StrContains(text, "{min=0, max=1}")) << text;
  EXPECT_TRUE(absl::StrContains(text, "scale(%floor_only) {factor=0.25}")) << text;
}

// Issue 44: a Pad that no convolution or pooling takes into its own padding is the pad op
// (constant of any value, reflect, edge); a crop (negative pad) and a reflection past the
// edge are refused naming them.
TEST(OnnxImport, APadIsThePadOpInEveryMode) {
  auto model = [](const std::string& mode, std::vector<int64_t> pads) {
    onnx::ModelProto m = emptyModel("pad", 13);
    onnx::GraphProto* g = m.mutable_graph();
    *g->add_input() = floatInput("x", {-1, 3, 4, 5});
    intConstant(g, "pads", pads, {8});
    onnx::NodeProto* p = node(g, "Pad", "pad", {"x", "pads"}, {"y"});
    auto* a = p->add_attribute();
    a->set_name("mode");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(mode);
    onnx::ValueInfoProto* y = g->add_output();  // its shape left to ONNX's inference
    y->set_name("y");
    y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (const char* d : {"n", "c", "h", "w"})
      y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param(d);
    return m;
  };
  for (const std::string mode : {"constant", "reflect", "edge"}) {
    auto imported = importBytes(bytesOf(model(mode, {0, 1, 1, 2, 0, 0, 2, 1})));
    ASSERT_TRUE(imported.ok()) << mode << ": " << imported.status();
    const std::string text = ir::printModule(*imported->module);
    EXPECT_TRUE(absl::StrContains(
        text, absl::StrCat("pad(%x) {pads=[0,1,1,2,0,0,2,1], mode=", mode, "} : f32[4,4,7,8]")))
        << text;
  }
  auto crop = importBytes(bytesOf(model("constant", {0, 0, -1, 0, 0, 0, 0, 0})));
  ASSERT_FALSE(crop.ok());
  EXPECT_TRUE(absl::StrContains(crop.status().message(),
                                "node 'pad' (Pad): pads [0,0,-1,0,0,0,0,0] (a negative pad crops; "
                                "Tandem pads only)"))
      << crop.status();
  auto far = importBytes(bytesOf(model("reflect", {0, 0, 4, 0, 0, 0, 0, 0})));
  ASSERT_FALSE(far.ok());
  EXPECT_TRUE(absl::StrContains(far.status().message(),
                                "reflect padding [0,0,4,0,0,0,0,0] of X [4,3,4,5] (each pad below "
                                "its axis' extent: one reflection)"))
      << far.status();
}

// Issue 44: an Einsum that is a batched matrix product is matmul with the transposes its
// letters say (maxvit's attention: q k^T, then p v); any other equation is refused naming
// it.
TEST(OnnxImport, AnEinsumThatIsABatchedProductIsMatmul) {
  auto model = [](const std::string& first) {
    onnx::ModelProto m = emptyModel("einsum", 13);
    onnx::GraphProto* g = m.mutable_graph();
    *g->add_input() = floatInput("q", {2, 3, 4, 5});
    *g->add_input() = floatInput("k", {2, 3, 6, 5});
    auto equation = [](onnx::NodeProto* n, const std::string& eq) {
      auto* a = n->add_attribute();
      a->set_name("equation");
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s(eq);
    };
    equation(node(g, "Einsum", "scores", {"q", "k"}, {"s"}), first);
    equation(node(g, "Einsum", "mix", {"s", "k"}, {"y"}), "B H I J, B H J D -> B H I D");
    *g->add_output() = floatInput("y", {2, 3, 4, 5});
    return m;
  };
  auto imported = importBytes(bytesOf(model("bhid,bhjd->bhij")));
  ASSERT_TRUE(imported.ok()) << imported.status();
  const std::string text = ir::printModule(*imported->module);
  EXPECT_TRUE(absl::StrContains(text, "matmul(%q, %k) {trans_b=true} : f32[2,3,4,6]")) << text;
  EXPECT_TRUE(absl::StrContains(text, "matmul(%scores, %k) : f32[2,3,4,5]")) << text;
  auto refused = importBytes(bytesOf(model("bhid,bhjd->bhji")));
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(),
                                "node 'scores' (Einsum): equation 'bhid,bhjd->bhji' (Tandem reads "
                                "an Einsum of two operands that is a batched matrix product"))
      << refused.status();
}

/// nn.LayerNorm(4) as torch.onnx.export writes it before opset 17, on x [N, 3, 4].
onnx::ModelProto layerNormModel() {
  onnx::ModelProto m = emptyModel("ln");
  onnx::GraphProto* g = m.mutable_graph();
  *g->add_input() = floatInput("x", {-1, 3, 4});
  *g->add_initializer() = floats("ln.weight", {4}, 0.9f);
  *g->add_initializer() = floats("ln.bias", {4}, -0.1f);
  intsAttr(node(g, "ReduceMean", "mean", {"x"}, {"m"}), "axes", {-1});
  node(g, "Sub", "sub", {"x", "m"}, {"d"});
  scalarConstant(g, "two", 2);
  node(g, "Pow", "pow", {"d", "two"}, {"p"});
  intsAttr(node(g, "ReduceMean", "var", {"p"}, {"v"}), "axes", {-1});
  scalarConstant(g, "eps", 1e-5f);
  node(g, "Add", "add", {"v", "eps"}, {"ve"});
  node(g, "Sqrt", "sqrt", {"ve"}, {"s"});
  node(g, "Div", "div", {"d", "s"}, {"n"});
  node(g, "Mul", "mul", {"n", "ln.weight"}, {"w"});
  node(g, "Add", "add_1", {"w", "ln.bias"}, {"y"});
  *g->add_output() = floatInput("y", {-1, 3, 4});
  return m;
}

TEST(OnnxImport, LayerNormWrittenOutBecomesTheLayerNormOp) {
  auto imported = importBytes(bytesOf(layerNormModel()));
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ir::Module& mod = *imported->module;
  EXPECT_TRUE(ir::verifyModule(mod).ok()) << ir::verifyModule(mod);
  const ir::Graph& g = *mod.graph(kInferGraph);
  // As rows of the normalized axis, and back.
  EXPECT_EQ(opsOf(g),
            (std::vector<ir::Op>{ir::Op::kReshape, ir::Op::kLayerNorm, ir::Op::kReshape}));
  for (const auto& n : g.nodes())
    if (n->op() == ir::Op::kLayerNorm) {
      EXPECT_NEAR(n->floatAttr("eps"), 1e-5, 1e-12);
      // gamma and beta are the initializers, trained as layer_norm's.
      EXPECT_EQ(n->operand(1)->name(), "ln.weight");
      EXPECT_EQ(n->operand(2)->name(), "ln.bias");
    }
  EXPECT_EQ(mod.findVar("ln.weight")->role, ir::VarRole::kParam);
  EXPECT_EQ(g.outputs()[0]->type(), (ir::TensorType{ir::DType::kF32, {4, 3, 4}}));

  // Over an axis that is not the last: named at the pattern's last node.
  onnx::ModelProto m = layerNormModel();
  for (int i : {0, 4}) m.mutable_graph()->mutable_node(i)->mutable_attribute(0)->set_ints(0, 1);
  *m.mutable_graph()->mutable_initializer(0) = floats("ln.weight", {3, 1}, 0.9f);
  *m.mutable_graph()->mutable_initializer(1) = floats("ln.bias", {3, 1}, -0.1f);
  imported = importBytes(bytesOf(m));
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(std::string(imported.status().message()),
            "ONNX model 'm.onnx': Tandem does not support 1 node: node 'add_1' (Add): a layer "
            "norm written out (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div) over axes [1] "
            "of a [4,3,4] input: Tandem's layer_norm normalizes the last axes");
}

TEST(OnnxImport, LayerNormalizationsInvStdDevIsBatchNormOfItsVariance) {
  // Opset 17's LayerNormalization with its Mean and InvStdDev outputs, over [2, 3, 4]'s
  // last two axes: InvStdDev = 1 / sqrt(var + eps) per row is batch_norm at inference of
  // ones with layer_norm's row variances as the running variance (no rsqrt op).
  onnx::ModelProto m = emptyModel("ln17", 17);
  onnx::GraphProto* g = m.mutable_graph();
  *g->add_input() = floatInput("x", {2, 3, 4});
  *g->add_initializer() = floats("w", {3, 4}, 0.9f);
  onnx::NodeProto* ln = node(g, "LayerNormalization", "ln", {"x", "w"}, {"y", "mean", "inv"});
  intAttr(ln, "axis", -2);
  for (const char* out : {"y", "mean", "inv"})
    *g->add_output() = floatInput(out, std::string(out) == "y" ? std::vector<int64_t>{2, 3, 4}
                                                               : std::vector<int64_t>{2, 1, 1});
  auto imported = importBytes(bytesOf(m));
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_TRUE(ir::verifyModule(*imported->module).ok()) << ir::verifyModule(*imported->module);
  const ir::Graph& graph = *imported->module->graph(kInferGraph);
  const ir::Node* bn = nullptr;
  for (const auto& n : graph.nodes())
    if (n->op() == ir::Op::kBatchNorm) bn = n.get();
  ASSERT_NE(bn, nullptr);
  EXPECT_FALSE(bn->boolAttr("training"));
  EXPECT_EQ(bn->operand(4)->def()->op(), ir::Op::kLayerNorm);  // its variance result
  EXPECT_EQ(bn->operand(4)->index(), 2);
  ASSERT_EQ(graph.outputs().size(), 3u);
  EXPECT_EQ(graph.outputs()[2]->type(), (ir::TensorType{ir::DType::kF32, {2, 1, 1}}));
}

// A layer norm written out whose inside is read elsewhere is no pattern: its Sqrt runs as
// the sqrt op and its Div as a product with the reciprocal.
TEST(OnnxImport, ASqrtOutsideTheLayerNormPatternRunsAsItsOps) {
  onnx::ModelProto m = layerNormModel();
  *m.mutable_graph()->add_output() = floatInput("d", {-1, 3, 4});
  auto imported = importBytes(bytesOf(m));
  ASSERT_TRUE(imported.ok()) << imported.status();
  const std::vector<ir::Op> ops = opsOf(*imported->module->graph(kInferGraph));
  for (ir::Op op : {ir::Op::kSqrt, ir::Op::kReciprocal, ir::Op::kMulBcast})
    EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << ir::opInfo(op).name;
  EXPECT_EQ(std::find(ops.begin(), ops.end(), ir::Op::kLayerNorm), ops.end());
}

/// ViT's class token as torch.onnx.export writes `cls.expand(x.shape[0], -1, -1)`, joined
/// to the tokens t [N,3,2] (the model's input here) and the class token taken back out:
/// Shape, Gather, Unsqueeze, Concat, Reshape, Shape, ConstantOfShape, Mul, Equal, Where,
/// Expand, Concat, Gather.
onnx::ModelProto classTokenModel() {
  onnx::ModelProto m = emptyModel("cls");
  onnx::GraphProto* g = m.mutable_graph();
  *g->add_input() = floatInput("t", {-1, 3, 2});
  *g->add_initializer() = floats("cls", {1, 1, 2}, 0.5f);
  node(g, "Shape", "shape", {"t"}, {"s"});
  intConstant(g, "zero", {0}, {});
  node(g, "Gather", "batch", {"s", "zero"}, {"n"});
  intConstant(g, "axes0", {0}, {1});
  node(g, "Unsqueeze", "unsqueeze", {"n", "axes0"}, {"n1"});
  intConstant(g, "minus1", {-1}, {1});
  intAttr(node(g, "Concat", "sizes", {"n1", "minus1", "minus1"}, {"sizes_out"}), "axis", 0);
  node(g, "Reshape", "flat", {"sizes_out", "minus1"}, {"want"});
  node(g, "Shape", "shape_1", {"want"}, {"rank"});
  auto* one = node(g, "ConstantOfShape", "ones", {"rank"}, {"o"})->add_attribute();
  one->set_name("value");
  one->set_type(onnx::AttributeProto::TENSOR);
  one->mutable_t()->set_data_type(onnx::TensorProto::INT64);
  one->mutable_t()->add_dims(1);
  one->mutable_t()->add_int64_data(1);
  intConstant(g, "minus1s", {-1}, {});
  node(g, "Mul", "neg", {"o", "minus1s"}, {"neg1"});
  node(g, "Equal", "is_keep", {"want", "neg1"}, {"keep"});
  node(g, "Where", "where", {"keep", "o", "want"}, {"target"});  // [N, 1, 1]
  node(g, "Expand", "expand", {"cls", "target"}, {"c"});
  intAttr(node(g, "Concat", "join", {"c", "t"}, {"h"}), "axis", 1);
  intAttr(node(g, "Gather", "first", {"h", "zero"}, {"y"}), "axis", 1);
  *g->add_output() = floatInput("y", {-1, 2});
  return m;
}

TEST(OnnxImport, TheClassTokensShapeArithmeticFoldsAndItsExpandIsTheConcats) {
  auto imported = importBytes(bytesOf(classTokenModel()));
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ir::Module& mod = *imported->module;
  EXPECT_TRUE(ir::verifyModule(mod).ok()) << ir::verifyModule(mod);
  const ir::Graph& g = *mod.graph(kInferGraph);
  // Equal and Where are computed at import ([N, 1, 1]); the Expand leaves the token
  // [1,1,2] for concat_axis to repeat along the batch (no constant holds the batch's size);
  // x[:, 0] is a slice and a reshape.
  EXPECT_EQ(opsOf(g),
            (std::vector<ir::Op>{ir::Op::kConcatAxis, ir::Op::kSliceAxis, ir::Op::kReshape}));
  for (const auto& n : g.nodes())
    if (n->op() == ir::Op::kConcatAxis) {
      EXPECT_EQ(n->operand(0)->type(), (ir::TensorType{ir::DType::kF32, {1, 1, 2}}));
      EXPECT_EQ(n->result()->type(), (ir::TensorType{ir::DType::kF32, {4, 4, 2}}));
    }
  EXPECT_EQ(g.outputs()[0]->type(), (ir::TensorType{ir::DType::kF32, {4, 2}}));

  // Read by something that does not broadcast it (the graph's output): expanded.
  onnx::ModelProto m = classTokenModel();
  *m.mutable_graph()->add_output() = floatInput("c", {-1, 1, 2});
  auto expanded = importBytes(bytesOf(m));
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  const ir::Graph& e = *expanded->module->graph(kInferGraph);
  EXPECT_EQ(opsOf(e),
            (std::vector<ir::Op>{ir::Op::kConstant, ir::Op::kMulBcast, ir::Op::kConcatAxis,
                                 ir::Op::kSliceAxis, ir::Op::kReshape}));
  EXPECT_EQ(e.outputs()[1]->type(), (ir::TensorType{ir::DType::kF32, {4, 1, 2}}));
  EXPECT_TRUE(ir::verifyModule(*expanded->module).ok());
}

/// nn.MultiheadAttention's sequence-first reshapes as torch.onnx.export writes them, on
/// x [N, 3, 4]: xt = x^T [3, N, 4]; y = Reshape(xt, [T, N*2, 2]) and z = Reshape(y, [T*N, 4]),
/// their targets Shape/Gather/Mul/Concat chains that the import folds on its batch.
onnx::ModelProto sequenceFirstModel() {
  onnx::ModelProto m = emptyModel("seq");
  onnx::GraphProto* g = m.mutable_graph();
  *g->add_input() = floatInput("x", {-1, 3, 4});
  intsAttr(node(g, "Transpose", "seq_first", {"x"}, {"xt"}), "perm", {1, 0, 2});
  node(g, "Shape", "shape", {"xt"}, {"s"});
  intConstant(g, "zero", {0}, {});
  intConstant(g, "one", {1}, {});
  node(g, "Gather", "tokens", {"s", "zero"}, {"t"});
  node(g, "Gather", "batch", {"s", "one"}, {"n"});
  intConstant(g, "heads", {2}, {});
  node(g, "Mul", "n_heads", {"n", "heads"}, {"nh"});
  intConstant(g, "axes0", {0}, {1});
  node(g, "Unsqueeze", "u_t", {"t", "axes0"}, {"t1"});
  node(g, "Unsqueeze", "u_nh", {"nh", "axes0"}, {"nh1"});
  intConstant(g, "head_dim", {2}, {1});
  intAttr(node(g, "Concat", "split_target", {"t1", "nh1", "head_dim"}, {"split"}), "axis", 0);
  node(g, "Reshape", "split_heads", {"xt", "split"}, {"y"});  // [T, N*2, 2]
  node(g, "Mul", "t_n", {"t", "n"}, {"tn"});
  node(g, "Unsqueeze", "u_tn", {"tn", "axes0"}, {"tn1"});
  intConstant(g, "width", {4}, {1});
  intAttr(node(g, "Concat", "rows_target", {"tn1", "width"}, {"rows"}), "axis", 0);
  node(g, "Reshape", "rows", {"y", "rows"}, {"z"});  // [T*N, 4]
  onnx::ValueInfoProto* z = g->add_output();
  *z = floatInput("z", {-1, 4});  // [T*N, 4]
  z->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("TN");
  return m;
}

TEST(OnnxImport, ASequenceFirstReshapeWritesItsBatchDimensionMinusOneWhereItIs) {
  // The batch is folded into the targets as a number (N*2 = 8, T*N = 12 at batch 4); the
  // import at a second batch finds which dimension grows with it, and the reshape writes
  // that one -1 so that replicate's shares reshape alike. y's batch is on axis 1: the
  // reshape of xt first marks it by a reshape that keeps xt's shape (for the gradient).
  auto imported = importBytes(bytesOf(sequenceFirstModel()));
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ir::Graph& g = *imported->module->graph(kInferGraph);
  EXPECT_TRUE(ir::verifyModule(*imported->module).ok()) << ir::verifyModule(*imported->module);
  std::vector<std::vector<int64_t>> targets;
  for (const auto& n : g.nodes())
    if (n->op() == ir::Op::kReshape) targets.push_back(ir::ReshapeView(*n).shape());
  EXPECT_EQ(targets, (std::vector<std::vector<int64_t>>{{3, -1, 4}, {3, -1, 2}, {-1, 4}}));
  EXPECT_EQ(g.outputs()[0]->type(), (ir::TensorType{ir::DType::kF32, {12, 4}}));

  // At batch 1 too (the second import is then at batch 2).
  auto one = importBytes(bytesOf(sequenceFirstModel()), 1);
  ASSERT_TRUE(one.ok()) << one.status();
  targets.clear();
  for (const auto& n : one->module->graph(kInferGraph)->nodes())
    if (n->op() == ir::Op::kReshape) targets.push_back(ir::ReshapeView(*n).shape());
  EXPECT_EQ(targets, (std::vector<std::vector<int64_t>>{{3, -1, 4}, {3, -1, 2}, {-1, 4}}));

  // The batch fixed in the model: no second import, the old rule (axis 0 -1 where the
  // target keeps the input's axis 0).
  onnx::ModelProto fixed = sequenceFirstModel();
  fixed.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_value(4);
  auto f = importBytes(bytesOf(fixed));
  ASSERT_TRUE(f.ok()) << f.status();
  targets.clear();
  for (const auto& n : f->module->graph(kInferGraph)->nodes())
    if (n->op() == ir::Op::kReshape) targets.push_back(ir::ReshapeView(*n).shape());
  EXPECT_EQ(targets, (std::vector<std::vector<int64_t>>{{-1, 8, 2}, {12, 4}}));
}

// Comparisons, Not, Or, Where, Mod and casts to and from bool of values computed at run
// time are the compare, where and mod ops (booleans as 1 and 0 in f32); a mask known at import
// (a bool initializer) becomes a buffer of those numbers.
TEST(OnnxImport, ComparisonsWhereAndModAtRunTimeAreTheirOps) {
  onnx::ModelProto m = emptyModel("masks");
  onnx::GraphProto* g = m.mutable_graph();
  *g->add_input() = floatInput("x", {-1, 3});
  *g->add_initializer() = floats("t", {3}, 0.5f);
  onnx::TensorProto known_mask;
  known_mask.set_name("known_mask");
  known_mask.set_data_type(onnx::TensorProto::BOOL);
  known_mask.add_dims(3);
  for (int v : {1, 0, 1}) known_mask.add_int32_data(v);
  *g->add_initializer() = known_mask;
  node(g, "Less", "below", {"x", "t"}, {"below"});
  node(g, "Not", "not_below", {"below"}, {"at_least"});
  node(g, "Or", "either", {"at_least", "known_mask"}, {"either"});
  node(g, "Where", "pick", {"either", "x", "t"}, {"picked"});
  node(g, "Where", "pick_known", {"known_mask", "picked", "x"}, {"picked2"});
  intAttr(node(g, "Mod", "wrap", {"picked2", "t"}, {"wrapped"}), "fmod", 1);
  intAttr(node(g, "Cast", "to_bool", {"wrapped"}, {"nonzero"}), "to", onnx::TensorProto::BOOL);
  intAttr(node(g, "Cast", "to_float", {"nonzero"}, {"y"}), "to", onnx::TensorProto::FLOAT);
  *g->add_output() = floatInput("y", {-1, 3});
  auto imported = importBytes(bytesOf(m));
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ir::Graph& infer = *imported->module->graph(kInferGraph);
  EXPECT_TRUE(ir::verifyModule(*imported->module).ok()) << ir::verifyModule(*imported->module);
  std::vector<std::string> compares;
  for (const auto& n : infer.nodes())
    if (n->op() == ir::Op::kCompare) compares.emplace_back(ir::toWord(ir::attr::kind(*n)));
  EXPECT_EQ(compares, (std::vector<std::string>{"lt", "eq", "ne", "ne"}));  // Or: a + b != 0
  const std::vector<ir::Op> ops = opsOf(infer);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), ir::Op::kWhere), 2);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), ir::Op::kMod), 1);
  // The known mask's booleans as the numbers the where op selects by.
  bool found = false;
  for (const auto& [var, values] : imported->values)
    if (absl::StrContains(var, "known_mask")) {
      found = true;
      EXPECT_EQ(values, (std::vector<float>{1, 0, 1}));
    }
  EXPECT_TRUE(found);
  // A remainder with the divisor's sign (fmod 0) is for integers, which are known here.
  m.mutable_graph()->mutable_node(5)->mutable_attribute(0)->set_i(0);
  EXPECT_TRUE(absl::StrContains(importBytes(bytesOf(m)).status().message(),
                                "node 'wrap' (Mod): fmod 0 on floats"))
      << importBytes(bytesOf(m)).status();
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

/// `m` with initializer `index`'s values moved to `dir`/`location` after `offset` bytes
/// of padding, as onnx.save_model(save_as_external_data=True) writes it.
void moveToExternalFile(onnx::ModelProto* m, int index, const TempDir& dir,
                        const std::string& location, int64_t offset) {
  onnx::TensorProto* w = m->mutable_graph()->mutable_initializer(index);
  std::string bytes(size_t(offset), 'x');
  for (float v : w->float_data()) bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
  const int64_t length = int64_t(bytes.size()) - offset;
  dir.write(location, bytes);
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"location", location},
                                                        {"offset", absl::StrCat(offset)},
                                                        {"length", absl::StrCat(length)}}) {
    auto* entry = w->add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  }
}

absl::StatusOr<ImportedModel> importFile(const std::string& path) {
  auto model = readOnnxModel(path);
  if (!model.ok()) return model.status();
  ImportOptions options;
  options.input_shapes["x"] = {4, 1, 6, 6};
  return importModel(**model, options);
}

// Weights in files beside the model (torch.onnx.export writes models over 2 GB so) are
// read from there, relative to the model's directory; a file missing, too short or outside
// that directory is named with the initializer.
TEST(OnnxImport, WeightsInExternalFilesAreReadBesideTheModel) {
  TempDir dir;
  auto inline_import = importBytes(bytesOf(sampleModel()));
  ASSERT_TRUE(inline_import.ok()) << inline_import.status();
  onnx::ModelProto m = sampleModel();
  moveToExternalFile(&m, 0, dir, "m.onnx.data", 16);  // conv.weight
  moveToExternalFile(&m, 6, dir, "fc.weight", 0);     // fc.weight, a file of its own
  const std::string path = dir.write("m.onnx", bytesOf(m));
  auto imported = importFile(path);
  ASSERT_TRUE(imported.ok()) << imported.status();
  for (const std::string name : {"conv.weight", "fc.weight", "conv.bias"})
    EXPECT_EQ(imported->values.at(name), inline_import->values.at(name)) << name;

  auto errorOf = [&](const onnx::ModelProto& bad) {
    return std::string(importFile(dir.write("bad.onnx", bytesOf(bad))).status().message());
  };
  const std::string conv =
      absl::StrCat("ONNX model '", dir.file("bad.onnx"), "': initializer 'conv.weight': ");
  onnx::ModelProto bad = m;
  bad.mutable_graph()->mutable_initializer(0)->mutable_external_data(0)->set_value("gone.data");
  EXPECT_TRUE(absl::StartsWith(
      errorOf(bad),
      absl::StrCat("cannot read ", conv, "external data file '", dir.file("gone.data"), "'")))
      << errorOf(bad);
  bad = m;
  bad.mutable_graph()->mutable_initializer(0)->mutable_external_data(0)->set_value(
      "../m.onnx.data");
  EXPECT_EQ(errorOf(bad), absl::StrCat(conv,
                                       "its external data file '../m.onnx.data' is outside "
                                       "the model's directory (ONNX names it relative to "
                                       "the model, inside)"));
  bad = m;
  bad.mutable_graph()->mutable_initializer(0)->mutable_external_data(2)->set_value("100");
  EXPECT_EQ(errorOf(bad), absl::StrCat(conv, "external data file '", dir.file("m.onnx.data"),
                                       "' holds 88 bytes; the data is 100 bytes from offset 16"));
  bad = m;
  bad.mutable_graph()->mutable_initializer(0)->mutable_external_data(1)->set_value("-4");
  EXPECT_EQ(errorOf(bad), absl::StrCat(conv, "external data offset '-4' is not a byte count"));
  bad = m;  // a length of other than the tensor's bytes: the element count is checked as ever
  bad.mutable_graph()->mutable_initializer(0)->mutable_external_data(2)->set_value("68");
  EXPECT_TRUE(absl::StrContains(errorOf(bad), "conv.weight")) << errorOf(bad);
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
      EXPECT_TRUE(isOneLineOrARefusalList(imported.status())) << i << ": " << imported.status();
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
      EXPECT_TRUE(isOneLineOrARefusalList(imported.status())) << i << ": " << imported.status();
    }
  }
  EXPECT_LT(ok, 2000);
}

/// Mutations of the pattern models' nodes (geluModel, layerNormModel, classTokenModel):
/// other ops, rewired inputs, other constants, inputs dropped. A pattern the importer
/// takes must be one (the module verifies), and anything else an error naming the model.
/// (It found ConstantOfShape's negative sizes and Mul of an empty known value.)
TEST(OnnxImportFuzz, PatternModelsGiveAnErrorOrAValidModule) {
  static const char* kOps[] = {"Div",    "Mul",    "Add",        "Sub",      "Erf",
                               "Sqrt",   "Pow",    "ReduceMean", "Where",    "Equal",
                               "Expand", "Concat", "Gather",     "Identity", ""};
  static const float kValues[] = {0, 0.5f, 1, 2, 1.4142135f, 0.70710677f, -1, 1e-5f};
  Rng rng(2026);
  int ok = 0;
  for (int i = 0; i < 3000; ++i) {
    onnx::ModelProto m = i % 3 == 0   ? geluModel()
                         : i % 3 == 1 ? layerNormModel()
                                      : classTokenModel();
    onnx::GraphProto* g = m.mutable_graph();
    for (size_t k = 0, n = 1 + rng.below(3); k < n; ++k) {
      onnx::NodeProto* node = g->mutable_node(int(rng.below(size_t(g->node_size()))));
      switch (rng.below(4)) {
        case 0:
          node->set_op_type(kOps[rng.below(std::size(kOps))]);
          break;
        case 1:  // an input read from another node's output
          if (node->input_size() > 0)
            node->set_input(int(rng.below(size_t(node->input_size()))),
                            g->node(int(rng.below(size_t(g->node_size())))).output(0));
          break;
        case 2:  // a Constant's value
          if (node->op_type() == "Constant" && node->attribute(0).t().float_data_size() == 1)
            node->mutable_attribute(0)->mutable_t()->set_float_data(
                0, kValues[rng.below(std::size(kValues))]);
          break;
        default:
          if (node->input_size() > 0) node->mutable_input()->RemoveLast();
          break;
      }
    }
    auto imported = importBytes(bytesOf(m));
    if (imported.ok()) {
      ++ok;
      EXPECT_TRUE(ir::verifyModule(*imported->module).ok()) << i;
    } else {
      EXPECT_TRUE(absl::StartsWith(imported.status().message(), "ONNX model 'm.onnx'"))
          << i << ": " << imported.status();
      EXPECT_TRUE(isOneLineOrARefusalList(imported.status())) << i << ": " << imported.status();
    }
  }
  EXPECT_GT(ok, 0);
  EXPECT_LT(ok, 3000);
}

}  // namespace
}  // namespace tandem::onnx_import
