// Collectives. Their operands and results are grouped by the `devices` attribute; the
// verifier checks that each group really lives on its device.

#include "ir/interfaces.h"
#include "ir/op_views.h"
#include "ir/ops/rule_util.h"
#include "ir/status_macros.h"

namespace tandem::ir {
namespace {
using namespace rules;

absl::StatusOr<size_t> deviceCount(const Node& n) {
  size_t d = CollectiveView(n).devices().size();
  if (d == 0) return fail("the devices list is empty");
  return d;
}

// The number of device groups, checked to cut the devices into equal groups.
absl::StatusOr<size_t> groupCount(const Node& n, size_t devices) {
  const int64_t g = CollectiveView(n).numGroups();
  if (g < 1 || static_cast<size_t>(g) > devices || devices % static_cast<size_t>(g) != 0)
    return fail(absl::StrCat("groups=", g, " does not cut the ", devices,
                             devices == 1 ? " device" : " devices", " into equal groups"));
  return static_cast<size_t>(g);
}

absl::StatusOr<Types> inferSplit(const Node& n) {
  auto d = deviceCount(n);
  if (!d.ok()) return d.status();
  const TensorType& x = typeOf(n, 0);
  int64_t axis = SplitView(n).axis();
  if (axis < 0 || axis >= x.rank())
    return fail(absl::StrCat("axis ", axis, " is out of range for ", describeOperand(n, 0)));
  const auto sizes = SplitView(n).sizes();
  if (sizes.size() != *d)
    return fail(absl::StrCat("sizes has ", sizes.size(), " entries for ", *d, " devices"));
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 1) return fail("every device must get at least one slice (sizes must be >= 1)");
    if (__builtin_add_overflow(total, s, &total))
      return fail(absl::StrCat("sizes add up to more than int64 holds but axis ", axis, " of ",
                               describeOperand(n, 0), " has ", x.shape[axis]));
  }
  if (total != x.shape[axis])
    return fail(absl::StrCat("sizes add up to ", total, " but axis ", axis, " of ",
                             describeOperand(n, 0), " has ", x.shape[axis]));
  Types out;
  for (int64_t s : sizes) {
    TensorType t = x;
    t.shape[axis] = s;
    out.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<Types> inferConcat(const Node& n) {
  auto d = deviceCount(n);
  if (!d.ok()) return d.status();
  if (*d != 1) return fail("concat gathers onto exactly one device");
  TensorType out = typeOf(n, 0);
  int64_t axis = ConcatView(n).axis();
  if (axis < 0 || axis >= out.rank())
    return fail(absl::StrCat("axis ", axis, " is out of range for ", describeOperand(n, 0)));
  for (size_t i = 1; i < n.numOperands(); ++i) {
    TensorType t = typeOf(n, i);
    if (t.rank() != out.rank() || t.dtype != out.dtype)
      return fail(absl::StrCat(describeOperand(n, i), " does not match ", describeOperand(n, 0)));
    int64_t extent = t.shape[axis];
    t.shape[axis] = out.shape[axis];
    if (t != out)
      return fail(absl::StrCat(describeOperand(n, i), " differs from ", describeOperand(n, 0),
                               " outside axis ", axis));
    out.shape[axis] += extent;
  }
  return Types{out};
}

absl::StatusOr<Types> inferBroadcast(const Node& n) {
  auto d = deviceCount(n);
  if (!d.ok()) return d.status();
  auto groups = groupCount(n, *d);
  if (!groups.ok()) return groups.status();
  if (n.numOperands() == 0 || n.numOperands() % *groups != 0)
    return fail(absl::StrCat(n.numOperands(), " operands do not give the same number of "
                             "tensors to each of the ",
                             *groups, *groups == 1 ? " group" : " groups"));
  const size_t k = n.numOperands() / *groups, per_group = *d / *groups;
  for (size_t i = k; i < n.numOperands(); ++i)  // every group sends the same tensors
    if (absl::Status s = expectSameType(n, i % k, i); !s.ok()) return s;
  Types out;
  for (size_t dev = 0; dev < *d; ++dev)
    for (size_t j = 0; j < k; ++j) out.push_back(typeOf(n, (dev / per_group) * k + j));
  return out;
}

absl::StatusOr<Types> inferAllReduce(const Node& n) {
  auto d = deviceCount(n);
  if (!d.ok()) return d.status();
  if (n.numOperands() % *d != 0)
    return fail(
        absl::StrCat(n.numOperands(), " operands do not split evenly over ", *d, " devices"));
  if (auto groups = groupCount(n, *d); !groups.ok()) return groups.status();
  size_t k = n.numOperands() / *d;
  Types out;
  for (size_t i = 0; i < n.numOperands(); ++i) {
    if (i >= k)  // the same tensors, in the same order, on every device
      if (absl::Status s = expectSameType(n, i % k, i); !s.ok()) return s;
    out.push_back(typeOf(n, i));
  }
  return out;
}

// reduce_scatter and all_gather move one flat buffer per device: operand i is on
// position i, and rank r of a group is position r of it (groups are consecutive runs).
absl::Status expectOnePerDevice(const Node& n, size_t devices) {
  if (n.numOperands() != devices)
    return fail(absl::StrCat(n.numOperands(), n.numOperands() == 1 ? " operand" : " operands",
                             " for ", devices, devices == 1 ? " device" : " devices",
                             "; expected one flat buffer per device"));
  for (size_t i = 0; i < n.numOperands(); ++i)
    if (typeOf(n, i).rank() != 1)
      return fail(absl::StrCat(describeOperand(n, i),
                               " must have rank 1 (a flat buffer: reshape it first)"));
  return absl::OkStatus();
}

absl::StatusOr<Types> inferReduceScatter(const Node& n) {
  ASSIGN_OR_RETURN(const size_t d, deviceCount(n));
  ASSIGN_OR_RETURN(const size_t groups, groupCount(n, d));
  RETURN_IF_ERROR(expectOnePerDevice(n, d));
  for (size_t i = 1; i < d; ++i) RETURN_IF_ERROR(expectSameType(n, 0, i));
  const size_t ranks = d / groups;
  const auto sizes = ReduceScatterView(n).sizes();
  if (sizes.size() != ranks)
    return fail(absl::StrCat("sizes has ", sizes.size(), sizes.size() == 1 ? " entry" : " entries",
                             " but a group has ", ranks, ranks == 1 ? " rank" : " ranks",
                             "; expected one shard size per rank"));
  // Every shard holds at least one element: a buffer smaller than the group is reduced
  // whole (all_reduce), not scattered into empty tensors.
  int64_t total = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    if (sizes[r] < 1)
      return fail(absl::StrCat("sizes[", r, "] is ", sizes[r],
                               "; every rank's shard must hold "
                               "at least one element"));
    if (__builtin_add_overflow(total, sizes[r], &total))
      return fail("sizes add up to more than int64 holds");
  }
  const TensorType& x = typeOf(n, 0);
  if (total != x.shape[0])
    return fail(absl::StrCat("sizes add up to ", total, " but ", describeOperand(n, 0), " has ",
                             x.shape[0], " elements"));
  Types out;
  for (size_t i = 0; i < d; ++i) out.push_back(TensorType{x.dtype, {sizes[i % ranks]}});
  return out;
}

absl::StatusOr<Types> inferAllGather(const Node& n) {
  ASSIGN_OR_RETURN(const size_t d, deviceCount(n));
  ASSIGN_OR_RETURN(const size_t groups, groupCount(n, d));
  RETURN_IF_ERROR(expectOnePerDevice(n, d));
  const size_t ranks = d / groups;
  int64_t total = 0;
  for (size_t i = 0; i < d; ++i) {
    RETURN_IF_ERROR(expectSameDType(n, 0, i));
    // Rank r's shard has one size in every group: the groups gather the same buffer.
    if (i >= ranks) RETURN_IF_ERROR(expectSameType(n, i % ranks, i));
    if (i < ranks) total += typeOf(n, i).shape[0];
  }
  return Types(d, TensorType{typeOf(n, 0).dtype, {total}});
}

}  // namespace

extern const OpRules kSplitRules{.infer = inferSplit};
extern const OpRules kConcatRules{.infer = inferConcat};
extern const OpRules kBroadcastRules{.infer = inferBroadcast};
extern const OpRules kAllReduceRules{.infer = inferAllReduce};
extern const OpRules kReduceScatterRules{.infer = inferReduceScatter};
extern const OpRules kAllGatherRules{.infer = inferAllGather};

}  // namespace tandem::ir
