// tandem import, run and train --onnx through the CLI: outputs as ONNX tensor files,
// one-line errors with exit 2 for bad models, inputs and flags, and an imported CNN that
// trains data-parallel on two devices as on one.

#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontend/onnx/onnx_file.h"
#include "gtest/gtest.h"
#include "tests/onnx/model_builder.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

using onnx_import::bytesOf;
using onnx_import::floatInput;
using onnx_import::floats;
using onnx_import::intAttr;
using onnx_import::intsAttr;
using onnx_import::node;

/// A CNN for Fashion-MNIST's 1x28x28 images as PyTorch exports one: Conv(1->4, 3x3), Relu,
/// MaxPool 2, Flatten, Gemm(676 -> 10, transB); the batch dimension open.
onnx::ModelProto smallCnn() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(14);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("small_cnn");
  *g->add_input() = floatInput("images", {-1, 1, 28, 28});
  *g->add_initializer() = floats("conv.weight", {4, 1, 3, 3}, -0.17f);
  *g->add_initializer() = floats("conv.bias", {4}, 0);
  onnx::TensorProto fc = floats("fc.weight", {10, 676}, 0);
  for (int i = 0; i < fc.float_data_size(); ++i)  // small, varied weights
    fc.set_float_data(i, 0.02f * std::sin(float(i)));
  *g->add_initializer() = fc;
  *g->add_initializer() = floats("fc.bias", {10}, 0);
  node(g, "Conv", "conv", {"images", "conv.weight", "conv.bias"}, {"c"});
  node(g, "Relu", "relu", {"c"}, {"r"});
  onnx::NodeProto* pool = node(g, "MaxPool", "pool", {"r"}, {"p"});
  intsAttr(pool, "kernel_shape", {2, 2});
  intsAttr(pool, "strides", {2, 2});
  node(g, "Flatten", "flatten", {"p"}, {"f"});
  intAttr(node(g, "Gemm", "fc", {"f", "fc.weight", "fc.bias"}, {"logits"}), "transB", 1);
  *g->add_output() = floatInput("logits", {-1, 10});
  return m;
}

std::string writeModel(const TempDir& dir, const onnx::ModelProto& m, const std::string& name) {
  writeFile(dir.file(name), bytesOf(m));
  return dir.file(name);
}

std::string writeImages(const TempDir& dir, int64_t batch) {
  std::vector<float> x(size_t(batch * 28 * 28));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 97) / 97.0f;
  std::string bytes;
  onnx_import::encodeF32("images", {batch, 1, 28, 28}, x.data()).SerializeToString(&bytes);
  writeFile(dir.file("images.pb"), bytes);
  return dir.file("images.pb");
}

/// One line on standard error, exit 2, containing `want`.
void expectUsageError(const CommandResult& r, const std::string& want) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, want)) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(OnnxCli, RunWritesOutputsAndTheImportedModuleGivesTheSame) {
  TempDir dir;
  const std::string model = writeModel(dir, smallCnn(), "cnn.onnx");
  const std::string images = writeImages(dir, 3);
  auto r =
      runTandem({"run", model, "--input", "images=" + images, "--output-dir", dir.file("out")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto out = onnx_import::readTensorFile(dir.file("out/output_0.pb"));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->name, "logits");
  EXPECT_EQ(out->shape, (ir::Shape{3, 10}));
  r = runTandem({"import", model, "-o", dir.file("cnn.tir"), "--batch", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(readFile(dir.file("cnn.tir")), "conv2d("))
      << readFile(dir.file("cnn.tir"));
  r = runTandem({"run", dir.file("cnn.tir"), "--input", "images=" + images, "--output-dir",
                 dir.file("out_tir")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto again = onnx_import::readTensorFile(dir.file("out_tir/output_0.pb"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->floats, out->floats);
  // Issue 40: the .tir keeps the model's output name (its node is 'fc').
  EXPECT_EQ(again->name, "logits");
  // Issue 44: on two threads, the same outputs (oneDNN may cut a sum between the threads:
  // within rounding).
  r = runTandem({"run", model, "--input", "images=" + images, "--output-dir", dir.file("out2"),
                 "--threads-per-device", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto two = onnx_import::readTensorFile(dir.file("out2/output_0.pb"));
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->floats.size(), out->floats.size());
  for (size_t i = 0; i < out->floats.size(); ++i)
    EXPECT_NEAR(two->floats[i], out->floats[i], 1e-5 * (1 + std::abs(out->floats[i]))) << i;
}

// Issue 40: constants of inf, -inf and NaN (Div by zero, Mul by -inf) are written into the
// .tir so that `tandem run` reads them back, and it computes what the ONNX model does.
TEST(OnnxCli, ConstantsOfInfinityAndNanSurviveTheTir) {
  TempDir dir;
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(14);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("special");
  *g->add_input() = floatInput("x", {2, 3});
  *g->add_initializer() = floats("zero", {}, 0);
  onnx::TensorProto minus_inf = floats("minus_inf", {}, 0);
  minus_inf.set_float_data(0, -std::numeric_limits<float>::infinity());
  *g->add_initializer() = minus_inf;
  onnx::TensorProto tiny = floats("tiny", {}, 0);
  tiny.set_float_data(0, 1e-45f);  // f32's smallest subnormal
  *g->add_initializer() = tiny;
  node(g, "Div", "div0", {"x", "zero"}, {"a"});
  node(g, "Mul", "mulinf", {"x", "minus_inf"}, {"b"});
  node(g, "Div", "divtiny", {"x", "tiny"}, {"c"});
  *g->add_output() = floatInput("a", {2, 3});
  *g->add_output() = floatInput("b", {2, 3});
  *g->add_output() = floatInput("c", {2, 3});
  const std::string model = writeModel(dir, m, "special.onnx");
  std::vector<float> x = {-2, -1e-40f, 0, 1e-40f, 1, 3};
  std::string bytes;
  onnx_import::encodeF32("x", {2, 3}, x.data()).SerializeToString(&bytes);
  writeFile(dir.file("x.pb"), bytes);
  auto r = runTandem({"import", model, "-o", dir.file("special.tir")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& which : {model, dir.file("special.tir")}) {
    const std::string out = dir.file(which == model ? "out_onnx" : "out_tir");
    r = runTandem({"run", which, "--input", "x=" + dir.file("x.pb"), "--output-dir", out});
    ASSERT_EQ(r.exit_code, 0) << which << ": " << r.err;
  }
  for (int k = 0; k < 3; ++k) {
    auto a = onnx_import::readTensorFile(dir.file(absl::StrCat("out_onnx/output_", k, ".pb")));
    auto b = onnx_import::readTensorFile(dir.file(absl::StrCat("out_tir/output_", k, ".pb")));
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    ASSERT_EQ(a->floats.size(), 6u);
    for (size_t i = 0; i < 6; ++i)
      EXPECT_EQ(std::isnan(a->floats[i]) ? 0x7fc00000u : std::bit_cast<uint32_t>(a->floats[i]),
                std::isnan(b->floats[i]) ? 0x7fc00000u : std::bit_cast<uint32_t>(b->floats[i]))
          << k << " " << i;
  }
  // x / 0 and x * -inf have infinities (and NaN for 0): the constants were not lost.
  auto a = onnx_import::readTensorFile(dir.file("out_tir/output_0.pb"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->floats[0], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(a->floats[5], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(a->floats[2]));
}

TEST(OnnxCli, BadModelsInputsAndFlagsAreOneLineExitTwo) {
  TempDir dir;
  const std::string model = writeModel(dir, smallCnn(), "cnn.onnx");
  const std::string images = writeImages(dir, 2);
  const std::string out = dir.file("out");
  onnx::ModelProto unsupported = smallCnn();
  unsupported.mutable_graph()->mutable_node(1)->set_op_type("Elu");
  intAttr(unsupported.mutable_graph()->mutable_node(0), "group", 1);
  expectUsageError(runTandem({"run", writeModel(dir, unsupported, "elu.onnx"), "--input",
                              "images=" + images, "--output-dir", out}),
                   "Tandem does not support 1 node: node 'relu' (Elu)");
  // A use of an op Tandem cannot express: named, with why.
  onnx::ModelProto dilated = smallCnn();
  intsAttr(dilated.mutable_graph()->mutable_node(0), "dilations", {2, 2});
  expectUsageError(runTandem({"run", writeModel(dir, dilated, "dilated.onnx"), "--input",
                              "images=" + images, "--output-dir", out}),
                   "Tandem does not support 1 node: node 'conv' (Conv): dilations [2,2]");
  const std::string bytes = bytesOf(smallCnn());
  writeFile(dir.file("cut.onnx"), bytes.substr(0, bytes.size() / 2));
  expectUsageError(
      runTandem({"run", dir.file("cut.onnx"), "--input", "images=" + images, "--output-dir", out}),
      "cut.onnx': not an ONNX ModelProto (protobuf could not parse it");
  expectUsageError(runTandem({"run", model, "--output-dir", out}),
                   "ONNX model '" + model + "': input 'images' leaves dimension 0 open");
  // Issue 40: the misnamed input is said, not the input left without a file.
  expectUsageError(runTandem({"run", model, "--input", "pixels=" + images, "--output-dir", out}),
                   "--input pixels: model '" + model + "' has no such input (it takes images)");
  expectUsageError(
      runTandem({"run", model, "--input", "images=" + dir.file("none.pb"), "--output-dir", out}),
      "--input images: cannot read tensor file");
  expectUsageError(runTandem({"run", model, "--input", "images", "--output-dir", out}),
                   "--input 'images': expected NAME=FILE.pb");
  expectUsageError(runTandem({"import", model, "-o", dir.file("cnn.txt")}),
                   "the module's file must end in .tir");
  expectUsageError(runTandem({"train", "--onnx", model, "--model", "lenet"}),
                   "--onnx: and --model lenet name two models; give one");
  expectUsageError(runTandem({"train", "--model", "lenet", "--reinit"}),
                   "--reinit: applies to an ONNX model");
  expectUsageError(
      runTandem({"train", "--onnx", model, "--logits", "probs"}),
      "--logits probs: model '" + model + "' has no such output (its outputs: logits)");
}

// The imported model trains data-parallel: two devices give one device's figures (up to
// the order of the gradient sums), and it learns.
TEST(OnnxCli, TrainOnnxLearnsOnTwoDevicesAsOnOne) {
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  TempDir dir;
  const std::string model = writeModel(dir, smallCnn(), "cnn.onnx");
  std::map<std::string, double> figures[2];
  for (int devices = 1; devices <= 2; ++devices) {
    const std::string csv = dir.file("m" + std::to_string(devices) + ".csv");
    auto r =
        runTandem({"train", "--onnx", model, "--devices", devices == 1 ? "cpu:0" : "cpu:0,cpu:1",
                   "--batch", "64", "--epochs", "2", "--limit-train", "2048", "--limit-test",
                   "1024", "--lr", "0.05", "--metrics", csv});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto rows = readCsv(csv);
    ASSERT_EQ(rows.size(), 2u) << r.out;
    for (const char* c : {"train_loss", "test_acc"})
      figures[devices - 1][c] = std::stod(rows[1][c]);
    EXPECT_LT(std::stod(rows[1]["train_loss"]), std::stod(rows[0]["train_loss"])) << r.out;
  }
  EXPECT_NEAR(figures[1]["train_loss"], figures[0]["train_loss"], 1e-4 * figures[0]["train_loss"]);
  EXPECT_NEAR(figures[1]["test_acc"], figures[0]["test_acc"], 2.0 / 1024);
  EXPECT_GT(figures[1]["test_acc"], 0.6);
}

}  // namespace
}  // namespace tandem::testing
