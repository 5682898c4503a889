// tandem export: a short-trained checkpoint's model as an ONNX inference graph, which
// ONNX's own checker accepts (full_check: its shape inference too) and which `tandem run`
// (the importer, a separate reading of the file) runs to the eval step's own logits; and
// bad checkpoints named.

#include "frontend/onnx/export.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontend/build_module.h"
#include "frontend/builder.h"
#include "frontend/model.h"
#include "frontend/onnx/onnx_file.h"
#include "gtest/gtest.h"
#include "ir/parser.h"
#include "passes/pipeline.h"
#include "runtime/checkpoint.h"
#include "runtime/executor.h"
#include "tests/test_util.h"
#include "tests/tools/cli_helpers.h"

namespace tandem {
namespace {

using testing::CommandResult;
using testing::TempDir;

constexpr int64_t kBatch = 4;  // the exported graph's and the eval step's batch

/// Why ONNX's python checker cannot run here ("" when it can).
std::string whyNoOnnxChecker() {
  CommandResult r = testing::runProgram("/usr/bin/python3", {"-c", "import onnx.checker"});
  return r.exit_code == 0 ? "" : "/usr/bin/python3 cannot import onnx (python3-onnx): " + r.err;
}

/// A checkpoint of `model` after one short epoch on a small synthetic data set.
class ExportTest : public ::testing::Test {
 public:  // exportAndCompare below uses them too
  void train(const std::string& model, std::vector<std::string> extra = {}) {
    testing::writeIdxSplit(dir_, "train", 32);
    testing::writeIdxSplit(dir_, "t10k", 8);
    std::vector<std::string> args = {
        "train",    "--model", model,    "--data", dataDir(),      "--batch",   "8",
        "--epochs", "1",       "--seed", "5",      "--checkpoint", checkpoint()};
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult r = testing::runTandem(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  std::string dataDir() const {
    std::string d = dir_.file("");
    d.pop_back();
    return d;
  }
  std::string checkpoint() const { return dir_.file("ck"); }
  std::string file(const std::string& name) const { return dir_.file(name); }

  /// Images in [-1, 1) from a fixed LCG, as an ONNX tensor file x.pb.
  std::vector<float> writeImages(const ir::Shape& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> x(static_cast<size_t>(n));
    uint32_t s = 12345;
    for (float& v : x) {
      s = s * 1664525u + 1013904223u;
      v = float(s >> 8) / float(1 << 24) * 2.0f - 1.0f;
    }
    std::string bytes;
    onnx_import::encodeF32("x", shape, x.data()).SerializeToString(&bytes);
    testing::writeFile(file("x.pb"), bytes);
    return x;
  }

  TempDir dir_;
};

/// The checkpoint's parameters and buffers (replica 0), by name.
onnx_export::VarValues checkpointValues(const std::string& ckdir) {
  onnx_export::VarValues values;
  auto c = runtime::readCheckpointFile(ckdir);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return values;
  for (const runtime::CheckpointTensor& t : c->tensors) {
    if (t.replica != 0 || t.type.dtype != ir::DType::kF32) continue;
    std::vector<float>& v = values[t.name];
    v.resize(size_t(t.type.numElements()));
    std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  }
  return values;
}

/// The logits of the eval step of `m` (a model as built) as `tandem train` compiles it
/// for cpu:0 (the default pipeline: batch norm folded at run time by fuse-conv-bn-relu,
/// layouts assigned), with `values` in its parameters and buffers, on `images`.
std::vector<float> evalStepLogits(std::unique_ptr<ir::Module> m,
                                  const onnx_export::VarValues& values,
                                  const std::vector<float>& images) {
  if (m == nullptr) return {};
  ir::Graph* eval = m->graph(ir::kEvalGraph);
  ir::Value* logits = nullptr;
  for (const auto& n : eval->nodes())
    if (n->op() == ir::Op::kSoftmaxCrossEntropy) logits = n->operand(0);
  std::vector<ir::Value*> outs = eval->outputs();
  outs.push_back(logits);  // the step's loss and accuracy read them; now we do too
  eval->setOutputs(outs);
  if (absl::Status s = testing::runPipeline(*m, passes::defaultPipeline({})); !s.ok()) {
    ADD_FAILURE() << s;
    return {};
  }
  auto exec = runtime::Executor::create(std::move(m));
  if (!exec.ok()) {
    ADD_FAILURE() << exec.status();
    return {};
  }
  EXPECT_TRUE((*exec)->run(ir::kInitGraph, {}).ok());
  for (const ir::Var& v : (*exec)->module().vars()) {
    if (v.role != ir::VarRole::kParam && v.role != ir::VarRole::kBuffer) continue;
    auto it = values.find(v.name);
    if (it == values.end()) {
      ADD_FAILURE() << "no value for @" << v.name;
      continue;
    }
    runtime::HostTensor h(v.type);
    std::memcpy(h.buffer.data(), it->second.data(), size_t(v.type.bytes()));
    EXPECT_TRUE((*exec)->writeVariable(v.name, 0, h).ok()) << v.name;
  }
  const ir::Graph* compiled = (*exec)->module().graph(ir::kEvalGraph);
  runtime::HostTensor x(compiled->inputs()[0]->result()->type());
  runtime::HostTensor y(compiled->inputs()[1]->result()->type());
  std::memcpy(x.buffer.data(), images.data(), images.size() * sizeof(float));
  std::vector<backend::TensorView> in{x.view(), y.view()};
  auto out = (*exec)->run(ir::kEvalGraph, in);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  const runtime::HostTensor& l = out->back();
  return std::vector<float>(l.f32(), l.f32() + l.type.numElements());
}

/// The largest difference between `want` and `got`, and the largest |want|.
std::pair<double, double> compare(const std::vector<float>& want, const std::vector<float>& got) {
  EXPECT_EQ(want.size(), got.size());
  double scale = 0, worst = 0;
  for (float v : want) scale = std::max(scale, double(std::fabs(v)));
  for (size_t i = 0; i < want.size() && i < got.size(); ++i)
    worst = std::max(worst, std::fabs(double(want[i]) - double(got[i])));
  return {worst, scale};
}

/// Runs ONNX's checker with full_check (its shape inference too) on `onnx`; returns the
/// model's opset and its op types, or "" where python3-onnx is missing (a failure where
/// setup ran).
std::string checkWithOnnx(const std::string& onnx) {
  if (const std::string why = whyNoOnnxChecker(); !why.empty()) {
    if (testing::setupInstalledEverything()) ADD_FAILURE() << why;
    return "";
  }
  CommandResult c = testing::runProgram(
      "/usr/bin/python3",
      {"-c",
       "import sys, onnx\n"
       "m = onnx.load(sys.argv[1])\n"
       "onnx.checker.check_model(m, full_check=True)\n"
       "print(m.opset_import[0].version, ' '.join(sorted({n.op_type for n in m.graph.node})))\n",
       onnx});
  EXPECT_EQ(c.exit_code, 0) << c.err;
  return c.out;
}

/// Exports `model`'s checkpoint (batch norm folded into `folded` convolutions), checks it
/// with onnx.checker, runs it with `tandem run` and compares with the eval step's logits.
/// `fixed_batch`: exported with --batch 4; else the batch is symbolic (N), and the model
/// also runs on a batch of 1.
void exportAndCompare(ExportTest& t, const std::string& model, int folded,
                      bool fixed_batch = false) {
  const std::string onnx = t.file(model + ".onnx");
  std::vector<std::string> args = {"export", "--checkpoint", t.checkpoint(), "-o", onnx};
  if (fixed_batch) args.insert(args.end(), {"--batch", absl::StrCat(kBatch)});
  CommandResult e = testing::runTandem(args);
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NE(e.out.find(fixed_batch ? "input x [4,1,28,28]" : "input x [N,1,28,28]"),
            std::string::npos)
      << e.out;
  if (folded > 0)
    EXPECT_NE(e.out.find(absl::StrCat("batch norm folded into ", folded, " convolutions, 0 kept")),
              std::string::npos)
        << e.out;
  else  // a model without batch norm is not told about folding it
    EXPECT_EQ(e.out.find("batch norm"), std::string::npos) << e.out;
  const std::string checked = checkWithOnnx(onnx);
  if (!checked.empty()) {
    EXPECT_EQ(checked.substr(0, 3), "17 ") << checked;
    // Folded: no BatchNormalization node is left.
    EXPECT_EQ(checked.find("BatchNormalization"), std::string::npos) << checked;
  }

  const std::vector<float> images = t.writeImages({kBatch, 1, 28, 28});
  CommandResult r = testing::runTandem(
      {"run", onnx, "--input", "x=" + t.file("x.pb"), "--output-dir", t.file("out")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto got = onnx_import::readTensorFile(t.file("out/output_0.pb"));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->shape, (ir::Shape{kBatch, 10}));

  const auto [worst, scale] = compare(evalStepLogits(testing::buildZooModel(model, kBatch),
                                                     checkpointValues(t.checkpoint()), images),
                                      got->floats);
  // Export folds batch norm with the arithmetic of the eval step's fold_batch_norm kernel
  // (export.cc), so the convolutions get the same weights, bit for bit, and on this
  // machine the logits come out the same bits (measured: difference 0 for all five
  // models; ViT's and the MLP's GELU and layer norm are the eval step's ops again, read back
  // from their ONNX forms). What may differ elsewhere is only f32 summation order: the eval step
  // runs the fused conv2d_bias_act, tandem run a plain Conv, Add and Relu, and oneDNN may pick
  // another kernel or blocking for either on another CPU. That is a few ulps of the sums
  // per layer; 1e-5 of the largest logit bounds it with room, and catches any error in
  // the folding or the graph (a dropped bias term, a wrong epsilon: >= 1e-4).
  EXPECT_LE(worst, 1e-5 * scale) << "largest logit " << scale;

  if (!fixed_batch) {  // the symbolic batch: one image runs too, to the first row's logits
    t.writeImages({1, 1, 28, 28});  // the batch's first image
    CommandResult one = testing::runTandem(
        {"run", onnx, "--input", "x=" + t.file("x.pb"), "--output-dir", t.file("one")});
    ASSERT_EQ(one.exit_code, 0) << one.err;
    auto row = onnx_import::readTensorFile(t.file("one/output_0.pb"));
    ASSERT_TRUE(row.ok()) << row.status();
    ASSERT_EQ(row->shape, (ir::Shape{1, 10}));
    const auto [row_worst, row_scale] =
        compare(std::vector<float>(got->floats.begin(), got->floats.begin() + 10), row->floats);
    EXPECT_LE(row_worst, 1e-5 * row_scale);
    t.writeImages({kBatch, 1, 28, 28});  // x.pb back to the batch for the .tir below
  }

  // The importer's round trip: the exported model as a .tir module runs to the same bits.
  // (--batch only where the batch is open: a fixed one refuses it.)
  std::vector<std::string> import = {"import", onnx, "-o", t.file(model + ".tir")};
  if (!fixed_batch) import.insert(import.end(), {"--batch", absl::StrCat(kBatch)});
  CommandResult imported = testing::runTandem(import);
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  CommandResult tir = testing::runTandem({"run", t.file(model + ".tir"), "--input",
                                          "x=" + t.file("x.pb"), "--output-dir", t.file("tir")});
  ASSERT_EQ(tir.exit_code, 0) << tir.err;
  auto via_tir = onnx_import::readTensorFile(t.file("tir/output_0.pb"));
  ASSERT_TRUE(via_tir.ok()) << via_tir.status();
  EXPECT_EQ(via_tir->floats, got->floats);
  EXPECT_EQ(via_tir->name, got->name);  // the .tir keeps the ONNX output's name
  std::printf("%s: largest |logit| %.4g, largest difference from the eval step %.3g\n",
              model.c_str(), scale, worst);
}

TEST_F(ExportTest, LenetMatchesTheEvalStepThroughTandemRun) {
  train("lenet");
  exportAndCompare(*this, "lenet", 0);
}

TEST_F(ExportTest, LenetWithBatchNormFoldsIt) {
  train("lenet_bn");
  exportAndCompare(*this, "lenet_bn", 2, /*fixed_batch=*/true);
}

TEST_F(ExportTest, Resnet18MatchesTheEvalStepThroughTandemRun) {
  train("resnet18");
  exportAndCompare(*this, "resnet18", 17);  // the 1x1 projections have no batch norm
}

// ViT (LayerNorm, attention's MatMul/Softmax/Transpose/Reshape, the class token's Expand
// and Concat, GELU written out as Div, Erf, Add, Mul, Mul, the head's Slice) and the MLP
// (GELU): the importer reads GELU back as gelu and the Expand as concat_axis's broadcast.
TEST_F(ExportTest, VitMatchesTheEvalStepThroughTandemRun) {
  train("vit", {"--warmup", "0"});
  exportAndCompare(*this, "vit", 0);
}

TEST_F(ExportTest, MlpMatchesTheEvalStepThroughTandemRun) {
  train("mlp", {"--warmup", "0"});
  exportAndCompare(*this, "mlp", 0);
}

/// `proto`, exported from `values` of `spec`'s module, written as NAME.onnx and run by
/// tandem run on a batch of images: its logits within 1e-5 of the largest of the eval
/// step's on the same images and values. `checked`: what ONNX's checker says of the file
/// ("" without python3-onnx).
void expectRunsAsTheEvalStep(ExportTest& t, const ModelSpec& spec, const onnx::ModelProto& proto,
                             const onnx_export::VarValues& values, const std::string& name,
                             std::string* checked) {
  std::string bytes;
  ASSERT_TRUE(proto.SerializeToString(&bytes));
  const std::string path = t.file(name + ".onnx");
  testing::writeFile(path, bytes);
  *checked = checkWithOnnx(path);
  const std::vector<float> images = t.writeImages({kBatch, 1, 28, 28});
  CommandResult r = testing::runTandem(
      {"run", path, "--input", "x=" + t.file("x.pb"), "--output-dir", t.file("out_" + name)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto got = onnx_import::readTensorFile(t.file("out_" + name + "/output_0.pb"));
  ASSERT_TRUE(got.ok()) << got.status();
  auto rebuilt = buildModule(spec, {.batch = kBatch});
  ASSERT_TRUE(rebuilt.ok());
  const auto [worst, scale] =
      compare(evalStepLogits(*std::move(rebuilt), values, images), got->floats);
  EXPECT_LE(worst, 1e-5 * scale) << "largest logit " << scale;
  std::printf("%s: largest |logit| %.4g, largest difference from the eval step %.3g\n",
              name.c_str(), scale, worst);
}

/// Every variable of `m` drawn from a fixed LCG: weights in [-0.25, 0.25), running
/// variances in [0.5, 1.5).
onnx_export::VarValues randomValues(const ir::Module& m) {
  onnx_export::VarValues values;
  uint32_t s = 7;
  for (const ir::Var& v : m.vars()) {
    std::vector<float>& data = values[v.name];
    data.resize(size_t(v.type.numElements()));
    const bool variance = absl::EndsWith(v.name, "running_var");
    for (float& d : data) {
      s = s * 1664525u + 1013904223u;
      const float u = float(s >> 8) / float(1 << 24);
      d = variance ? 0.5f + u : (u - 0.5f) * 0.5f;
    }
  }
  return values;
}

/// `spec` built at kBatch, its variables drawn by randomValues, and exported.
struct RandomExport {
  onnx_export::VarValues values;
  onnx::ModelProto proto;
  onnx_export::ExportReport report;
  /// The op types of the model's nodes, each as often as it occurs.
  std::multiset<std::string> ops() const {
    std::multiset<std::string> ops;
    for (const onnx::NodeProto& n : proto.graph().node()) ops.insert(n.op_type());
    return ops;
  }
};
absl::StatusOr<RandomExport> exportRandom(const ModelSpec& spec) {
  auto m = buildModule(spec, {.batch = kBatch});
  if (!m.ok()) return m.status();
  RandomExport r;
  r.values = randomValues(**m);
  auto proto = onnx_export::exportClassifier(**m, r.values, &r.report);
  if (!proto.ok()) return proto.status();
  r.proto = *std::move(proto);
  return r;
}

// Batch norm that may not be folded stays BatchNormalization: after a relu, and after a
// convolution whose output a residual add reads too. Exported in-process from random
// values (running variances in [0.5, 1.5)), run by tandem run, compared with the eval step.
TEST_F(ExportTest, BatchNormThatCannotFoldStaysBatchNormalization) {
  ModelSpec spec = classifierModel("bn_kept", {1, 28, 28}, 10, [](Builder& b, Tensor x) {
    Tensor h = b.relu(b.conv2d(x, {.out_channels = 4, .kernel = 3, .name = "conv1"}));
    h = b.batchNorm(h, {.name = "bn1"});  // after a relu: no convolution to fold into
    Tensor c = b.conv2d(h, {.out_channels = 4, .kernel = 3, .name = "conv2"});
    h = b.add(b.batchNorm(c, {.name = "bn2"}), c);  // c is read twice
    return b.linear(b.flatten(h), {.out_features = 10, .name = "fc"});
  });
  auto exported = exportRandom(spec);
  ASSERT_TRUE(exported.ok()) << exported.status();
  const auto& [values, proto, report] = *exported;
  EXPECT_TRUE(report.folded_batch_norms.empty());
  ASSERT_EQ(report.kept_batch_norms.size(), 2u);
  EXPECT_NE(report.kept_batch_norms[0].find("no convolution's (relu)"), std::string::npos)
      << report.kept_batch_norms[0];
  EXPECT_NE(report.kept_batch_norms[1].find("read elsewhere"), std::string::npos)
      << report.kept_batch_norms[1];
  // Unfolded, both normalize the same way per element; the eval step may still fuse bn2
  // and the add differently from tandem run's plain nodes: rounding only.
  std::string checked;
  expectRunsAsTheEvalStep(*this, spec, proto, values, "bn_kept", &checked);
  if (!checked.empty()) {
    EXPECT_NE(checked.find("BatchNormalization"), std::string::npos) << checked;
  }
}

// MobileNet's and GoogLeNet's layers: a depthwise and a grouped convolution (Conv's
// `group`, batch norm folded into both) and ceil_mode pooling (MaxPool and AveragePool's
// `ceil_mode` over partial windows), exported in-process from random values, run by
// tandem run and compared with the eval step; imported back, the same attributes.
// Issue 44: windows whose height and width differ, a reflection pad, silu (as Sigmoid and
// Mul) and clip (with its bounds as inputs) export and read back as the same model.
TEST_F(ExportTest, NonSquareWindowsPadSiluAndClipRunAsTheEvalStep) {
  ModelSpec spec = classifierModel("inception", {1, 28, 28}, 10, [](Builder& b, Tensor x) {
    Tensor h = b.pad(x, {0, 0, 1, 2, 0, 0, 1, 2}, ir::PadMode::kReflect);           // 30 x 32
    h = b.silu(b.conv2d(h, {.out_channels = 8, .kernel = {3, 7}, .pad = {0, 1}}));  // 28 x 28
    h = b.clip(b.conv2d(h, {.out_channels = 8, .kernel = {7, 1}, .stride = {2, 1}, .pad = {3, 0}}),
               -0.5, 0.75);                                    // 14 x 28
    h = b.avgPool2d(h, {.kernel = {2, 4}, .stride = {2, 4}});  // 7 x 7
    return b.linear(b.flatten(h), {.out_features = 10, .name = "fc"});
  });
  auto exported = exportRandom(spec);
  ASSERT_TRUE(exported.ok()) << exported.status();
  const auto& [values, proto, report] = *exported;
  const std::multiset<std::string> ops = exported->ops();
  EXPECT_EQ(ops.count("Sigmoid"), 1u);
  EXPECT_EQ(ops.count("Clip"), 1u);
  EXPECT_EQ(ops.count("Pad"), 1u);
  std::string checked;
  expectRunsAsTheEvalStep(*this, spec, proto, values, "inception", &checked);
}

// compare (every kind), where and mod (both signs) export as ONNX's comparisons, Not,
// Where and Mod with fmod 1 (the divisor's sign as Mod, Less, Xor, And and Where), and
// read back as the same model.
TEST_F(ExportTest, ComparisonsWhereAndModRunAsTheEvalStep) {
  ModelSpec spec = classifierModel("masks", {1, 28, 28}, 10, [](Builder& b, Tensor x) {
    Tensor flat = b.flatten(x);
    Tensor a = b.linear(flat, {.out_features = 16, .name = "a"});
    Tensor c = b.linear(flat, {.out_features = 16, .name = "c"});
    Tensor masks = b.compare(a, ir::Comparison::kEq, c);
    for (ir::Comparison k : {ir::Comparison::kNe, ir::Comparison::kLt, ir::Comparison::kLe,
                             ir::Comparison::kGt, ir::Comparison::kGe})
      masks = b.addBroadcast(masks, b.compare(a, k, c));
    Tensor picked = b.where(b.compare(a, ir::Comparison::kLt, c), b.mod(a, c), b.mod(c, a, true));
    return b.linear(b.addBroadcast(picked, masks), {.out_features = 10, .name = "fc"});
  });
  auto exported = exportRandom(spec);
  ASSERT_TRUE(exported.ok()) << exported.status();
  const auto& [values, proto, report] = *exported;
  const std::multiset<std::string> ops = exported->ops();
  EXPECT_EQ(ops.count("Mod"), 2u);
  EXPECT_EQ(ops.count("Where"), 2u);  // the selection and the remainder's sign fix
  for (const char* op : {"Equal", "Not", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"})
    EXPECT_GE(ops.count(op), 1u) << op;
  std::string checked;
  expectRunsAsTheEvalStep(*this, spec, proto, values, "masks", &checked);
}

TEST_F(ExportTest, GroupedConvolutionsAndCeilModePoolsRunAsTheEvalStep) {
  ModelSpec spec = classifierModel("mobile", {1, 28, 28}, 10, [](Builder& b, Tensor x) {
    Tensor h = b.relu(b.batchNorm(b.conv2d(x, {.out_channels = 8, .kernel = 3, .pad = 1}), {}));
    h = b.batchNorm(
        b.conv2d(h, {.out_channels = 8, .kernel = 3, .stride = 2, .pad = 1, .groups = 8}), {});
    h = b.maxPool2d(b.relu(h), {.kernel = 3, .stride = 2, .ceil_mode = true});  // 14 -> 7
    h = b.conv2d(h, {.out_channels = 16, .kernel = 1, .groups = 2});
    h = b.avgPool2d(h, {.kernel = 2, .stride = 2, .ceil_mode = true});  // 7 -> 4
    return b.linear(b.flatten(h), {.out_features = 10, .name = "fc"});
  });
  auto exported = exportRandom(spec);
  ASSERT_TRUE(exported.ok()) << exported.status();
  const auto& [values, proto, report] = *exported;
  EXPECT_EQ(report.folded_batch_norms.size(), 2u);
  std::map<std::string, int64_t> attrs;  // "Conv.group", "MaxPool.ceil_mode", ...
  for (const onnx::NodeProto& n : proto.graph().node())
    for (const onnx::AttributeProto& a : n.attribute())
      if (a.name() == "group" || a.name() == "ceil_mode")
        attrs[n.op_type() + "." + a.name()] = std::max(attrs[n.op_type() + "." + a.name()], a.i());
  EXPECT_EQ(attrs, (std::map<std::string, int64_t>{
                       {"AveragePool.ceil_mode", 1}, {"Conv.group", 8}, {"MaxPool.ceil_mode", 1}}));
  std::string checked;
  expectRunsAsTheEvalStep(*this, spec, proto, values, "mobile", &checked);
  if (!checked.empty()) {
    EXPECT_EQ(checked.substr(0, 3), "17 ") << checked;
  }
}

TEST_F(ExportTest, AnOpWithoutOnnxFormIsNamed) {
  // A graph whose output a training-mode batch norm computes: no inference form.
  ModelSpec spec = classifierModel("train_bn", {1, 28, 28}, 10, [](Builder& b, Tensor x) {
    return b.linear(b.flatten(b.batchNorm(x, {.name = "bn"})), {.out_features = 10, .name = "fc"});
  });
  auto m = buildModule(spec, {.batch = 2});
  ASSERT_TRUE(m.ok()) << m.status();
  // The training step's graph as if it were the eval step: its batch norm trains.
  ir::Graph* train = (*m)->graph(ir::kTrainGraph);
  const ir::Value* x = train->findValue("x");
  const ir::Value* logits = nullptr;
  for (const auto& n : train->nodes())
    if (n->op() == ir::Op::kSoftmaxCrossEntropy) logits = n->operand(0);
  onnx_export::VarValues values;
  for (const ir::Var& v : (*m)->vars()) values[v.name].resize(size_t(v.type.numElements()));
  auto proto = onnx_export::exportGraph(*train, {{x, "x"}}, {{logits, "logits"}}, values);
  ASSERT_FALSE(proto.ok());
  EXPECT_NE(proto.status().message().find("bn"), std::string::npos) << proto.status();
  EXPECT_NE(proto.status().message().find("training mode"), std::string::npos) << proto.status();
}

// Every op ir/ops.td maps one to one (`onnx NAME SINCE..`, softsign among them) exports as
// its ONNX op with no hand-written case.
TEST_F(ExportTest, SpecMappedOpsExportAsTheirOnnxOp) {
  for (const ir::OpInfo& info : ir::allOps()) {
    if (info.onnx == nullptr) continue;
    auto m =
        ir::parseModule(absl::StrCat("module @m {\ngraph @g(%x: f32[2,3]) {\n  %y = ", info.name,
                                     "(%x) : f32[2,3]\n  return %y\n}\n}\n"));
    ASSERT_TRUE(m.ok()) << info.name << ": " << m.status();
    const ir::Graph& g = *(*m)->graph("g");
    auto proto =
        onnx_export::exportGraph(g, {{g.findValue("x"), "x"}}, {{g.findValue("y"), "y"}}, {});
    ASSERT_TRUE(proto.ok()) << info.name << ": " << proto.status();
    ASSERT_EQ(proto->graph().node_size(), 1) << info.name;
    EXPECT_EQ(proto->graph().node(0).op_type(), info.onnx->name) << info.name;
    EXPECT_EQ(proto->graph().node(0).input(0), "x");
    EXPECT_EQ(proto->graph().node(0).output(0), "y");
  }
}

// fuse-conv-relu-pool's conv2d_relu_avg_pool exports as the three ONNX ops it stands for:
// Conv (its window), Relu, and AveragePool over 2x2 windows of stride 2.
TEST_F(ExportTest, FusedConvReluPoolExportsAsConvReluAveragePool) {
  auto m = ir::parseModule(
      "module @m {\ngraph @g(%x: f32[2,1,11,11], %w: f32[4,1,3,3], %b: f32[4]) {\n"
      "  %y, %mask = conv2d_relu_avg_pool(%x, %w, %b) {stride=1, pad=1} : f32[2,4,5,5], "
      "i32[2,4,11]\n"
      "  return %y\n}\n}\n");
  ASSERT_TRUE(m.ok()) << m.status();
  const ir::Graph& g = *(*m)->graph("g");
  auto proto = onnx_export::exportGraph(
      g, {{g.findValue("x"), "x"}, {g.findValue("w"), "w"}, {g.findValue("b"), "b"}},
      {{g.findValue("y"), "y"}}, {});
  ASSERT_TRUE(proto.ok()) << proto.status();
  std::vector<std::string> ops;
  std::map<std::string, std::vector<int64_t>> windows;  // "AveragePool.strides", ...
  for (const onnx::NodeProto& n : proto->graph().node()) {
    ops.push_back(n.op_type());
    for (const onnx::AttributeProto& a : n.attribute())
      windows[n.op_type() + "." + a.name()] = {a.ints().begin(), a.ints().end()};
  }
  EXPECT_EQ(ops, (std::vector<std::string>{"Conv", "Relu", "AveragePool"}));
  EXPECT_EQ(windows["Conv.kernel_shape"], (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(windows["Conv.pads"], (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(windows["AveragePool.kernel_shape"], (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(windows["AveragePool.strides"], (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(proto->graph().node(0).input_size(), 3);  // x, w and b
  EXPECT_EQ(proto->graph().node(2).output(0), "y");
}

// A symbolic batch needs shapes written for any batch: a reshape that spells the batch's
// size is named (and the fixed-batch export of the same model works).
TEST_F(ExportTest, AReshapeHoldingTheBatchSizeIsNamedUnderASymbolicBatch) {
  auto spec_for = [](int64_t batch) {
    ModelSpec spec =
        classifierModel("spelled_batch", {1, 28, 28}, 10, [batch](Builder& b, Tensor x) {
          return b.linear(b.reshape(x, {batch, 784}, std::source_location::current()),
                          {.out_features = 10, .name = "fc"});
        });
    return spec;
  };
  auto two = buildModule(spec_for(2), {.batch = 2});
  auto three = buildModule(spec_for(3), {.batch = 3});
  ASSERT_TRUE(two.ok() && three.ok());
  onnx_export::VarValues values;
  for (const ir::Var& v : (*two)->vars()) values[v.name].resize(size_t(v.type.numElements()));
  auto symbolic = onnx_export::exportClassifier(**two, values, nullptr, three->get());
  ASSERT_FALSE(symbolic.ok());
  EXPECT_NE(symbolic.status().message().find("reshape"), std::string::npos) << symbolic.status();
  EXPECT_NE(symbolic.status().message().find("--batch"), std::string::npos) << symbolic.status();
  EXPECT_TRUE(onnx_export::exportClassifier(**two, values).ok());
}

TEST_F(ExportTest, MissingCheckpointIsNamed) {
  CommandResult r =
      testing::runTandem({"export", "--checkpoint", file("nowhere"), "-o", file("m.onnx")});
  EXPECT_TRUE(testing::isUsageError(r, {"--checkpoint", file("nowhere/checkpoint")}));
}

TEST_F(ExportTest, CorruptCheckpointIsNamed) {
  train("lenet");
  std::string bytes = testing::readFile(checkpoint() + "/checkpoint");
  bytes[bytes.size() / 2] ^= 0x55;
  testing::writeFile(checkpoint() + "/checkpoint", bytes);
  CommandResult r =
      testing::runTandem({"export", "--checkpoint", checkpoint(), "-o", file("m.onnx")});
  EXPECT_TRUE(testing::isUsageError(r, {"--checkpoint", checkpoint() + "/checkpoint"}));
  EXPECT_FALSE(std::filesystem::exists(file("m.onnx")));
}

TEST_F(ExportTest, AnotherModelsCheckpointNamesTheVariable) {
  train("lenet");
  CommandResult r = testing::runTandem(
      {"export", "--checkpoint", checkpoint(), "-o", file("m.onnx"), "--model", "resnet18"});
  EXPECT_TRUE(testing::isUsageError(r, {"--model resnet18", "model lenet"}));
}

TEST_F(ExportTest, OutputMustBeAnOnnxFile) {
  CommandResult r = testing::runTandem({"export", "--checkpoint", file("ck"), "-o", file("m.tir")});
  EXPECT_TRUE(testing::isUsageError(r, {"-o", "m.tir", ".onnx"}));
}

}  // namespace
}  // namespace tandem
