#include "tests/test_util.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backend/backend.h"
#include "backend/backends.h"
#include "backend/cpu/cpu_info.h"
#include "frontend/build_module.h"
#include "frontend/zoo/zoo.h"
#include "gtest/gtest.h"
#include "ir/printer.h"
#include "passes/optimizer_options.h"
#include "passes/pass_manager.h"

namespace tandem::testing {

namespace {
// Every test program knows the kinds this build has before its first test, as the CLI
// does (backend::registerBackends): compiling for a device asks its target's facts.
[[maybe_unused]] const bool kBackendsRegistered = (backend::registerBackends(), true);
}  // namespace

std::string sourcePath(const std::string& relative) {
  return std::string(TANDEM_SOURCE_DIR) + "/" + relative;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string compareWithGolden(const std::string& actual, const std::string& golden_relative) {
  std::string path = sourcePath(golden_relative);
  const char* update = std::getenv("TANDEM_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    writeFile(path, actual);
    return "";
  }
  std::ifstream probe(path);
  if (!probe)
    return "golden file " + golden_relative + " is missing (run with TANDEM_UPDATE_GOLDEN=1)";
  std::string expected = readFile(path);
  if (expected == actual) return "";
  // First differing line, to keep failures readable.
  std::istringstream a(actual), e(expected);
  std::string la, le;
  for (int line = 1;; ++line) {
    bool ga = static_cast<bool>(std::getline(a, la)), ge = static_cast<bool>(std::getline(e, le));
    if (!ga && !ge) break;
    if (!ga || !ge || la != le)
      return golden_relative + ":" + std::to_string(line) +
             " differs\n  expected: " + (ge ? le : "<end of file>") +
             "\n  actual:   " + (ga ? la : "<end of file>") +
             "\n(regenerate with TANDEM_UPDATE_GOLDEN=1 if the change is intended)";
  }
  return golden_relative + " differs";
}

ir::OptimizerConfig optimizerWith(const std::string& name,
                                  const std::vector<std::pair<std::string, double>>& values) {
  absl::StatusOr<ir::Op> op = passes::optimizerByName(name);
  if (!op.ok()) {
    ADD_FAILURE() << op.status();
    std::abort();
  }
  ir::OptimizerConfig config = *passes::optimizerConfig(*op);
  for (const auto& [attr, value] : values) passes::setHyperParameter(config, attr, value);
  return config;
}

std::unique_ptr<ir::Module> buildZooModel(const std::string& name, int64_t batch) {
  auto spec = zoo::modelByName(name);
  if (!spec.ok()) {
    ADD_FAILURE() << spec.status();
    return nullptr;
  }
  auto m = buildModule(*spec, {.batch = batch});
  if (!m.ok()) {
    ADD_FAILURE() << m.status();
    return nullptr;
  }
  return *std::move(m);
}

absl::Status runPipeline(ir::Module& m, const std::string& pipeline) {
  passes::PassManager pm;
  if (absl::Status s = pm.addPipeline(pipeline); !s.ok()) return s;
  return pm.run(m);
}

std::string canonical(const ir::Module& m) { return ir::printModule(m, {.locations = false}); }

namespace {

std::string drain(int fd) {
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

}  // namespace

CommandResult runProgram(const std::string& path, const std::vector<std::string>& args,
                         const std::string& stdin_text) {
  // Output goes to temporary files so large dumps cannot dead-lock on a full pipe.
  char out_name[] = "/tmp/tandem_test_outXXXXXX";
  char err_name[] = "/tmp/tandem_test_errXXXXXX";
  char in_name[] = "/tmp/tandem_test_inXXXXXX";
  int out_fd = mkstemp(out_name), err_fd = mkstemp(err_name), in_fd = mkstemp(in_name);
  if (write(in_fd, stdin_text.data(), stdin_text.size()) != static_cast<ssize_t>(stdin_text.size()))
    ADD_FAILURE() << "cannot write stdin file";
  lseek(in_fd, 0, SEEK_SET);
  CommandResult result;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(path.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(path.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  lseek(out_fd, 0, SEEK_SET);
  lseek(err_fd, 0, SEEK_SET);
  result.out = drain(out_fd);
  result.err = drain(err_fd);
  close(out_fd);
  close(err_fd);
  close(in_fd);
  unlink(out_name);
  unlink(err_name);
  unlink(in_name);
  return result;
}

CommandResult runTandem(const std::vector<std::string>& args, const std::string& stdin_text) {
  return runProgram(TANDEM_CLI_PATH, args, stdin_text);
}

CommandResult runHookedTandem(const std::vector<std::string>& args) {
  return runProgram(TANDEM_HOOKED_CLI_PATH, args);
}

std::string hookedCliPath() { return TANDEM_HOOKED_CLI_PATH; }

bool setupInstalledEverything() {
  const char* v = std::getenv("TANDEM_TESTS_AFTER_SETUP");
  return v != nullptr && std::string(v) == "1";
}

std::string whyNoFashionMnist() {
  const std::string file = absl::StrCat(kFashionMnistDir, "/train-images-idx3-ubyte.gz");
  if (::access(file.c_str(), R_OK) == 0) return "";
  return absl::StrCat(kFashionMnistDir, " is missing (Debian package dataset-fashion-mnist)");
}

std::string whyNoTorch() {
  const CommandResult r = runProgram("/usr/bin/python3", {"-c", "import numpy, torch"});
  return r.exit_code == 0 ? "" : "/usr/bin/python3 cannot import numpy and torch: " + r.err;
}

std::string whyNoMpirun() {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "", ':')) {
    const std::string candidate = absl::StrCat(dir, "/mpirun");
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return "";
  }
  return "mpirun is missing (Debian package openmpi-bin): multi-process runs are not tested";
}

std::string whyNoGraphviz() {
  if (::access("/usr/bin/dot", X_OK) == 0) return "";
  return "/usr/bin/dot is not installed (Debian package graphviz): DOT output is not rendered";
}

std::string whyNoChromium() {
  if (::access("/usr/bin/chromium", X_OK) == 0) return "";
  return "/usr/bin/chromium is not installed (Debian package chromium): explore's pages are "
         "not opened in a browser";
}

std::string whyNoBf16() {
  const backend::cpu::CpuInfo cpu = backend::cpu::hostCpuInfo();
  if (cpu.bf16) return "";
  return "this CPU (" + cpu.model + ", oneDNN ISA " + cpu.isa +
         ") has no bf16 instructions (AVX512_BF16 or AMX)";
}

}  // namespace tandem::testing
