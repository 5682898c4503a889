// The layering of front ends over the backend seam: no front end (the CLI, the public API,
// the training library, the examples) and not the runtime includes a header of a concrete
// backend; they set backend settings by name (backend/settings.h) and ask the registry.

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

// "file:line: the include" for every include of backend/cpu or backend/cuda under `dir`.
std::vector<std::string> concreteBackendIncludes(const fs::path& root, const std::string& dir) {
  static const std::regex kConcrete(R"re(^\s*#\s*include\s*[<"]backend/(cpu|cuda)/)re");
  std::vector<std::string> found;
  for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h" && ext != ".cu")) continue;
    std::ifstream in(entry.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n)
      if (std::regex_search(line, kConcrete))
        found.push_back(fs::relative(entry.path(), root).string() + ":" + std::to_string(n) + ": " +
                        line);
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

}  // namespace
}  // namespace tandem::testing
