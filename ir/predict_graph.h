#pragma once

// The prediction graph (issue 42): a forward-only step whose outputs hold one row per
// example, which data parallelism leaves on the devices that computed them (no reduction)
// and the runtime gathers in device order. Its own header rather than ir.h's list of
// graph names, since only the builder, the verifier, the passes that treat it apart and
// the runtime that gathers it need it.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/ir.h"

namespace tandem::ir {

/// @predict_step: the model's forward in inference mode, from the inputs it reads to its
/// per-example outputs ([batch, ...] each). frontend/build_module.h's buildPredictModule
/// builds it in a module of its own.
inline constexpr absl::string_view kPredictGraph = "predict_step";

/// The rows of the batch each module device computes in `g` (one entry, the batch, before
/// replicate): the first axis of the device's input before insert-collectives, the
/// split's sizes after it. An error when the graph has no inputs or the devices' rows
/// cannot be told.
absl::StatusOr<std::vector<int64_t>> rowsPerDevice(const Graph& g);

/// The prediction graph's contract, which the verifier checks after every pass: it
/// reads at least one input, and it returns k outputs per module device, device-major
/// (device d's k outputs, then device d+1's), each on its device, with the device's rows
/// first ([rows(d), ...], the same type as device 0's beyond that axis) and made by no
/// collective (a reduction across devices would add different examples' rows).
absl::Status verifyPredictGraph(const Graph& g);

}  // namespace tandem::ir
