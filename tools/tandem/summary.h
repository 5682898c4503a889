#pragma once

#include <string>

#include "ir/ir.h"

namespace tandem::tools {

/// A human-readable overview of a (usually parallelized) module: variables and parameter
/// count, devices and per-device batch, node counts per graph and op, and the gradient
/// all_reduce buckets with their sizes.
std::string summarizeModule(const ir::Module& m);

/// Per graph and device: arena bytes of the memory plan, the bytes live at the peak, and
/// what the values would take without reuse (`tandem dump --memory`).
std::string memoryReport(const ir::Module& m);

}  // namespace tandem::tools
