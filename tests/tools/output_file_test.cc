// OutputFile::closeAll (issue 40): files that belong together (import's module and its
// weights) are put in place together, or each path keeps what it had.

#include "tools/tandem/output_file.h"

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::tools {
namespace {

using testing::readFile;
using testing::TempDir;

/// The names in `dir` that start with '.': temporaries left behind.
std::vector<std::string> hiddenFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string()[0] == '.') out.push_back(e.path().filename().string());
  return out;
}

TEST(OutputFiles, AllArePutInPlaceTogether) {
  TempDir dir;
  dir.write("a", "old a");
  std::vector<OutputFile> files;
  for (const char* name : {"a", "b"}) {
    auto f = OutputFile::openReplacing(dir.file(name), "-o");
    ASSERT_TRUE(f.ok()) << f.status();
    files.push_back(*std::move(f));
  }
  ASSERT_TRUE(files[0].write("new a").ok());
  ASSERT_TRUE(files[1].write("new b").ok());
  // Nothing is in place before closeAll.
  EXPECT_EQ(readFile(dir.file("a")), "old a");
  EXPECT_FALSE(std::filesystem::exists(dir.file("b")));
  ASSERT_TRUE(OutputFile::closeAll(files).ok());
  EXPECT_EQ(readFile(dir.file("a")), "new a");
  EXPECT_EQ(readFile(dir.file("b")), "new b");
  EXPECT_EQ(hiddenFiles(dir.file("")), std::vector<std::string>{});
}

// The second rename fails (a directory took its path after it was opened): the first is
// undone, so `a` has its old content again, and no temporary is left.
TEST(OutputFiles, ARenameThatFailsUndoesTheOnesBefore) {
  TempDir dir;
  dir.write("a", "old a");
  std::vector<OutputFile> files;
  for (const char* name : {"a", "b", "c"}) {
    auto f = OutputFile::openReplacing(dir.file(name), "-o");
    ASSERT_TRUE(f.ok()) << f.status();
    files.push_back(*std::move(f));
  }
  for (OutputFile& f : files) ASSERT_TRUE(f.write("new").ok());
  ASSERT_EQ(mkdir(dir.file("c").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(dir.file("c/x").c_str(), 0755), 0);  // not empty: no rename replaces it
  const absl::Status s = OutputFile::closeAll(files);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().substr(0, s.message().find("': ") + 1),
            "-o: cannot write '" + dir.file("c") + "'");
  EXPECT_EQ(readFile(dir.file("a")), "old a");
  EXPECT_FALSE(std::filesystem::exists(dir.file("b")));
  files.clear();
  EXPECT_EQ(hiddenFiles(dir.file("")), std::vector<std::string>{});
}

}  // namespace
}  // namespace tandem::tools
