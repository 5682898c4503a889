#include "tools/tandem/explore/page.h"

#include "absl/strings/str_replace.h"
#include "tools/tandem/explore/assets.h"

namespace tandem::tools::explore {
namespace {

// Text for an HTML element's content.
std::string htmlEscape(const std::string& text) {
  return absl::StrReplaceAll(text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}});
}

// Inside a <script> element nothing may read as "</script" or "<!--": JSON has '<' only
// inside strings, where \u003c means the same character.
std::string scriptSafeJson(const std::string& json) {
  return absl::StrReplaceAll(json, {{"<", "\\u003c"}});
}

// Replaces the first `marker` in `page` at or after `from` with `text`, and moves `from`
// past it: the markers are the template's own, in its order, and text filled in is never
// searched again (a script may contain anything).
void fill(std::string& page, size_t& from, const std::string& marker, std::string_view text) {
  const size_t at = page.find(marker, from);
  if (at == std::string::npos) return;
  page.replace(at, marker.size(), text);
  from = at + text.size();
}

}  // namespace

bool haveLayoutLibrary() { return !layoutLibrary().empty(); }

std::string explorePage(const std::string& data_json, const std::string& title) {
  std::string page(pageTemplate());
  size_t from = 0;
  fill(page, from, "@TITLE@", htmlEscape(title));
  fill(page, from, "/*@STYLE@*/", pageStyle());
  fill(page, from, "/*@LAYOUT@*/", layoutLibrary());
  fill(page, from, "/*@DATA@*/", scriptSafeJson(data_json));
  fill(page, from, "/*@SCRIPT@*/", pageScript());
  return page;
}

}  // namespace tandem::tools::explore
