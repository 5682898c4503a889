#pragma once

// The page `tandem explore` writes: one HTML file with its style, script, layout library
// and data inlined, so that it opens from a file:// URL with no network.

#include <string>

#include "absl/status/statusor.h"

namespace tandem::tools::explore {

/// Whether this build embedded the graph layout library the page needs.
bool haveLayoutLibrary();

/// page.html with explore.css, the layout library, explore.js and `data_json` (pageData's
/// document) inlined, titled `title`. The data is escaped so that no text in it (a scope,
/// a file name) can end its script element.
std::string explorePage(const std::string& data_json, const std::string& title);

}  // namespace tandem::tools::explore
