#pragma once

#include "ir/ir.h"

namespace tandem::passes {

/// The two queues of work every device has. Collectives run on the comm stream (of each
/// device they span), everything else on the compute stream of its device; a value that
/// crosses from one to the other is ordered by an event.
enum class StreamKind : uint8_t { kCompute, kComm };

inline StreamKind streamOf(const ir::Node& n) {
  return n.info().has(ir::kCollective) ? StreamKind::kComm : StreamKind::kCompute;
}

/// The device a value lives on: its own placement, or for a collective's results the
/// device of its group (results are grouped device-major, `k` per device).
ir::Device deviceOfValue(const ir::Value& v);

}  // namespace tandem::passes
