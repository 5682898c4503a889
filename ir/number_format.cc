#include "ir/number_format.h"

#include <charconv>

namespace tandem::ir {

std::string formatDouble(double v) {
  char buf[64];
  // std::to_chars without a precision gives the shortest round-tripping form.
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, end);
}

}  // namespace tandem::ir
