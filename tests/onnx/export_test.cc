// tandem export: a short-trained checkpoint's model as an ONNX inference graph, which
// ONNX's own checker accepts (full_check: its shape inference too) and which `tandem run`
// (the importer, a separate reading of the file) runs to the eval step's own logits; and
// bad checkpoints named.

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/onnx/onnx_file.h"
#include "gtest/gtest.h"
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
 protected:
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
    std::vector<float> x(size_t(n));
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

/// The logits of `model`'s eval step as `tandem train` compiles it for cpu:0 (the default
/// pipeline: batch norm folded at run time by fuse-conv-bn-relu, layouts assigned), with
/// the checkpoint's parameters and buffers (replica 0), on `images`.
std::vector<float> evalStepLogits(const std::string& model, const std::string& ckdir,
                                  const std::vector<float>& images) {
  std::unique_ptr<ir::Module> m = testing::buildZooModel(model, kBatch);
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
  auto c = runtime::readCheckpointFile(ckdir);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return {};
  for (const runtime::CheckpointTensor& t : c->tensors) {
    const ir::Var* v = (*exec)->module().findVar(t.name);
    if (t.replica != 0 || v == nullptr ||
        (v->role != ir::VarRole::kParam && v->role != ir::VarRole::kBuffer))
      continue;
    runtime::HostTensor h(t.type);
    std::memcpy(h.buffer.data(), t.bytes.data(), t.bytes.size());
    EXPECT_TRUE((*exec)->writeVariable(t.name, 0, h).ok()) << t.name;
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

/// Exports `model`'s checkpoint, checks it with onnx.checker (full_check), runs it with
/// `tandem run` and compares with the eval step's logits. `folded` is the count of batch
/// norms export must fold.
void exportAndCompare(ExportTest& t, const std::string& model, const std::string& ckdir,
                      const std::string& onnx, int folded, double tolerance) {
  CommandResult e = testing::runTandem(
      {"export", "--checkpoint", ckdir, "-o", onnx, "--batch", absl::StrCat(kBatch)});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NE(e.out.find(absl::StrCat("batch norm folded into ", folded, " convolutions, 0 kept")),
            std::string::npos)
      << e.out;

  if (const std::string why = whyNoOnnxChecker(); !why.empty()) {
    if (testing::setupInstalledEverything()) ADD_FAILURE() << why;
  } else {
    CommandResult c = testing::runProgram("/usr/bin/python3",
                                          {"-c",
                                           "import sys, onnx\n"
                                           "m = onnx.load(sys.argv[1])\n"
                                           "onnx.checker.check_model(m, full_check=True)\n"
                                           "print(m.opset_import[0].version, len(m.graph.node))\n",
                                           onnx});
    EXPECT_EQ(c.exit_code, 0) << c.err;
    EXPECT_EQ(c.out.substr(0, 3), "17 ") << c.out;
  }

  const std::vector<float> images = t.writeImages({kBatch, 1, 28, 28});
  CommandResult r = testing::runTandem(
      {"run", onnx, "--input", "x=" + t.file("x.pb"), "--output-dir", t.file("out")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto got = onnx_import::readTensorFile(t.file("out/output_0.pb"));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->shape, (ir::Shape{kBatch, 10}));

  const std::vector<float> want = evalStepLogits(model, ckdir, images);
  ASSERT_EQ(want.size(), got->floats.size());
  double scale = 0, worst = 0;
  for (float v : want) scale = std::max(scale, double(std::fabs(v)));
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::fabs(double(want[i]) - double(got->floats[i])));
  // Batch norm is folded into the same bits the eval step folds (export.cc), so what
  // differs is only f32 summation order between the eval step's fused conv2d_bias_act
  // and tandem run's Conv, Add and Relu (oneDNN may pick other kernels and blockings).
  // The logits are sums over thousands of products each layer: a few ulps per layer of
  // the largest logit, bounded here by `tolerance` of it.
  EXPECT_LE(worst, tolerance * scale) << "largest logit " << scale;
  std::printf("%s: largest |logit| %.4g, largest difference %.3g (%.3g of it)\n", model.c_str(),
              scale, worst, worst / scale);
}

TEST_F(ExportTest, LenetMatchesTheEvalStepThroughTandemRun) {
  train("lenet");
  exportAndCompare(*this, "lenet", checkpoint(), file("lenet.onnx"), 0, 1e-5);
}

TEST_F(ExportTest, LenetWithBatchNormFoldsIt) {
  train("lenet_bn");
  exportAndCompare(*this, "lenet_bn", checkpoint(), file("lenet_bn.onnx"), 2, 1e-5);
}

TEST_F(ExportTest, Resnet18MatchesTheEvalStepThroughTandemRun) {
  train("resnet18");
  exportAndCompare(*this, "resnet18", checkpoint(), file("resnet18.onnx"), 20, 1e-4);
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
