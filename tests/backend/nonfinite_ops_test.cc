// NaN, +inf, -inf, -0.0 and subnormals through every op that computes on floats, on the CPU
// kernels, against PyTorch 1.13 (tests/data/gen_nonfinite_refs.py writes the cases: one
// node each, its operands holding the special values beside ordinary ones, and what
// PyTorch makes of them). A result agrees when it is NaN exactly where PyTorch's is, the
// same infinity where PyTorch's is infinite, and within the case's tolerance elsewhere;
// cases marked exact agree bit for bit (signed zeros and subnormals included). The op
// table is enumerated too: an op of ir/ops.td without a case that is not in kExcluded
// below (with its reason) fails, so a new op cannot skip this.

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backend/bf16.h"
#include "backend/cpu/dnnl_util.h"
#include "gtest/gtest.h"
#include "ir/ir.h"
#include "ir/op_info.h"
#include "kernel_test_util.h"
#include "nonfinite_case.h"

namespace tandem::testing {
namespace {

/// The ops with no case here, and why: none computes on a float operand in a kernel of
/// its own.
const std::map<ir::Op, const char*>& excluded() {
  static const auto* m = new std::map<ir::Op, const char*>{
      {ir::Op::kInput, "a graph argument: the runtime hands the batch over, nothing computes"},
      {ir::Op::kParam, "reads a variable's storage as it is: nothing computes"},
      {ir::Op::kConstant, "fills its declared type with its attribute: no float operand"},
      {ir::Op::kInitialize,
       "draws a variable's initial values from its initializer: no float operand"},
      {ir::Op::kAssign, "copies a value into a variable's storage: data movement only"},
      // The collectives have no kernel: the runtime runs them on the communicators, whose
      // tests (local_communicator_test.cc, process_collectives_test.cc) cover their sums.
      {ir::Op::kSplit, "collective: copies slices of a host tensor to devices"},
      {ir::Op::kConcat, "collective: copies devices' slices onto one device"},
      {ir::Op::kBroadcast, "collective: copies tensors from a source device"},
      {ir::Op::kAllReduce, "collective: the communicator's reduction, not a kernel"},
      {ir::Op::kReduceScatter, "collective: the communicator's reduction, not a kernel"},
      {ir::Op::kAllGather, "collective: copies shards between devices"},
      {ir::Op::kKvWrite, "copies a token's row into a cache: data movement only"},
  };
  return *m;
}

ir::TensorType typeOf(const CaseTensor& t) {
  ir::DType d = ir::DType::kF32;
  if (t.dtype == "i32") d = ir::DType::kI32;
  if (t.dtype == "f64") d = ir::DType::kF64;
  if (t.dtype == "bf16") d = ir::DType::kBF16;
  return {d, ir::Shape(t.shape.begin(), t.shape.end())};
}

/// The node's attributes as the case gives them, typed by the op's schema.
std::vector<std::pair<std::string, ir::AttrValue>> attrsOf(const NonfiniteCase& c,
                                                           const ir::OpInfo& info) {
  std::vector<std::pair<std::string, ir::AttrValue>> attrs;
  for (const ir::AttrSpec& a : info.attrs) {
    if (!c.hasAttr(a.name)) continue;
    const std::string text = c.text(a.name);
    switch (a.kind) {
      case ir::AttrKind::kInt:
        attrs.emplace_back(a.name, c.integer(a.name));
        break;
      case ir::AttrKind::kFloat:
        attrs.emplace_back(a.name, c.num(a.name));
        break;
      case ir::AttrKind::kBool:
        attrs.emplace_back(a.name, c.flag(a.name));
        break;
      case ir::AttrKind::kInts:
      case ir::AttrKind::kHw: {  // hw: `3` or `3,2` (height, width)
        std::vector<int64_t> v;
        for (absl::string_view w : absl::StrSplit(text, ',')) {
          int64_t i = 0;
          EXPECT_TRUE(absl::SimpleAtoi(w, &i)) << a.name << "=" << text;
          v.push_back(i);
        }
        if (a.kind == ir::AttrKind::kInts)
          attrs.emplace_back(a.name, v);
        else if (v.size() == 1)
          attrs.emplace_back(a.name, v[0]);
        else
          attrs.emplace_back(a.name, ir::canonicalHw(v));
        break;
      }
      case ir::AttrKind::kEnum:
        attrs.emplace_back(a.name, ir::EnumWord{text});
        break;
      default:
        ADD_FAILURE() << "attribute " << a.name << " of an unsupported kind";
    }
  }
  return attrs;
}

/// One case's node on cpu:0: its operands graph inputs or variable reads (`_var<i>
/// name:role`), with the kernel of `factory` (unset: the CPU kernel table's). False when
/// the case is malformed (the failure says why).
bool caseSpec(const NonfiniteCase& c, SingleOp::KernelFactory factory, SingleOp::Spec* spec) {
  const auto op = ir::opByName(c.text("_op"));
  if (!op.has_value()) {
    ADD_FAILURE() << "unknown op " << c.text("_op");
    return false;
  }
  *spec = {
      .op = *op, .attrs = attrsOf(c, ir::opInfo(*op)), .factory = std::move(factory), .seed = 7};
  for (size_t i = 0; c.has(absl::StrCat("in", i)); ++i) {
    const ir::TensorType t = typeOf(c.tensor(absl::StrCat("in", i)));
    spec->operands.push_back(t);
    const std::string var_key = absl::StrCat("_var", i);
    if (!c.hasAttr(var_key)) continue;
    const std::vector<std::string> parts = absl::StrSplit(c.text(var_key), ':');
    auto role = ir::parseVarRole(parts.size() == 2 ? parts[1] : "");
    if (!role.ok()) {
      ADD_FAILURE() << var_key << ": " << role.status();
      return false;
    }
    spec->vars.push_back({parts[0], t, *role, ir::Initializer{}});
    spec->reads[i] = parts[0];
  }
  return true;
}

void fill(Buffer& b, const CaseTensor& t) {
  ASSERT_EQ(b.size(), t.size());
  for (int64_t i = 0; i < b.size(); ++i) {
    const double v = t.values[static_cast<size_t>(i)];
    switch (b.type().dtype) {
      case ir::DType::kF32:
        b.f32()[i] = static_cast<float>(v);
        break;
      case ir::DType::kBF16:
        b.bf16()[i] = static_cast<float>(v);
        break;
      case ir::DType::kF64:
        b.f64()[i] = v;
        break;
      case ir::DType::kI32:
        b.i32()[i] = static_cast<int32_t>(v);
        break;
      case ir::DType::kI64:
        reinterpret_cast<int64_t*>(b.view().data)[i] = static_cast<int64_t>(v);
        break;
    }
  }
}

std::vector<double> valuesOf(Buffer& b) {
  std::vector<double> v(static_cast<size_t>(b.size()));
  for (int64_t i = 0; i < b.size(); ++i) v[static_cast<size_t>(i)] = b.at(i);
  return v;
}

class NonFinite : public ::testing::TestWithParam<std::string> {};

/// Runs case `c` on the CPU kernel (`factory`'s, or the kernel table's) and expects
/// PyTorch's results.
void expectMatchesPyTorch(const NonfiniteCase& c, SingleOp::KernelFactory factory = nullptr) {
  SingleOp::Spec spec;
  ASSERT_TRUE(caseSpec(c, std::move(factory), &spec));
  SingleOp n(std::move(spec));
  ASSERT_TRUE(n.built());
  for (size_t i = 0; i < n.numInputs(); ++i) fill(n.in(i), c.tensor(absl::StrCat("in", i)));
  const double tol = caseTolerance(c);
  const bool exact = caseExact(c);
  std::vector<std::vector<double>> wants;
  if (c.hasAttr("_dropout")) {
    // PyTorch multiplies x by noise 1/(1-p) or 0; the kernel draws its own mask: read it
    // off a run over ones, and take PyTorch's product for each element's draw.
    Buffer x(n.in(0).type());
    std::memcpy(x.view().data, n.in(0).view().data, static_cast<size_t>(x.type().bytes()));
    for (int64_t i = 0; i < n.in(0).size(); ++i) n.in(0).f32()[i] = 1.0f;
    n.run();
    const CaseTensor &kept = c.tensor("out0_kept"), &dropped = c.tensor("out0_dropped");
    std::vector<double> want(kept.values.size());
    int64_t drops = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const bool keep = n.out(0).f32()[i] != 0.0f;
      drops += keep ? 0 : 1;
      want[i] = keep ? kept.values[i] : dropped.values[i];
    }
    ASSERT_GT(drops, 0) << "the mask dropped nothing: the case tests no dropped special";
    std::memcpy(n.in(0).view().data, x.view().data, static_cast<size_t>(x.type().bytes()));
    wants.push_back(std::move(want));
  } else {
    for (size_t r = 0; r < n.node().numResults(); ++r) {
      const std::string key = absl::StrCat("out", r);
      ASSERT_TRUE(c.has(key)) << "no PyTorch value of result " << r;
      EXPECT_EQ(typeOf(c.tensor(key)), n.node().result(r)->type()) << key;
      wants.push_back(c.tensor(key).values);
    }
  }
  n.run();
  for (size_t r = 0; r < wants.size(); ++r)
    EXPECT_EQ(disagreement(valuesOf(n.out(r)), wants[r], tol, exact), "")
        << n.node().describe() << " result " << r;
  // State written in place (optimizer updates, running statistics).
  for (size_t i = 0; i < n.numInputs(); ++i) {
    const std::string key = absl::StrCat("after", i);
    if (!c.has(key)) continue;
    EXPECT_EQ(disagreement(valuesOf(n.in(i)), c.tensor(key).values, tol, exact), "")
        << n.node().describe() << " operand " << i << " after the update";
  }
}

TEST_P(NonFinite, CpuKernelMatchesPyTorch) {
  auto loaded = loadNonfiniteCase(GetParam());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  expectMatchesPyTorch(*loaded);
}

INSTANTIATE_TEST_SUITE_P(PyTorchCases, NonFinite, ::testing::ValuesIn(nonfiniteCaseNames()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// The convolution cases with every strategy the rule may pick, not only the one it picks
// at their shapes: Winograd (where oneDNN has it; elsewhere the factory falls back to
// direct) and GEMM over padding run the blocked direct program for operands holding NaN
// or inf (conv_kernels.cc), and must then give PyTorch's results too; taps (a backward
// filter with stride-1 rows, as k3x2_s2x1_p1x0) never multiplies padding.
TEST(NonFiniteConv, EveryStrategyMatchesPyTorch) {
  using backend::cpu::ConvStrategy;
  using backend::cpu::KernelInit;
  const std::map<std::string, backend::cpu::KernelOr (*)(const KernelInit&, ConvStrategy)>
      factories = {
          {"conv2d", backend::cpu::makeConv2dKernelWithStrategy},
          {"conv2d_backward_data", backend::cpu::makeConv2dBackwardDataKernelWithStrategy},
          {"conv2d_backward_filter", backend::cpu::makeConv2dBackwardFilterKernelWithStrategy}};
  int cases = 0;
  for (const std::string& name : nonfiniteCaseNames()) {
    auto c = loadNonfiniteCase(name);
    ASSERT_TRUE(c.ok()) << c.status();
    auto f = factories.find(c->text("_op"));
    if (f == factories.end()) continue;
    ++cases;
    for (ConvStrategy st : {ConvStrategy::kPlain, ConvStrategy::kBlocked, ConvStrategy::kWinograd,
                            ConvStrategy::kGemm, ConvStrategy::kTaps}) {
      SCOPED_TRACE(absl::StrCat(name, " strategy ", static_cast<int>(st)));
      expectMatchesPyTorch(*c, [&](const KernelInit& init) { return f->second(init, st); });
    }
  }
  EXPECT_GE(cases, 3);
}

TEST(NonFiniteCoverage, EveryOpComputingOnFloatsHasACaseOrAReason) {
  std::set<std::string> covered;
  const std::vector<std::string> names = nonfiniteCaseNames();
  ASSERT_GT(names.size(), 0u) << kNonfiniteDir << " holds no cases";
  for (const std::string& name : names) {
    auto c = loadNonfiniteCase(name);
    ASSERT_TRUE(c.ok()) << c.status();
    covered.insert(c->text("_op"));
  }
  for (const ir::OpInfo& info : ir::allOps()) {
    const std::string op(info.name);
    const bool skip = excluded().count(info.op) > 0;
    if (skip) {
      EXPECT_EQ(covered.count(op), 0u) << op << " has cases: take it off the exclusion list";
    } else {
      EXPECT_EQ(covered.count(op), 1u)
          << op << " has no case in tests/data/gen_nonfinite_refs.py (NaN, inf, -0.0 and "
          << "subnormals against PyTorch) and no reason in this test's exclusion list";
    }
  }
}

}  // namespace
}  // namespace tandem::testing
