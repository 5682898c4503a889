// `tandem devices` and `tandem --version`: what this build is and what it can run on,
// as the backend registry says (backend/registry.cc).

#include "absl/strings/str_cat.h"
#include "backend/backend.h"
#include "ir/status_macros.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/output_file.h"

#ifndef TANDEM_VERSION
#define TANDEM_VERSION "unknown"
#endif
#ifndef TANDEM_BUILD_TYPE
#define TANDEM_BUILD_TYPE "unknown"
#endif

namespace tandem::tools {

std::string versionText() {
  return absl::StrCat("tandem ", TANDEM_VERSION, " (", TANDEM_BUILD_TYPE, " build, g++ ",
                      __VERSION__, ", C++20)\n", backend::backendVersions());
}

absl::Status runDevices() {
  std::string text = backend::describeBackends();
  OutputFile out = OutputFile::standardOutput();
  RETURN_IF_ERROR(out.write(text));
  return out.close();
}

}  // namespace tandem::tools
