// `tandem plot` and `tandem train --plot`: the picture renders (decoded with libpng, an
// SVG first rasterized by rsvg-convert), its curves follow the data, and every failure a
// user can meet is one line naming the flag or the file and line.

#include "tools/tandem/plot.h"

#include <png.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

constexpr char kHeader[] =
    "epoch,train_loss,train_acc,test_loss,test_acc,seconds,images_per_s,eval_seconds\n";

// A metrics CSV of `epochs` rows: the loss falls from 2 and train accuracy rises to 0.9;
// test accuracy is `test_acc` throughout.
std::string metricsCsv(int epochs, double test_acc) {
  std::string csv = kHeader;
  for (int e = 1; e <= epochs; ++e)
    absl::StrAppend(&csv, absl::StrFormat("%d,%.6f,%.6f,0.5,%.6f,1.0,1000.0,0.1\n", e, 2.0 / e,
                                          0.9 - 0.5 / e, test_acc));
  return csv;
}

struct Picture {
  int width = 0, height = 0;
  std::vector<uint8_t> rgba;  // row-major, 4 bytes a pixel
  std::string error;          // why it could not be decoded

  // Rows of the pixels of exactly this colour ("#rrggbb").
  std::vector<int> rowsOf(const std::string& hex) const {
    unsigned r = 0, g = 0, b = 0;
    std::sscanf(hex.c_str(), "#%02x%02x%02x", &r, &g, &b);
    std::vector<int> rows;
    for (size_t i = 0; i + 3 < rgba.size(); i += 4)
      if (rgba[i] == r && rgba[i + 1] == g && rgba[i + 2] == b)
        rows.push_back(static_cast<int>(i / 4 / static_cast<size_t>(width)));
    return rows;
  }
  size_t distinctColours() const {
    std::set<uint32_t> colours;
    for (size_t i = 0; i + 3 < rgba.size(); i += 4)
      colours.insert(rgba[i] << 16 | rgba[i + 1] << 8 | rgba[i + 2]);
    return colours.size();
  }
};

// libpng's simplified API: any PNG to 8-bit RGBA.
Picture decodePng(const std::string& path) {
  Picture p;
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path.c_str())) {
    p.error = image.message;
    return p;
  }
  image.format = PNG_FORMAT_RGBA;
  p.rgba.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, p.rgba.data(), 0, nullptr)) {
    p.error = image.message;
    p.rgba.clear();
    return p;
  }
  p.width = static_cast<int>(image.width);
  p.height = static_cast<int>(image.height);
  return p;
}

// An SVG rasterized by librsvg (what a browser or viewer would show).
Picture renderSvg(const std::string& svg, const std::string& png) {
  CommandResult r = runProgram("/usr/bin/rsvg-convert", {"-o", png, svg});
  if (r.exit_code != 0) {
    Picture p;
    p.error = "rsvg-convert failed (apt-get install librsvg2-bin): " + r.err;
    return p;
  }
  return decodePng(png);
}

double meanRow(const std::vector<int>& rows) {
  double sum = 0;
  for (int r : rows) sum += r;
  return rows.empty() ? NAN : sum / rows.size();
}

// Every curve is drawn: each of the three colours covers a stretch of line, and the
// picture is a chart (axes, text, anti-aliasing), not a blank or a single colour.
void expectChart(const Picture& p) {
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.width, 800);
  EXPECT_EQ(p.height, 500);
  EXPECT_GT(p.distinctColours(), 20u);
  for (const char* colour : tools::kCurveColours)
    EXPECT_GT(p.rowsOf(colour).size(), 100u) << colour;
}

TEST(Plot, SvgRendersEveryCurveWithItsLegend) {
  TempDir dir;
  std::string csv = dir.write("m.csv", metricsCsv(10, 0.8));
  CommandResult r = runTandem({"plot", csv, "-o", dir.file("c.svg"), "--title", "lenet, 2 GPUs"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
  std::string svg = readFile(dir.file("c.svg"));
  for (const char* text : {"train loss", "train acc", "test acc", "lenet, 2 GPUs", "epoch"})
    EXPECT_NE(svg.find(text), std::string::npos) << text;
  expectChart(renderSvg(dir.file("c.svg"), dir.file("c.png")));
}

TEST(Plot, PngIsWrittenDirectly) {
  TempDir dir;
  std::string csv = dir.write("m.csv", metricsCsv(3, 0.8));
  CommandResult r = runTandem({"plot", csv, "-o", dir.file("c.PNG")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expectChart(decodePng(dir.file("c.PNG")));
}

// The curves follow the data: a test accuracy of 0.9 is drawn higher (a smaller row) than
// one of 0.1, and a single epoch still draws its points.
TEST(Plot, CurvesFollowTheData) {
  TempDir dir;
  double row[2];
  const double acc[2] = {0.9, 0.1};
  for (int i = 0; i < 2; ++i) {
    std::string csv = dir.write(absl::StrCat("m", i, ".csv"), metricsCsv(5, acc[i]));
    std::string png = dir.file(absl::StrCat("c", i, ".png"));
    ASSERT_EQ(runTandem({"plot", csv, "-o", png}).exit_code, 0);
    Picture p = decodePng(png);
    ASSERT_EQ(p.error, "");
    row[i] = meanRow(p.rowsOf(tools::kCurveColours[2]));
  }
  EXPECT_LT(row[0] + 100, row[1]);  // 0.8 of the axis apart, on a plot ~350 rows high

  std::string one = dir.write("one.csv", metricsCsv(1, 0.5));
  ASSERT_EQ(runTandem({"plot", one, "-o", dir.file("one.png")}).exit_code, 0);
  Picture p = decodePng(dir.file("one.png"));
  ASSERT_EQ(p.error, "");
  for (const char* colour : tools::kCurveColours) EXPECT_GT(p.rowsOf(colour).size(), 5u) << colour;
}

// A diverged run's NaN loss leaves a gap instead of failing the picture.
TEST(Plot, NonFiniteLossLeavesAGap) {
  TempDir dir;
  std::string csv =
      dir.write("m.csv", absl::StrCat(kHeader,
                                      "1,2.0,0.3,0.5,0.4,1,1,1\n2,nan,0.1,0.5,0.1,1,1,1\n"
                                      "3,inf,0.1,0.5,0.1,1,1,1\n"));
  CommandResult r = runTandem({"plot", csv, "-o", dir.file("c.svg")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(renderSvg(dir.file("c.svg"), dir.file("c.png")).error, "");
}

// A run by steps (a language model's: `train --steps N --eval-every K`, or a PyTorch run's
// CSV with only step, train_loss and val_loss) draws its losses against the step; two runs
// in one picture take a colour each, named by --label.
TEST(Plot, RunsByStepsAndSeveralRunsInOnePicture) {
  TempDir dir;
  const std::string tandem = dir.write(
      "tandem.csv",
      "epoch,train_loss,train_acc,test_loss,test_acc,seconds,images_per_s,eval_seconds,split,"
      "replans,lr,step,val_loss,val_bpc,tokens_per_s\n"
      "1,2.48,0,2.17,0,68.9,232,1.2,32/32,,0.00098,250,2.17,3.13,29711\n"
      "2,1.91,0,1.81,0,76.6,208,1.2,32/32,,0.00090,500,1.81,2.61,26750\n"
      "3,1.65,0,1.65,0,80.1,199,1.2,32/32,,0.00076,750,1.65,2.38,25582\n");
  const std::string pytorch = dir.write("pytorch.csv",
                                        "step,train_loss,val_loss\n250,2.47,2.15\n500,1.90,"
                                        "1.80\n750,1.64,1.66\n");
  CommandResult r = runTandem({"plot", tandem, "-o", dir.file("one.svg")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string svg = readFile(dir.file("one.svg"));
  for (const char* text : {"train loss", "val loss", "step", "tandem.csv"})
    EXPECT_NE(svg.find(text), std::string::npos) << text;
  EXPECT_EQ(svg.find("acc"), std::string::npos);  // no accuracy of a language model
  Picture one = renderSvg(dir.file("one.svg"), dir.file("one.png"));
  ASSERT_EQ(one.error, "");
  EXPECT_GT(one.rowsOf(tools::kCurveColours[0]).size(), 50u);
  EXPECT_GT(one.rowsOf(tools::kCurveColours[1]).size(), 50u);

  r = runTandem({"plot", tandem, pytorch, "--label", "Tandem", "--label", "PyTorch", "-o",
                 dir.file("both.png")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Picture both = decodePng(dir.file("both.png"));
  ASSERT_EQ(both.error, "");
  EXPECT_GT(both.rowsOf(tools::kRunColours[0]).size(), 50u);
  EXPECT_GT(both.rowsOf(tools::kRunColours[1]).size(), 50u);
  r = runTandem({"plot", tandem, pytorch, "--label", "Tandem", "--label", "PyTorch", "-o",
                 dir.file("both.svg")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  svg = readFile(dir.file("both.svg"));
  for (const char* text : {"Tandem train loss", "PyTorch val loss", "tandem.csv, pytorch.csv"})
    EXPECT_NE(svg.find(text), std::string::npos) << text;

  // What cannot share a picture, or a label that names no CSV, is said naming the flag or file.
  const std::string epochs = dir.write("epochs.csv", metricsCsv(3, 0.5));
  r = runTandem({"plot", tandem, epochs, "-o", dir.file("x.svg")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, absl::StrCat("tandem: ", epochs, ": a run by epochs, but ", tandem,
                                " is by steps (one picture has one x axis)\n"));
  r = runTandem({"plot", tandem, pytorch, "--label", "Tandem", "-o", dir.file("x.svg")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "tandem: --label: 1 labels for 2 CSVs; give one a CSV, in their order\n");
  dir.write("bad.csv", "step,train_loss,val_loss\n500,2,2\n250,1,1\n");
  r = runTandem({"plot", dir.file("bad.csv"), "-o", dir.file("x.svg")});
  EXPECT_EQ(r.err, absl::StrCat("tandem: ", dir.file("bad.csv"),
                                ":3: step 250 after step 500 (steps must increase: one run per "
                                "file)\n"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.svg")));
}

struct BadPlot {
  std::string csv;  // written to $TMP/m.csv
  std::vector<std::string> args;
  std::string message;  // after "tandem: "; $TMP is the scratch directory
};

TEST(Plot, BadInputIsOneLineNamingTheCulprit) {
  TempDir dir;
  const std::string tmp = dir.file("m.csv").substr(0, dir.file("m.csv").size() - 6);
  const std::vector<BadPlot> table = {
      {kHeader,
       {"$TMP/m.csv", "-o", "$TMP/c.pdf"},
       "-o: '$TMP/c.pdf' ends in neither .svg nor .png (the picture's format follows the name)"},
      {kHeader, {"$TMP/m.csv"}, "-o: missing; name the picture to write (FILE.svg or FILE.png)"},
      {kHeader,
       {"$TMP/m.csv", "-o", "$TMP/no/such/dir/c.svg"},
       "-o: cannot write '$TMP/no/such/dir/c.svg': No such file or directory"},
      {kHeader,
       {"$TMP/absent.csv", "-o", "$TMP/c.svg"},
       "cannot read '$TMP/absent.csv': No such file or directory"},
      {"",
       {"$TMP/m.csv", "-o", "$TMP/c.svg"},
       "$TMP/m.csv: empty (expected the CSV that tandem train --metrics writes)"},
      {kHeader,
       {"$TMP/m.csv", "-o", "$TMP/c.svg"},
       "$TMP/m.csv: no epochs to plot (a header and no rows)"},
      {"epoch,loss\n1,2\n",
       {"$TMP/m.csv", "-o", "$TMP/c.svg"},
       "$TMP/m.csv:1: the header has no column 'train_loss' (expected the CSV that tandem train "
       "--metrics writes)"},
      {absl::StrCat(kHeader, "1,2.0,0.3,0.5,0.4,1,1,1\n2,2.0,zero,0.5,0.4,1,1,1\n"),
       {"$TMP/m.csv", "-o", "$TMP/c.svg"},
       "$TMP/m.csv:3: train_acc 'zero' is not a number"},
      {absl::StrCat(kHeader, "1,2.0,0.3,0.5\n"),
       {"$TMP/m.csv", "-o", "$TMP/c.svg"},
       "$TMP/m.csv:2: 4 fields, the header has 8"},
      {absl::StrCat(kHeader, "2,2.0,0.3,0.5,0.4,1,1,1\n1,2.0,0.3,0.5,0.4,1,1,1\n"),
       {"$TMP/m.csv", "-o", "$TMP/c.svg"},
       "$TMP/m.csv:3: epoch 1 after epoch 2 (epochs must increase: one run per file)"},
      {absl::StrCat(kHeader, "1.5,2.0,0.3,0.5,0.4,1,1,1\n"),
       {"$TMP/m.csv", "-o", "$TMP/c.svg"},
       "$TMP/m.csv:2: epoch '1.5' is not an integer >= 1"},
  };
  auto expand = [&](std::string s) {
    for (size_t at; (at = s.find("$TMP")) != std::string::npos;) s.replace(at, 4, tmp);
    return s;
  };
  for (const BadPlot& row : table) {
    dir.write("m.csv", row.csv);
    std::vector<std::string> args = {"plot"};
    for (const std::string& a : row.args) args.push_back(expand(a));
    CommandResult r = runTandem(args);
    EXPECT_EQ(r.err, absl::StrCat("tandem: ", expand(row.message), "\n")) << args[1];
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("c.svg")));  // nothing half-made left behind
}

// tandem with PATH set to `path`.
CommandResult runWithPath(const std::string& path, const std::vector<std::string>& args) {
  std::vector<std::string> env_args = {"PATH=" + path, TANDEM_CLI_PATH};
  env_args.insert(env_args.end(), args.begin(), args.end());
  return runProgram("/usr/bin/env", env_args);
}

TEST(Plot, MissingGnuplotSaysWhatToInstallBeforeTraining) {
  TempDir dir;
  std::string csv = dir.write("m.csv", metricsCsv(2, 0.5));
  EXPECT_TRUE(isUsageError(runWithPath(dir.file("empty"), {"plot", csv, "-o", dir.file("c.svg")}),
                           {"-o: gnuplot is not installed (not found on PATH); install it with: "
                            "apt-get install gnuplot-nox"}));
  // train says so before it reads the data (which is missing here) or trains.
  EXPECT_TRUE(isUsageError(
      runWithPath(dir.file("empty"), {"train", "--model", "lenet", "--data", dir.file("nodata"),
                                      "--plot", dir.file("c.svg")}),
      {"--plot: gnuplot is not installed"}));
}

// What gnuplot says when it fails comes through in the one line.
TEST(Plot, GnuplotFailuresArePassedOn) {
  TempDir dir;
  std::string csv = dir.write("m.csv", metricsCsv(2, 0.5));
  std::filesystem::create_directory(dir.file("bin"));
  dir.write("bin/gnuplot", "#!/bin/sh\necho 'unknown or ambiguous terminal type' >&2\nexit 1\n");
  chmod(dir.file("bin/gnuplot").c_str(), 0755);
  EXPECT_TRUE(isUsageError(runWithPath(dir.file("bin"), {"plot", csv, "-o", dir.file("c.png")}),
                           {"-o: this gnuplot cannot write PNG (unknown or ambiguous terminal "
                            "type); install gnuplot-nox, or name a .svg file"}));
  // Terminal check passes, drawing fails.
  dir.write("bin/gnuplot",
            "#!/bin/sh\n[ \"$1\" = -e ] && exit 0\necho 'line 9: out of memory' >&2\nexit 1\n");
  CommandResult r = runWithPath(dir.file("bin"), {"plot", csv, "-o", dir.file("c.svg")});
  EXPECT_TRUE(isUsageError(r, {"-o: gnuplot failed drawing '",
                               "c.svg' (exit code 1): line 9: "
                               "out of memory"}));
  EXPECT_FALSE(std::filesystem::exists(dir.file("c.svg")));
}

// Issue 21, class 4: a gnuplot that never returns (and ignores SIGTERM). Past its deadline
// it is killed and the command fails naming it; SIGTERM to tandem ends gnuplot's process
// group too, and tandem exits 128 + the signal with one line. It used to wait forever, in a
// process group the terminal's signals never reach, killable only with kill -9.
class HungGnuplot : public ::testing::Test {
 protected:
  void SetUp() override {
    csv_ = dir_.write("m.csv", metricsCsv(2, 0.5));
    std::filesystem::create_directory(dir_.file("bin"));
    dir_.write("bin/gnuplot",
               absl::StrCat("#!/bin/sh\n[ \"$1\" = -e ] && exit 0\necho $$ > ", dir_.file("pid"),
                            "\ntrap '' TERM INT\nwhile :; do /bin/sleep 1; done\n"));
    chmod(dir_.file("bin/gnuplot").c_str(), 0755);
  }
  // Whether the fake gnuplot whose pid it wrote is gone.
  bool gnuplotGone() const {
    const std::string pid = readFile(dir_.file("pid"));
    return !pid.empty() && !std::filesystem::exists("/proc/" + pid.substr(0, pid.find('\n')));
  }
  // Starts tandem with PATH at the fake gnuplot; signals it once gnuplot runs.
  void runAndSignal(const std::vector<std::string>& args, int sig, int* status, double* seconds) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("PATH", dir_.file("bin").c_str(), 1);
      if (std::freopen(dir_.file("err").c_str(), "w", stderr) == nullptr) _exit(126);
      if (std::freopen(dir_.file("out").c_str(), "w", stdout) == nullptr) _exit(126);
      std::vector<char*> argv = {const_cast<char*>(TANDEM_CLI_PATH)};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(TANDEM_CLI_PATH, argv.data());
      _exit(127);
    }
    // The drawing gnuplot has started when it wrote its pid (the terminal check does not).
    for (int i = 0; i < 1200 && readFile(dir_.file("pid")).empty(); ++i) usleep(50 * 1000);
    ASSERT_FALSE(readFile(dir_.file("pid")).empty()) << readFile(dir_.file("err"));
    const auto start = std::chrono::steady_clock::now();
    kill(pid, sig);
    ASSERT_EQ(waitpid(pid, status, 0), pid);
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  TempDir dir_;
  std::string csv_;
};

TEST_F(HungGnuplot, IsKilledAtItsDeadline) {
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r =
      runProgram("/usr/bin/env", {"PATH=" + dir_.file("bin"), "TANDEM_TEST_CHILD_DEADLINE_S=1",
                                  hookedCliPath(), "plot", csv_, "-o", dir_.file("c.svg")});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_EQ(r.err, "tandem: -o: gnuplot did not finish within 1 s (killed; it printed nothing)\n");
  EXPECT_LT(seconds, 10);
  EXPECT_TRUE(gnuplotGone());
  EXPECT_FALSE(std::filesystem::exists(dir_.file("c.svg")));
}

TEST_F(HungGnuplot, SigtermEndsPlotAndGnuplot) {
  int status = 0;
  double seconds = 0;
  runAndSignal({"plot", csv_, "-o", dir_.file("c.svg")}, SIGTERM, &status, &seconds);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by the signal instead of stopping";
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  EXPECT_LT(seconds, 5);
  EXPECT_EQ(readFile(dir_.file("err")),
            "tandem: -o: stopped by SIGTERM while gnuplot drew (gnuplot ended); nothing was "
            "written\n");
  EXPECT_TRUE(gnuplotGone());
}

TEST_F(HungGnuplot, CtrlCStopsTrainingWhileItRedraws) {
  writeIdxSplit(dir_, "train", 100);
  writeIdxSplit(dir_, "t10k", 50);
  std::string data = dir_.file("");
  data.pop_back();
  int status = 0;
  double seconds = 0;
  runAndSignal({"train", "--model", "lenet", "--data", data, "--batch", "50", "--epochs", "3",
                "--plot", dir_.file("t.svg")},
               SIGINT, &status, &seconds);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by the signal instead of stopping";
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT);
  EXPECT_LT(seconds, 5);
  EXPECT_EQ(readFile(dir_.file("err")),
            "tandem: stopped by Ctrl-C (SIGINT) after epoch 1; the table has every epoch\n");
  EXPECT_NE(readFile(dir_.file("out")).find("\n    1 "), std::string::npos);
  EXPECT_TRUE(gnuplotGone());
}

// train --plot draws the epochs it has run, the same picture as plot over its --metrics.
TEST(Plot, TrainDrawsEveryEpoch) {
  TempDir dir;
  writeIdxSplit(dir, "train", 100);
  writeIdxSplit(dir, "t10k", 50);
  std::string data = dir.file("train").substr(0, dir.file("train").size() - 6);
  CommandResult r =
      runTandem({"train", "--model", "lenet", "--devices", "2", "--batch", "50", "--epochs", "3",
                 "--data", data, "--metrics", dir.file("m.csv"), "--plot", dir.file("t.svg")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string svg = readFile(dir.file("t.svg"));
  EXPECT_NE(svg.find("lenet on [cpu:0, cpu:1], batch 50, lr 0.1<"), std::string::npos);
  expectChart(renderSvg(dir.file("t.svg"), dir.file("t.png")));
  // The same curves as plot draws from the CSV (to its 6 decimals: within a pixel).
  ASSERT_EQ(runTandem({"plot", dir.file("m.csv"), "-o", dir.file("p.svg")}).exit_code, 0);
  Picture trained = renderSvg(dir.file("t.svg"), dir.file("t.png"));
  Picture plotted = renderSvg(dir.file("p.svg"), dir.file("p.png"));
  for (const char* colour : tools::kCurveColours)
    EXPECT_NEAR(meanRow(trained.rowsOf(colour)), meanRow(plotted.rowsOf(colour)), 1.0) << colour;
}

}  // namespace
}  // namespace tandem::testing
