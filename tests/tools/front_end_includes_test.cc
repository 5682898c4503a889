// The layering of front ends over the backend seam: no front end (the CLI, the public API,
// the training library, the examples) and not the runtime includes a header of a concrete
// backend; they set backend settings by name (backend/settings.h) and ask the registry.
// Nothing outside the CLI (tools/) and its tests includes a header of the CLI, and the CPU
// backend nothing of the CUDA backend.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;

// "file:line: the include" for every include under `dir` that `include` matches, leaving
// out the folders `skip` (paths from `root`).
std::vector<std::string> includesMatching(const fs::path& root, const std::string& dir,
                                          const std::regex& include,
                                          const std::vector<std::string>& skip = {}) {
  std::vector<std::string> found;
  for (auto it = fs::recursive_directory_iterator(root / dir);
       it != fs::recursive_directory_iterator(); ++it) {
    const fs::directory_entry& entry = *it;
    const std::string rel = fs::relative(entry.path(), root).string();
    if (entry.is_directory() && std::find(skip.begin(), skip.end(), rel) != skip.end()) {
      it.disable_recursion_pending();
      continue;
    }
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h" && ext != ".cu")) continue;
    std::ifstream in(entry.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n)
      if (std::regex_search(line, include))
        found.push_back(rel + ":" + std::to_string(n) + ": " + line);
  }
  return found;
}

// "file:line: the include" for every include of backend/cpu or backend/cuda under `dir`.
std::vector<std::string> concreteBackendIncludes(const fs::path& root, const std::string& dir) {
  static const std::regex kConcrete(R"re(^\s*#\s*include\s*[<"]backend/(cpu|cuda)/)re");
  return includesMatching(root, dir, kConcrete);
}

// "file:line: the include" for every include of a header under tools/ in the folders
// under `root` but tools/ itself, the CLI's tests (tests/tools) and build folders.
std::vector<std::string> cliIncludes(const fs::path& root) {
  static const std::regex kCli(R"re(^\s*#\s*include\s*[<"]tools/)re");
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name == "tools" || name.rfind("build", 0) == 0 ||
        name.rfind('.', 0) == 0)
      continue;
    for (std::string& f : includesMatching(root, name, kCli, {"tests/tools"}))
      found.push_back(std::move(f));
  }
  return found;
}

TEST(FrontEndIncludes, NoFrontEndIncludesAConcreteBackend) {
  const fs::path root = TANDEM_SOURCE_DIR;
  std::vector<std::string> found;
  for (const char* dir : {"tools", "tandem", "train", "examples", "runtime"}) {
    ASSERT_TRUE(fs::is_directory(root / dir)) << dir;
    for (std::string& f : concreteBackendIncludes(root, dir)) found.push_back(std::move(f));
  }
  EXPECT_TRUE(found.empty()) << "front ends set backend settings by name "
                                "(backend/settings.h) instead:\n"
                             << absl::StrJoin(found, "\n");
}

// The scan itself finds such an include (a test that cannot fail proves nothing).
TEST(FrontEndIncludes, TheScanFindsAnInclude) {
  const fs::path dir = fs::temp_directory_path() / "tandem_front_end_includes_test";
  fs::create_directories(dir / "front");
  std::ofstream(dir / "front" / "a.cc") << "#include \"backend/settings.h\"\n"
                                        << "  #include \"backend/cuda/cuda_options.h\"\n";
  const std::vector<std::string> found = concreteBackendIncludes(dir, "front");
  fs::remove_all(dir);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0], "front/a.cc:2:   #include \"backend/cuda/cuda_options.h\"");
}

// The CPU backend builds without the CUDA one: the math both run (TANDEM_HD) is in
// backend/ itself (backend/unary_math.h, ...), not under backend/cuda.
TEST(FrontEndIncludes, TheCpuBackendIncludesNothingOfCuda) {
  static const std::regex kCuda(R"re(^\s*#\s*include\s*[<"]backend/cuda/)re");
  const std::vector<std::string> found = includesMatching(TANDEM_SOURCE_DIR, "backend/cpu", kCuda);
  EXPECT_TRUE(found.empty()) << "math both backends run goes in backend/ (TANDEM_HD):\n"
                             << absl::StrJoin(found, "\n");
}

// Only the CLI and its tests include the CLI's headers: the training library, the public
// API and the shared test helpers sit below it or beside it (issue 41).
TEST(FrontEndIncludes, NothingOutsideTheCliIncludesItsHeaders) {
  const std::vector<std::string> found = cliIncludes(TANDEM_SOURCE_DIR);
  EXPECT_TRUE(found.empty()) << "only tools/ and tests/tools include a header under tools/:\n"
                             << absl::StrJoin(found, "\n");
}

// The scan finds such an include outside tools/, and none in tools/ or tests/tools.
TEST(FrontEndIncludes, TheCliScanFindsAnInclude) {
  const fs::path dir = fs::temp_directory_path() / "tandem_cli_includes_test";
  for (const char* sub : {"tools/tandem", "tests/tools", "tests/api", "train"})
    fs::create_directories(dir / sub);
  for (const char* file : {"tools/tandem/a.cc", "tests/tools/a.cc", "tests/api/a.cc", "train/a.h"})
    std::ofstream(dir / file) << "#include \"tools/tandem/explore/page.h\"\n";
  std::vector<std::string> found = cliIncludes(dir);
  fs::remove_all(dir);
  std::sort(found.begin(), found.end());
  EXPECT_EQ(found,
            (std::vector<std::string>{"tests/api/a.cc:1: #include \"tools/tandem/explore/page.h\"",
                                      "train/a.h:1: #include \"tools/tandem/explore/page.h\""}));
}

}  // namespace
}  // namespace tandem::testing
