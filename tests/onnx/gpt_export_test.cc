// The GPT of issue 43 through ONNX: a checkpoint of a short run exported (attention as
// torch.onnx.export writes SDPA at opset 17: MatMul, the causal mask added, Softmax),
// accepted by onnx.checker with its shape inference, and `tandem run` of the file gives
// the logits `tandem predict` (Model::predict's path) gives from the checkpoint. The
// model is rebuilt from the checkpoint's own settings (its heads, context, vocabulary).

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

using ::testing::HasSubstr;

std::string whyNoPythonOnnx() {
  const CommandResult r = runProgram("/usr/bin/python3", {"-c", "import numpy, onnx.checker"});
  return r.exit_code == 0 ? "" : "/usr/bin/python3 cannot import numpy and onnx: " + r.err;
}

TEST(GptExport, OnnxCheckerAcceptsItAndTandemRunGivesThePredictedLogits) {
  TANDEM_NEED_INSTALLED(whyNoPythonOnnx());
  TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "And God said, Let there be light: and there was light.\n";
  const std::string corpus = dir.write("corpus.txt", text);
  CommandResult r =
      runTandem({"train",       "--model",     "gpt",          "--data",  "text:" + corpus,
                 "--context",   "16",          "--gpt-layers", "2",       "--gpt-heads",
                 "2",           "--gpt-width", "32",           "--batch", "8",
                 "--steps",     "4",           "--warmup",     "1",       "--checkpoint",
                 dir.file("ck")});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string onnx = dir.file("gpt.onnx");
  r = runTandem({"export", "--checkpoint", dir.file("ck"), "-o", onnx});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("input x [N,16], output logits, ONNX opset 17"));

  // Ids of the text's vocabulary (its characters sorted: ids below their count), as the
  // ONNX tensor `tandem run` reads and the .npy `tandem predict` reads.
  CommandResult py = runProgram(
      "/usr/bin/python3",
      {"-c",
       "import sys, numpy as np, onnx\n"
       "from onnx import numpy_helper\n"
       "onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)\n"
       "x = (np.arange(3 * 16).reshape(3, 16) * 7 % 20).astype(np.int32)\n"
       "open(sys.argv[2], 'wb').write(numpy_helper.from_array(x, 'x').SerializeToString())\n"
       "np.save(sys.argv[3], x)\n",
       onnx, dir.file("x.pb"), dir.file("x.npy")});
  ASSERT_EQ(py.exit_code, 0) << py.err;
  r = runTandem({"run", onnx, "--input", "x=" + dir.file("x.pb"), "--output-dir", dir.file("out")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = runTandem({"predict", "--checkpoint", dir.file("ck"), "--input", "x=" + dir.file("x.npy"),
                 "-o", dir.file("predicted.npy"), "--batch", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  py = runProgram("/usr/bin/python3",
                  {"-c",
                   "import sys, numpy as np, onnx\n"
                   "from onnx import numpy_helper\n"
                   "a = numpy_helper.to_array(onnx.load_tensor(sys.argv[1]))\n"
                   "b = np.load(sys.argv[2])\n"
                   "assert a.shape == b.shape == (3, 16, 22), (a.shape, b.shape)\n"
                   "worst = float(np.abs(a - b).max() / np.abs(b).max())\n"
                   "print('largest difference', worst)\n"
                   "sys.exit(0 if worst <= 1e-5 else 1)\n",
                   dir.file("out/output_0.pb"), dir.file("predicted.npy")});
  EXPECT_EQ(py.exit_code, 0) << py.out << py.err;
}

}  // namespace
}  // namespace tandem::testing
