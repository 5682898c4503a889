// Collectives. Their operands and results are grouped by the `devices` attribute; the
// verifier checks that each group really lives on its device.

#include "ir/interfaces.h"
#include "ir/op_views.h"
#include "ir/ops/rule_util.h"

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

}  // namespace

extern const OpRules kSplitRules{.infer = inferSplit};
extern const OpRules kConcatRules{.infer = inferConcat};
extern const OpRules kBroadcastRules{.infer = inferBroadcast};
extern const OpRules kAllReduceRules{.infer = inferAllReduce};

}  // namespace tandem::ir
