#pragma once

// Whether this build's `tandem explore` can write pages, for the CLI's tests: kept here,
// under tests/tools, because it asks the CLI (tools/tandem/explore), and nothing outside
// the CLI and its tests includes a header under tools/.

#include <string>

#include "tools/tandem/explore/page.h"

namespace tandem::testing {

/// "" when this build embedded tandem explore's layout library (dagre, from Debian's
/// python3-xstatic-dagre), else why explore refuses to write pages.
inline std::string whyNoExploreLayout() {
  if (tools::explore::haveLayoutLibrary()) return "";
  return "this build has no layout library for tandem explore (Debian package "
         "python3-xstatic-dagre was not installed when it was built)";
}

}  // namespace tandem::testing
