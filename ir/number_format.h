#pragma once

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace tandem::ir {

/// Text that parses back (parseDouble) to exactly `v`, bit for bit. A finite number is
/// its shortest decimal form ("0.01", "1e-05", "0", "-0", "1e-45"); infinities are "inf"
/// and "-inf"; a NaN is "nan" (or "-nan" with the sign bit set) when its payload is the
/// default quiet one, else "nan(0xP)" with P the 52 bits of its significand in hex, so
/// every f32 and f64 value an attribute holds round-trips through the IR text.
std::string formatDouble(double v);

/// The value of text formatDouble writes (and any decimal number, with an optional sign
/// and exponent); nullopt when `text` is not one, or has anything after it.
std::optional<double> parseDouble(absl::string_view text);

}  // namespace tandem::ir
