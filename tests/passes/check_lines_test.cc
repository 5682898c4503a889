// Every registered pass has check-line tests: tests/checks/passes/NAME.tir (the pass name
// with '_' for '-'), whose RUN lines run that pass.

#include <filesystem>
#include <string>

#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "passes/registry.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

TEST(CheckLines, EveryPassHasItsFile) {
  for (const passes::PassInfo& info : passes::registeredPasses()) {
    const std::string name(info.name);
    const std::string file =
        "tests/checks/passes/" + absl::StrReplaceAll(name, {{"-", "_"}}) + ".tir";
    ASSERT_TRUE(std::filesystem::exists(sourcePath(file))) << name << ": no " << file;
    const std::string text = readFile(sourcePath(file));
    EXPECT_NE(text.find("// RUN: tandem opt %s --passes"), std::string::npos) << file;
    EXPECT_NE(text.find(name), std::string::npos) << file << " does not run " << name;
    EXPECT_NE(text.find("// CHECK"), std::string::npos) << file;
  }
}

}  // namespace
}  // namespace tandem::testing
