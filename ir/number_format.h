#pragma once

#include <string>

namespace tandem::ir {

/// Shortest decimal text that parses back to exactly `v` ("0.01", "1e-05", "0").
/// The IR printer uses it so that attribute values round-trip bit for bit.
std::string formatDouble(double v);

}  // namespace tandem::ir
