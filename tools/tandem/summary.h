#pragma once

#include <string>

#include "ir/ir.h"

namespace tandem::tools {

/// "[cpu:0, cpu:1]", or past 16 devices "[cpu:0, cpu:1, ..., cpu:4095] (4096 devices)".
std::string deviceList(const std::vector<ir::Device>& devices);

/// "1,234,567": counts in reports are read by people.
std::string thousands(int64_t n);

/// A human-readable overview of a (usually parallelized) module: variables and parameter
/// count, devices and per-device batch, node counts per graph and op, and the gradient
/// all_reduce buckets with their sizes.
std::string summarizeModule(const ir::Module& m);

/// Per graph and device: arena bytes of the memory plan, the bytes live at the peak, and
/// what the values would take without reuse (`tandem dump --format memory`); one graph
/// only when `only` is set. Every graph reported must have a plan. Then (all graphs) per
/// device the parameter, gradient, optimizer-state and buffer bytes, so that sharded and
/// replicated updates compare (a sharded variable counts its device's shard).
std::string memoryReport(const ir::Module& m, const ir::Graph* only = nullptr);

}  // namespace tandem::tools
