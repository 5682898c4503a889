// matmul (batched, with transpose flags, a plain matrix shared by the batch) and the two
// shape ops its gradients and attention need: reshape and transpose.
//
// matmul's gradient is matmul again, with other flags (no backward op): for
// C = op(A) op(B), d op(A) = dC op(B)^T and d op(B) = op(A)^T dC. An operand shared by the
// batch sums its gradient over the batch, which folds the batch into the product's
// contraction: the other operand and dC are brought to [batch*rows, cols] by a reshape
// (a transpose first where the batch axis is not outermost), so the sum is one product.

#include <algorithm>
#include <functional>
#include <numeric>
#include <utility>

#include "ir/grad.h"
#include "ir/op_views.h"
#include "ir/ops/rule_util.h"
#include "ir/status_macros.h"

namespace tandem::ir {
namespace {
using namespace rules;

/// The sizes of a matmul node: batch axes, M, N, K, and which operand is shared.
struct MatmulDims {
  Shape batch;
  int64_t m = 0, n = 0, k = 0;
  bool a_shared = false, b_shared = false;
  int64_t batchCount() const {
    return std::accumulate(batch.begin(), batch.end(), int64_t{1}, std::multiplies<>());
  }
};

absl::StatusOr<MatmulDims> matmulDims(const Node& n) {
  const MatmulView v(n);
  for (size_t i : {size_t{0}, size_t{1}}) {
    if (typeOf(n, i).rank() < 2)
      return fail(
          absl::StrCat(describeOperand(n, i), " must have rank 2 or more ([..., rows, columns])"));
  }
  const Shape &a = typeOf(n, 0).shape, &b = typeOf(n, 1).shape;
  const size_t ra = a.size(), rb = b.size();
  MatmulDims d;
  d.m = v.trans_a() ? a[ra - 1] : a[ra - 2];
  d.k = v.trans_a() ? a[ra - 2] : a[ra - 1];
  const int64_t kb = v.trans_b() ? b[rb - 1] : b[rb - 2];
  d.n = v.trans_b() ? b[rb - 2] : b[rb - 1];
  if (d.k != kb)
    return fail(absl::StrCat("the inner sizes differ: op(a) of ", describeOperand(n, 0), " has ",
                             d.k, " columns, op(b) of ", describeOperand(n, 1), " has ", kb,
                             " rows"));
  const Shape lead_a(a.begin(), a.end() - 2), lead_b(b.begin(), b.end() - 2);
  if (!lead_a.empty() && !lead_b.empty() && lead_a != lead_b)
    return fail(absl::StrCat("the batch axes of ", describeOperand(n, 0), " and ",
                             describeOperand(n, 1),
                             " differ (they must agree, or one operand be a plain matrix)"));
  d.batch = lead_a.empty() ? lead_b : lead_a;
  d.a_shared = lead_a.empty() && !lead_b.empty();
  d.b_shared = lead_b.empty() && !lead_a.empty();
  return d;
}

absl::StatusOr<Types> inferMatmul(const Node& n) {
  ASSIGN_OR_RETURN(MatmulDims d, matmulDims(n));
  const bool low = typeOf(n, 0).dtype == DType::kBF16 || typeOf(n, 1).dtype == DType::kBF16;
  Shape c = d.batch;
  c.push_back(d.m);
  c.push_back(d.n);
  return Types{TensorType{low ? DType::kBF16 : DType::kF32, c}};
}

/// Emits nodes for matmul's gradient rule.
class MatmulGrad {
 public:
  explicit MatmulGrad(GradContext& c) : c_(c) {}

  absl::StatusOr<Value*> matmul(Value* a, Value* b, bool trans_a, bool trans_b,
                                const std::string& name) {
    ASSIGN_OR_RETURN(
        Node * n, c_.emit(MatmulArgs{.a = a, .b = b, .trans_a = trans_a, .trans_b = trans_b}.spec(
                      {.names = {name}})));
    return n->result();
  }
  absl::StatusOr<Value*> reshape(Value* x, Shape shape) {
    ASSIGN_OR_RETURN(
        Node * n,
        c_.emit(ReshapeArgs{.x = x, .shape = std::vector<int64_t>(shape.begin(), shape.end())}.spec(
            {.names = {x->name() + ".rows"}})));
    return n->result();
  }
  absl::StatusOr<Value*> transpose(Value* x, std::vector<int64_t> perm, const std::string& suffix) {
    ASSIGN_OR_RETURN(Node * n, c_.emit(TransposeArgs{.x = x, .perm = std::move(perm)}.spec(
                                   {.names = {x->name() + suffix}})));
    return n->result();
  }
  /// x[..., r, c] with its last two axes swapped.
  absl::StatusOr<Value*> swapLast(Value* x) {
    std::vector<int64_t> perm(x->type().rank());
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    return transpose(x, std::move(perm), ".t");
  }
  /// x[batch..., r, c] as [batch*r, c] (the batch left to -1: replicate slices it).
  absl::StatusOr<Value*> foldRows(Value* x) { return reshape(x, {-1, x->type().shape.back()}); }
  /// x[batch..., r, c] as [r, batch*c] (the batch axes moved between r and c).
  absl::StatusOr<Value*> foldColumns(Value* x) {
    const size_t rank = static_cast<size_t>(x->type().rank());
    std::vector<int64_t> perm{static_cast<int64_t>(rank - 2)};
    for (size_t i = 0; i + 2 < rank; ++i) perm.push_back(static_cast<int64_t>(i));
    perm.push_back(static_cast<int64_t>(rank - 1));
    ASSIGN_OR_RETURN(Value * moved, transpose(x, std::move(perm), ".rows_first"));
    return reshape(moved, {x->type().shape[rank - 2], -1});
  }

 private:
  GradContext& c_;
};

absl::Status gradMatmul(GradContext& c) {
  const Node& n = c.node();
  const MatmulView v(n);
  ASSIGN_OR_RETURN(MatmulDims d, matmulDims(n));
  Value *a = v.a(), *b = v.b(), *dc = c.resultGrad(0);
  const bool ta = v.trans_a(), tb = v.trans_b();
  MatmulGrad g(c);
  if (c.needsGrad(0)) {
    const std::string name = gradName(a);
    Value* da = nullptr;
    if (!d.a_shared) {
      // dA = dC op(B)^T, or its transpose op(B) dC^T when A is stored transposed.
      ASSIGN_OR_RETURN(da,
                       ta ? g.matmul(b, dc, tb, true, name) : g.matmul(dc, b, false, !tb, name));
    } else {
      // Shared A[M,K]: sum_i dC_i op(B_i)^T = dC' B' with dC' = [M, batch*N] and
      // B' = the op(B_i)^T stacked: [batch*N, K].
      ASSIGN_OR_RETURN(Value * dcg, g.foldColumns(dc));
      Value* bt = b;
      if (!tb) {
        ASSIGN_OR_RETURN(bt, g.swapLast(b));
      }
      ASSIGN_OR_RETURN(Value * bg, g.foldRows(bt));
      ASSIGN_OR_RETURN(
          da, ta ? g.matmul(bg, dcg, true, true, name) : g.matmul(dcg, bg, false, false, name));
    }
    c.addOperandGrad(0, da);
  }
  if (c.needsGrad(1)) {
    const std::string name = gradName(b);
    Value* db = nullptr;
    if (!d.b_shared) {
      // dB = op(A)^T dC, or its transpose dC^T op(A) when B is stored transposed.
      ASSIGN_OR_RETURN(db,
                       tb ? g.matmul(dc, a, true, ta, name) : g.matmul(a, dc, !ta, false, name));
    } else {
      // Shared B: sum_i op(A_i)^T dC_i = A'^T dC' with A' = the op(A_i) stacked:
      // [batch*M, K], dC' = [batch*M, N].
      Value* at = a;
      if (ta) {
        ASSIGN_OR_RETURN(at, g.swapLast(a));
      }
      ASSIGN_OR_RETURN(Value * af, g.foldRows(at));
      ASSIGN_OR_RETURN(Value * dcf, g.foldRows(dc));
      ASSIGN_OR_RETURN(
          db, tb ? g.matmul(dcf, af, true, false, name) : g.matmul(af, dcf, true, false, name));
    }
    c.addOperandGrad(1, db);
  }
  return absl::OkStatus();
}

// ---- reshape and transpose ----------------------------------------------------------

absl::StatusOr<Types> inferReshape(const Node& n) {
  const std::vector<int64_t> shape = ReshapeView(n).shape();
  const int64_t count = typeOf(n, 0).numElements();
  auto bad = [&](absl::string_view why) {
    return fail(absl::StrCat("shape=", toString(AttrValue(shape)), " ", why, " for ",
                             describeOperand(n, 0), " (", count, " elements)"));
  };
  // One size may be -1, inferred from the element count as in PyTorch: a model writes its
  // batch axis so, and replicate's slices of the batch then reshape alike.
  int64_t known = 1, inferred = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && inferred < 0) {
      inferred = static_cast<int64_t>(i);
      continue;
    }
    if (shape[i] < 1 || __builtin_mul_overflow(known, shape[i], &known))
      return bad("must list sizes >= 1 (and at most one -1) whose product fits in 64 bits");
  }
  Shape out(shape.begin(), shape.end());
  if (inferred >= 0) {
    if (count % known != 0 || count == 0) return bad("cannot infer its -1");
    out[static_cast<size_t>(inferred)] = count / known;
  } else if (known != count) {
    return bad(absl::StrCat("holds ", known, " elements"));
  }
  return Types{TensorType{typeOf(n, 0).dtype, out}};
}

/// reshape's gradient and the matmul gradient's folds reshape values whose leading axis
/// may be the batch, which replicate slices after autodiff: they leave it to -1.
std::vector<int64_t> batchFree(const Shape& s) {
  std::vector<int64_t> out(s.begin(), s.end());
  if (!out.empty()) out[0] = -1;
  return out;
}

/// dy back in x's shape, its batch axis -1: axis 0, or the axis that x's own producer, a
/// reshape, wrote -1 (an importer marks a batch that is not outermost so, as ONNX's
/// sequence-first attention has it: [T, N, D] by a reshape to [T, -1, D] that keeps the
/// shape). A reshape that keeps the shape passes dy on as it is.
absl::Status gradReshape(GradContext& c) {
  Value* x = c.node().operand(0);
  if (x->type() == c.node().result()->type()) {
    c.addOperandGrad(0, c.resultGrad(0));
    return absl::OkStatus();
  }
  std::vector<int64_t> shape = batchFree(x->type().shape);
  if (const Node* def = x->def(); def != nullptr && def->op() == Op::kReshape) {
    const std::vector<int64_t> marked = ReshapeView(*def).shape();
    auto at = std::find(marked.begin(), marked.end(), -1);
    if (at != marked.end() && marked.size() == shape.size()) {
      shape = std::vector<int64_t>(x->type().shape.begin(), x->type().shape.end());
      shape[size_t(at - marked.begin())] = -1;
    }
  }
  ASSIGN_OR_RETURN(Node * dx,
                   c.emit(ReshapeArgs{.x = c.resultGrad(0), .shape = std::move(shape)}.spec(
                       {.names = {gradName(x)}})));
  c.addOperandGrad(0, dx->result());
  return absl::OkStatus();
}

absl::StatusOr<Types> inferTranspose(const Node& n) {
  const std::vector<int64_t> perm = TransposeView(n).perm();
  const TensorType& x = typeOf(n, 0);
  std::vector<bool> seen(perm.size(), false);
  bool ok = static_cast<int64_t>(perm.size()) == x.rank();
  for (int64_t p : perm) {
    ok = ok && p >= 0 && p < static_cast<int64_t>(perm.size()) && !seen[static_cast<size_t>(p)];
    if (ok) seen[static_cast<size_t>(p)] = true;
  }
  if (!ok)
    return fail(absl::StrCat("perm=", toString(AttrValue(perm)), " must list every axis of ",
                             describeOperand(n, 0), " once (0 to ", x.rank() - 1, ")"));
  Shape y;
  for (int64_t p : perm) y.push_back(x.shape[static_cast<size_t>(p)]);
  return Types{TensorType{x.dtype, y}};
}

absl::Status gradTranspose(GradContext& c) {
  const std::vector<int64_t> perm = TransposeView(c.node()).perm();
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  Value* x = c.node().operand(0);
  ASSIGN_OR_RETURN(
      Node * dx,
      c.emit(TransposeArgs{.x = c.resultGrad(0), .perm = inverse}.spec({.names = {gradName(x)}})));
  c.addOperandGrad(0, dx->result());
  return absl::OkStatus();
}

}  // namespace

extern const OpRules kMatmulRules{.infer = inferMatmul, .grad = gradMatmul};
extern const OpRules kReshapeRules{.infer = inferReshape, .grad = gradReshape};
extern const OpRules kTransposeRules{.infer = inferTranspose, .grad = gradTranspose};

}  // namespace tandem::ir
