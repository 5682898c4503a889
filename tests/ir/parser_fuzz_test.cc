// The parser on hostile input: every truncation and thousands of byte-level mutations of
// a valid replicated module must give an error or a module that round-trips, never a
// crash or a hang; and representative mistakes give exact "FILE:LINE:COL: message" errors.
//
// This file is also compiled into parser_fuzz_asan_test (AddressSanitizer, IR library
// only): it may include only ir/ headers and GoogleTest.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/dot.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace tandem::ir {
namespace {

// A tiny training step on two devices with every construct of the text format: var
// initializers and roles, the init graph with a broadcast, split inputs, attributes of
// every kind, locations, a multi-result all_reduce and sgd_update with momentum.
constexpr char kSample[] = R"(module @tiny devices=[cpu:0, cpu:1] {
var @conv.w : f32[2,1,3,3] {role=param, init=kaiming}
var @fc.w : f32[3,8] {role=param, init=normal(std=0.01)}
var @fc.w.momentum : f32[3,8] {role=optimizer, init=zeros}

graph @init() {
  %cw = initialize() {var=@conv.w} @cpu:0 : f32[2,1,3,3]
  %cw.0, %cw.1 = broadcast(%cw) {devices=[cpu:0, cpu:1]} : f32[2,1,3,3], f32[2,1,3,3]
  assign(%cw.0) {var=@conv.w} @cpu:0
  assign(%cw.1) {var=@conv.w} @cpu:1
  %fw = initialize() {var=@fc.w} @cpu:0 : f32[3,8]
  %fw.0, %fw.1 = broadcast(%fw) {devices=[cpu:0, cpu:1]} : f32[3,8], f32[3,8]
  assign(%fw.0) {var=@fc.w} @cpu:0
  assign(%fw.1) {var=@fc.w} @cpu:1
  return
}

graph @train_step(%x: f32[4,1,4,4], %y: i32[4]) {
  %x.0, %x.1 = split(%x) {axis=0, sizes=[2,2], devices=[cpu:0, cpu:1]} : f32[2,1,4,4], f32[2,1,4,4]
  %y.0, %y.1 = split(%y) {axis=0, sizes=[2,2], devices=[cpu:0, cpu:1]} : i32[2], i32[2]
  %w.0 = param() {var=@conv.w} @cpu:0 : f32[2,1,3,3] loc("", "tiny.cc:3")
  %w.1 = param() {var=@conv.w} @cpu:1 : f32[2,1,3,3] loc("", "tiny.cc:3")
  %h.0 = conv2d(%x.0, %w.0) {stride=1, pad=0} @cpu:0 : f32[2,2,2,2] loc("conv", "tiny.cc:3")
  %h.1 = conv2d(%x.1, %w.1) {stride=1, pad=0} @cpu:1 : f32[2,2,2,2] loc("conv", "tiny.cc:3")
  %r.0 = relu(%h.0) @cpu:0 : f32[2,2,2,2] loc("relu")
  %r.1 = relu(%h.1) @cpu:1 : f32[2,2,2,2] loc("relu")
  %f.0 = flatten(%r.0) @cpu:0 : f32[2,8]
  %f.1 = flatten(%r.1) @cpu:1 : f32[2,8]
  %v.0 = param() {var=@fc.w} @cpu:0 : f32[3,8]
  %v.1 = param() {var=@fc.w} @cpu:1 : f32[3,8]
  %o.0 = linear(%f.0, %v.0) @cpu:0 : f32[2,3]
  %o.1 = linear(%f.1, %v.1) @cpu:1 : f32[2,3]
  %loss.0 = softmax_cross_entropy(%o.0, %y.0) {reduction=mean, divisor=4} @cpu:0 : f32[]
  %loss.1 = softmax_cross_entropy(%o.1, %y.1) {reduction=mean, divisor=4} @cpu:1 : f32[]
  %one.0 = constant() {value=1} @cpu:0 : f32[]
  %one.1 = constant() {value=1} @cpu:1 : f32[]
  %do.0 = softmax_cross_entropy_backward(%o.0, %y.0, %one.0) {reduction=mean, divisor=4} @cpu:0 : f32[2,3]
  %do.1 = softmax_cross_entropy_backward(%o.1, %y.1, %one.1) {reduction=mean, divisor=4} @cpu:1 : f32[2,3]
  %dv.0 = linear_backward_weight(%do.0, %f.0) {bias=false} @cpu:0 : f32[3,8]
  %dv.1 = linear_backward_weight(%do.1, %f.1) {bias=false} @cpu:1 : f32[3,8]
  %df.0 = linear_backward_data(%do.0, %v.0) @cpu:0 : f32[2,8]
  %df.1 = linear_backward_data(%do.1, %v.1) @cpu:1 : f32[2,8]
  %dr.0 = flatten_backward(%df.0, %r.0) @cpu:0 : f32[2,2,2,2]
  %dr.1 = flatten_backward(%df.1, %r.1) @cpu:1 : f32[2,2,2,2]
  %dh.0 = relu_backward(%dr.0, %r.0) @cpu:0 : f32[2,2,2,2]
  %dh.1 = relu_backward(%dr.1, %r.1) @cpu:1 : f32[2,2,2,2]
  %dw.0 = conv2d_backward_filter(%dh.0, %x.0, %w.0) {stride=1, pad=0, bias=false} @cpu:0 : f32[2,1,3,3]
  %dw.1 = conv2d_backward_filter(%dh.1, %x.1, %w.1) {stride=1, pad=0, bias=false} @cpu:1 : f32[2,1,3,3]
  %gv.0, %gw.0, %gv.1, %gw.1 = all_reduce(%dv.0, %dw.0, %dv.1, %dw.1) {op=sum, bucket=0, devices=[cpu:0, cpu:1]} : f32[3,8], f32[2,1,3,3], f32[3,8], f32[2,1,3,3]
  %m.0 = param() {var=@fc.w.momentum} @cpu:0 : f32[3,8]
  %m.1 = param() {var=@fc.w.momentum} @cpu:1 : f32[3,8]
  sgd_update(%v.0, %gv.0, %m.0) {lr=0.1, momentum=0.9, weight_decay=1e-04} @cpu:0
  sgd_update(%v.1, %gv.1, %m.1) {lr=0.1, momentum=0.9, weight_decay=1e-04} @cpu:1
  sgd_update(%w.0, %gw.0) {lr=0.1, momentum=0, weight_decay=0} @cpu:0
  sgd_update(%w.1, %gw.1) {lr=0.1, momentum=0, weight_decay=0} @cpu:1
  %l.0, %l.1 = all_reduce(%loss.0, %loss.1) {op=sum, bucket=1, devices=[cpu:0, cpu:1]} : f32[], f32[]
  return %l.0
}
}
)";

/// A parse that succeeded must survive the trip: print, parse again, print identically
/// (in both modes), and the verifier must answer (either way) without crashing.
void expectRoundTripIfParsed(const std::string& text, const std::string& what) {
  auto m = parseModule(text, "fuzz.tir");
  if (!m.ok()) {
    // Errors always carry a position.
    EXPECT_EQ(m.status().message().rfind("fuzz.tir:", 0), 0u) << what << ": " << m.status();
    return;
  }
  (void)verifyModule(**m).ok();
  for (const auto& g : (*m)->graphs()) EXPECT_FALSE(exportDot(*g).empty());
  for (bool locations : {true, false}) {
    std::string printed = printModule(**m, {.locations = locations});
    auto again = parseModule(printed, "reprinted.tir");
    ASSERT_TRUE(again.ok()) << what << ": the reprinted module does not parse: " << again.status()
                            << "\n"
                            << printed;
    EXPECT_EQ(printModule(**again, {.locations = locations}), printed) << what;
  }
}

TEST(ParserFuzz, SampleParsesVerifiesAndRoundTrips) {
  auto m = parseModule(kSample, "tiny.tir");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(verifyModule(**m).ok()) << verifyModule(**m);
  EXPECT_EQ(printModule(**m), kSample);
}

TEST(ParserFuzz, EmptyInputIsAnError) {
  auto m = parseModule("");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "<input>:1:1: expected 'module', got end of input");
}

TEST(ParserFuzz, EveryTruncationIsAnError) {
  const std::string text = kSample;
  const size_t end = text.find_last_of('}') + 1;  // only whitespace follows
  for (size_t len = 0; len < text.size(); ++len) {
    auto m = parseModule(absl::string_view(text).substr(0, len), "cut.tir");
    if (len < end) {
      EXPECT_FALSE(m.ok()) << "a prefix of " << len << " bytes parsed";
      if (!m.ok()) {
        EXPECT_EQ(m.status().message().rfind("cut.tir:", 0), 0u) << m.status();
      }
    } else {
      EXPECT_TRUE(m.ok()) << len << ": " << m.status();
    }
  }
}

/// A small deterministic PRNG (SplitMix64), so failures reproduce everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }

 private:
  uint64_t state_;
};

/// Pieces that stress the lexer and the number and bracket handling.
const std::vector<std::string>& nastyPieces() {
  static const auto* pieces = new std::vector<std::string>{
      std::string(1, '\0'),
      "\xff",
      "\xff\xfe",
      "99999999999999999999",
      "9223372036854775807",
      "4611686018427387903",
      "-99999999999999999999",
      "1e999",
      "-1",
      "-0",
      "0x10",
      "1.5",
      "nan",
      "inf",
      "-inf",
      "nan(0x1)",
      "-nan(0xfffffffffffff)",
      "nan(",
      "nan(0x)",
      std::string(200, '['),
      std::string(200, ']'),
      std::string(100, '{'),
      "[-3,2]",
      "[4611686018427387904,4]",
      "[0]",
      "f32[]",
      "%",
      "@",
      "\"",
      "\\",
      "\"\\\n\"",
      "//",
      ",",
      "=",
      ":",
      "%x.0",
      "@cpu:0",
      "@gpu:0",
      "cpu:4294967296",
      "{devices=[]}",
      "{devices=[cpu:0, cpu:0]}",
      "sizes=[1,3]",
      "axis=-1",
      "axis=7",
      "stride=0",
      "bucket=-1",
      "return",
      "graph @g() {",
      "module @m {",
      "loc(\"s\", \"f\")",
  };
  return *pieces;
}

std::string mutate(const std::string& base, Rng& rng) {
  std::string s = base;
  size_t edits = 1 + rng.below(4);
  for (size_t e = 0; e < edits; ++e) {
    size_t at = rng.below(s.size() + 1);
    switch (rng.below(6)) {
      case 0:  // flip a bit
        if (at < s.size()) s[at] = static_cast<char>(s[at] ^ (1 << rng.below(8)));
        break;
      case 1:  // insert a random byte (NUL and 0xFF included)
        s.insert(at, 1, static_cast<char>(rng.below(256)));
        break;
      case 2:  // delete a run of bytes
        if (at < s.size()) s.erase(at, 1 + rng.below(8));
        break;
      case 3:  // replace a byte by a structural one
        if (at < s.size()) s[at] = "[]{}(),:=%@\"-0 \n"[rng.below(16)];
        break;
      case 4:  // insert a nasty piece
        s.insert(at, nastyPieces()[rng.below(nastyPieces().size())]);
        break;
      case 5: {  // duplicate a line elsewhere (defined twice, used before defined, ...)
        size_t from = s.rfind('\n', at == 0 ? 0 : at - 1);
        from = from == std::string::npos ? 0 : from + 1;
        size_t to = s.find('\n', from);
        std::string line =
            s.substr(from, to == std::string::npos ? std::string::npos : to - from + 1);
        s.insert(rng.below(s.size() + 1), line);
        break;
      }
    }
  }
  return s;
}

TEST(ParserFuzz, GarbledInputGivesAnErrorOrRoundTrips) {
  Rng rng(20261121);
  const std::string base = kSample;
  int parsed = 0;
  constexpr int kMutations = 3000;
  for (int i = 0; i < kMutations; ++i) {
    std::string text = mutate(base, rng);
    expectRoundTripIfParsed(text, "mutation " + std::to_string(i));
    if (parseModule(text).ok()) ++parsed;
    if (::testing::Test::HasFatalFailure()) return;
  }
  // Some mutations (a changed digit in a name, a deleted comment byte) leave valid text;
  // most must not. Both kinds are exercised.
  EXPECT_GT(parsed, 0);
  EXPECT_LT(parsed, kMutations / 2);
}

TEST(ParserFuzz, PathologicalInputsAreErrors) {
  const std::vector<std::string> inputs = {
      std::string(100000, '['),
      "module @m {" + std::string(100000, '{'),
      "module @m { graph @g(%x: f32[" + std::string(50000, '1') + "]) { return } }",
      "module @m { graph @g(%x: f32[" + std::string(10000, ',') + "]) { return } }",
      std::string(5000, '\0'),
      std::string(5000, '\xff'),
      "module @m { var @v : f32[2] {role=param, init=normal(std=" + std::string(5000, '9') + ")} }",
      "module @m { graph @g(%x: f32[65536,65536,65536,65536]) { return } }",
      "module @m { graph @g(%x: f32[0,99999999999999]) { return } }",
      "module @m { graph @g() { " + std::string(20000, '/') + "\n return } }",
  };
  for (const std::string& text : inputs) expectRoundTripIfParsed(text, text.substr(0, 60));
}

// ---- exact messages ---------------------------------------------------------------------

/// Replaces the single occurrence of `from` in the sample (checked) by `to`.
std::string sampleWith(const std::string& from, const std::string& to) {
  std::string s = kSample;
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(s.find(from, at + 1), std::string::npos) << from << " is not unique";
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

std::string parseError(const std::string& text) {
  auto m = parseModule(text, "bad.tir");
  if (m.ok()) return "<parsed>";
  return std::string(m.status().message());
}

constexpr char kSmall[] = R"(module @m {
graph @g(%x: f32[2,3]) {
  %r = relu(%x) : f32[2,3]
  return %r
}
}
)";

std::string smallWith(const std::string& from, const std::string& to) {
  std::string s = kSmall;
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

TEST(ParserErrors, SmallModuleIsValid) { EXPECT_EQ(parseError(kSmall), "<parsed>"); }

TEST(ParserErrors, UnknownOp) {
  EXPECT_EQ(parseError(smallWith("relu(", "relu7(")), "bad.tir:3:8: unknown op 'relu7'");
}

TEST(ParserErrors, InputWrittenAsANode) {
  EXPECT_EQ(parseError(smallWith("relu(%x)", "input()")),
            "bad.tir:3:8: input nodes are written in the graph header, not as nodes");
}

TEST(ParserErrors, UndefinedValue) {
  EXPECT_EQ(parseError(smallWith("relu(%x)", "relu(%z)")),
            "bad.tir:3:13: use of undefined value %z");
  EXPECT_EQ(parseError(smallWith("return %r", "return %q")),
            "bad.tir:4:10: use of undefined value %q");
}

TEST(ParserErrors, DuplicateDefinition) {
  EXPECT_EQ(parseError(smallWith("%r = relu", "%x = relu")),
            "bad.tir:3:3: value %x is defined twice");
  EXPECT_EQ(parseError(sampleWith("%gv.0, %gw.0, %gv.1, %gw.1", "%gv.0, %gw.0, %gv.1, %gv.0")),
            "bad.tir:49:24: value %gv.0 is defined twice");
  EXPECT_EQ(parseError(smallWith("(%x: f32[2,3])", "(%x: f32[2,3], %x: f32[1])")),
            "bad.tir:2:24: argument %x is declared twice");
  EXPECT_EQ(parseError(sampleWith("var @fc.w.momentum", "var @fc.w")),
            "bad.tir:4:5: variable @fc.w is declared twice");
  EXPECT_EQ(parseError(sampleWith("graph @train_step", "graph @init")),
            "bad.tir:18:7: graph @init is defined twice");
}

TEST(ParserErrors, WrongAttributeKind) {
  EXPECT_EQ(parseError(sampleWith("%h.0 = conv2d(%x.0, %w.0) {stride=1,",
                                  "%h.0 = conv2d(%x.0, %w.0) {stride=true,")),
            "bad.tir:23:37: expected an integer, got 'true'");
  EXPECT_EQ(parseError(sampleWith("%h.1 = conv2d(%x.1, %w.1) {stride=1,",
                                  "%h.1 = conv2d(%x.1, %w.1) {stride=1.5,")),
            "bad.tir:24:37: expected an integer, got '1.5'");
  EXPECT_EQ(parseError(sampleWith("{reduction=mean, divisor=4} @cpu:0 : f32[]",
                                  "{reduction=avg, divisor=4} @cpu:0 : f32[]")),
            "bad.tir:33:58: 'avg' is not one of enum(mean|sum)");
  EXPECT_EQ(parseError(sampleWith("{bias=false} @cpu:0", "{bias=0} @cpu:0")),
            "bad.tir:39:53: expected true or false, got '0'");
  EXPECT_EQ(parseError(sampleWith("%v.0 = param() {var=@fc.w}", "%v.0 = param() {var=fc.w}")),
            "bad.tir:29:23: expected '@NAME', got 'fc.w'");
  EXPECT_EQ(parseError(sampleWith("sizes=[2,2], devices=[cpu:0, cpu:1]} : f32",
                                  "sizes=2, devices=[cpu:0, cpu:1]} : f32")),
            "bad.tir:19:41: expected '[', got '2'");
}

TEST(ParserErrors, UnknownAttribute) {
  EXPECT_EQ(parseError(sampleWith("%h.0 = conv2d(%x.0, %w.0) {stride=1,",
                                  "%h.0 = conv2d(%x.0, %w.0) {dilation=1,")),
            "bad.tir:23:30: conv2d has no attribute 'dilation'");
  EXPECT_EQ(parseError(smallWith("relu(%x)", "relu(%x) {alpha=1}")),
            "bad.tir:3:18: relu has no attribute 'alpha'");
}

TEST(ParserErrors, MissingOrRepeatedAttribute) {
  EXPECT_EQ(parseError(sampleWith("%h.0 = conv2d(%x.0, %w.0) {stride=1, pad=0}",
                                  "%h.0 = conv2d(%x.0, %w.0) {stride=1}")),
            "bad.tir:23:10: %h.0 (conv2d) in scope conv at tiny.cc:3: conv2d needs attribute 'pad' "
            "(hw: an int, or [h,w])");
  EXPECT_EQ(parseError(sampleWith("%h.0 = conv2d(%x.0, %w.0) {stride=1, pad=0}",
                                  "%h.0 = conv2d(%x.0, %w.0)")),
            "bad.tir:23:10: %h.0 (conv2d) in scope conv at tiny.cc:3: conv2d needs attribute "
            "'stride' (hw: an int, or [h,w])");
  EXPECT_EQ(parseError(sampleWith("%h.0 = conv2d(%x.0, %w.0) {stride=1, pad=0}",
                                  "%h.0 = conv2d(%x.0, %w.0) {stride=1, pad=0, pad=1}")),
            "bad.tir:23:10: %h.0 (conv2d) in scope conv at tiny.cc:3: attribute 'pad' of conv2d is "
            "given twice");
}

TEST(ParserErrors, BadDevice) {
  // Any kind word parses: the IR does not interpret kinds, the kinds' registry
  // (ir/target.h) refuses unknown ones where devices are used. A node on gpu:0 is then
  // not on a module device, which the verifier says.
  auto on_gpu =
      parseModule(sampleWith("%r.0 = relu(%h.0) @cpu:0", "%r.0 = relu(%h.0) @gpu:0"), "bad.tir");
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
  EXPECT_TRUE(absl::StrContains(verifyModule(**on_gpu).message(),
                                "is placed on gpu:0, which is not a module device"))
      << verifyModule(**on_gpu);
  EXPECT_TRUE(parseModule(sampleWith("module @tiny devices=[cpu:0, cpu:1]",
                                     "module @tiny devices=[cpu:0, gpu:1]"),
                          "bad.tir")
                  .ok());
  EXPECT_EQ(parseError(sampleWith("module @tiny devices=[cpu:0, cpu:1]",
                                  "module @tiny devices=[cpu:0, cpu:0]")),
            "bad.tir:1:30: device cpu:0 is listed twice");
  // The module's list has the same cap as --devices (indices stop at cpu:1023, so the
  // 1025th is another rank's).
  std::string many = "cpu:0, cpu:1";
  for (int i = 2; i <= 1023; ++i) absl::StrAppend(&many, ", cpu:", i);
  absl::StrAppend(&many, ", cpu:0@1");
  EXPECT_EQ(parseError(sampleWith("module @tiny devices=[cpu:0, cpu:1]",
                                  absl::StrCat("module @tiny devices=[", many, "]"))),
            absl::StrCat("bad.tir:1:", many.rfind("cpu:0@1") + 23,
                         ": the device list has more than 1024 devices (cpu:0@1 is number "
                         "1025)"));
  EXPECT_EQ(parseError(sampleWith("%r.1 = relu(%h.1) @cpu:1", "%r.1 = relu(%h.1) @cpu:x")),
            "bad.tir:26:26: expected a device index, got 'x'");
  EXPECT_EQ(parseError(sampleWith("%r.1 = relu(%h.1) @cpu:1", "%r.1 = relu(%h.1) @cpu:-1")),
            "bad.tir:26:21: unknown device 'cpu:-1': the index must be a non-negative integer");
}

TEST(ParserErrors, BadDType) {
  EXPECT_EQ(parseError(smallWith("%x: f32", "%x: f16")),
            "bad.tir:2:14: unknown dtype 'f16' (expected f32, bf16, i32, f64 or i64)");
  EXPECT_EQ(parseError(sampleWith("var @fc.w : f32[3,8]", "var @fc.w : float[3,8]")),
            "bad.tir:3:13: unknown dtype 'float' (expected f32, bf16, i32, f64 or i64)");
  // f64 exists (batch norm's statistics) but no layer computes in it.
  EXPECT_EQ(parseError(smallWith("%x: f32", "%x: f64")),
            "bad.tir:3:8: %r (relu): x (%x: f64[2,3]) must be f32 or bf16");
}

TEST(ParserErrors, BadDimensions) {
  EXPECT_EQ(parseError(smallWith("%x: f32[2,3]", "%x: f32[2,-3]")),
            "bad.tir:2:20: dimension -3 is negative");
  EXPECT_EQ(parseError(smallWith("%x: f32[2,3]", "%x: f32[2,99999999999999999999]")),
            "bad.tir:2:20: expected an integer, got '99999999999999999999'");
  EXPECT_EQ(parseError(smallWith("%x: f32[2,3]", "%x: f32[65536,65536,65536,2]")),
            "bad.tir:2:36: the tensor type has too many elements");
  EXPECT_EQ(parseError(smallWith("%x: f32[2,3]", "%x: f32[2 3]")),
            "bad.tir:2:20: expected ',', got '3'");
  // Issue 40 (the probe): 10,000 dimensions made every message quoting the type 2 kB long.
  std::string many = "%x: f32[2,3";
  for (int i = 0; i < 10000; ++i) many += ",1";
  many += "]";
  const std::string error = parseError(smallWith("%x: f32[2,3]", many));
  EXPECT_EQ(error, "bad.tir:2:82: the tensor type has more than 32 dimensions") << error.size();
}

TEST(ParserErrors, DeclaredTypeDisagreesWithTheShapeRule) {
  EXPECT_EQ(parseError(smallWith("%r = relu(%x) : f32[2,3]", "%r = relu(%x) : f32[2,4]")),
            "bad.tir:3:3: %r is declared f32[2,4] but relu gives f32[2,3]");
  EXPECT_EQ(parseError(sampleWith("%dw.1 = conv2d_backward_filter(%dh.1, %x.1, %w.1) {stride=1, "
                                  "pad=0, bias=false} @cpu:1 : f32[2,1,3,3]",
                                  "%dw.1 = conv2d_backward_filter(%dh.1, %x.1, %w.1) {stride=1, "
                                  "pad=0, bias=false} @cpu:1 : bf16[2,1,3,3]")),
            "bad.tir:48:3: %dw.1 is declared bf16[2,1,3,3] but conv2d_backward_filter gives "
            "f32[2,1,3,3]");
  EXPECT_EQ(
      parseError(smallWith("%r = relu(%x) : f32[2,3]", "%r, %s = relu(%x) : f32[2,3], f32[2,3]")),
      "bad.tir:3:12: relu produces 1 result(s) here, the text names 2");
  EXPECT_EQ(parseError(smallWith("%r = relu(%x) : f32[2,3]", "%r = relu(%x)")),
            "bad.tir:3:3: the node names 1 result(s) but gives 0 type(s)");
}

TEST(ParserErrors, ShapeRuleErrorsNameTheNode) {
  EXPECT_EQ(parseError(sampleWith("sizes=[2,2], devices=[cpu:0, cpu:1]} : f32",
                                  "sizes=[1,2], devices=[cpu:0, cpu:1]} : f32")),
            "bad.tir:19:16: %x.0 (split): sizes add up to 3 but axis 0 of x (%x: f32[4,1,4,4]) "
            "has 4");
  EXPECT_EQ(parseError(smallWith("relu(%x)", "relu(%x, %x)")),
            "bad.tir:3:8: %r (relu): takes 1 operands, got 2");
}

// Attribute values near the int64 limits must give an error, not overflow in a shape rule.
TEST(ParserErrors, ShapeRulesRejectOverflowingAttributes) {
  EXPECT_EQ(parseError(sampleWith("%h.0 = conv2d(%x.0, %w.0) {stride=1, pad=0}",
                                  "%h.0 = conv2d(%x.0, %w.0) {stride=1, pad=4611686018427387903}")),
            "bad.tir:23:10: %h.0 (conv2d) in scope conv at tiny.cc:3: padding 4611686018427387903 "
            "is too large for the height extent 4");
  EXPECT_EQ(parseError(sampleWith("%h.0 = conv2d(%x.0, %w.0) {stride=1, pad=0}",
                                  "%h.0 = conv2d(%x.0, %w.0) {stride=1, pad=9223372036854775807}")),
            "bad.tir:23:10: %h.0 (conv2d) in scope conv at tiny.cc:3: padding 9223372036854775807 "
            "is too large for the height extent 4");
  EXPECT_EQ(
      parseError(sampleWith("sizes=[2,2], devices=[cpu:0, cpu:1]} : f32",
                            "sizes=[9223372036854775807,9223372036854775807], devices=[cpu:0, "
                            "cpu:1]} : f32")),
      "bad.tir:19:16: %x.0 (split): sizes add up to more than int64 holds but axis 0 of x "
      "(%x: f32[4,1,4,4]) has 4");
}

TEST(ParserErrors, MissingReturn) {
  EXPECT_EQ(parseError(smallWith("  return %r\n", "")), "bad.tir:4:1: graph @g has no 'return'");
  EXPECT_EQ(parseError(sampleWith("  return\n", "")), "bad.tir:15:1: graph @init has no 'return'");
}

TEST(ParserErrors, TrailingGarbage) {
  EXPECT_EQ(parseError(std::string(kSmall) + "}\n"),
            "bad.tir:7:1: unexpected '}' after the end of the module");
  EXPECT_EQ(parseError(std::string(kSmall) + "module @again {}"),
            "bad.tir:7:1: unexpected 'module' after the end of the module");
  EXPECT_EQ(parseError(smallWith("return %r\n", "return %r %r\n")),
            "bad.tir:4:13: expected ',', got '%r'");
}

TEST(ParserErrors, BadBytes) {
  EXPECT_EQ(parseError(smallWith("relu(%x)", std::string("relu(%x\0)", 9))),
            "bad.tir:3:15: unexpected byte 0x0");
  EXPECT_EQ(parseError(smallWith("relu(%x)", "relu(%x\xff)")),
            "bad.tir:3:15: unexpected byte 0xff");
  EXPECT_EQ(parseError(smallWith("relu(%x)", "relu(%x $)")),
            "bad.tir:3:16: unexpected character '$'");
  EXPECT_EQ(parseError(smallWith("relu(%x)", "relu(% x)")),
            "bad.tir:3:13: '%' must be followed by a name");
  EXPECT_EQ(parseError(smallWith("relu(%x) : f32[2,3]", "relu(%x) : f32[2,3] loc(\"open)")),
            "bad.tir:3:32: unterminated string");
}

TEST(ParserErrors, BadInitializerAndRole) {
  EXPECT_EQ(parseError(sampleWith("init=normal(std=0.01)", "init=normal(std=0)")),
            "bad.tir:3:51: normal(std=...) needs a finite std > 0");
  EXPECT_EQ(parseError(sampleWith("init=normal(std=0.01)", "init=normal(std=inf)")),
            "bad.tir:3:51: normal(std=...) needs a finite std > 0");
  EXPECT_EQ(parseError(sampleWith("init=normal(std=0.01)", "init=normal(std=nan)")),
            "bad.tir:3:51: normal(std=...) needs a finite std > 0");
  EXPECT_EQ(parseError(sampleWith("init=normal(std=0.01)", "init=uniform")),
            "bad.tir:3:40: expected an initializer (zeros, ones, kaiming or normal(std=S)), got "
            "'uniform'");
  EXPECT_EQ(parseError(sampleWith("role=optimizer", "role=state")),
            "bad.tir:4:37: unknown variable role 'state' (expected param, buffer, optimizer or fed)");
}

// Issue 40: an attribute a shape rule divides by is checked against its range (ops.td)
// before the rule runs: a zero stride is one line, not a SIGFPE.
TEST(ParserErrors, ZeroStrideIsRefusedBeforeTheShapeRule) {
  EXPECT_EQ(parseError(sampleWith("{stride=1, pad=0} @cpu:0", "{stride=0, pad=0} @cpu:0")),
            "bad.tir:23:10: %h.0 (conv2d) in scope conv at tiny.cc:3: stride must be >= 1");
}

TEST(ParserErrors, FileNameDefaultsToInput) {
  auto m = parseModule("module @m {} x");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "<input>:1:14: unexpected 'x' after the end of the module");
}

// A scope or location string may hold any byte but a quote or a line break unescaped; the
// printer must escape what the lexer would otherwise stop at.
TEST(ParserRoundTrip, StringsWithSpecialCharacters) {
  for (const std::string& scope :
       {std::string("a\"b"), std::string("back\\slash"), std::string("two\nlines"),
        std::string("tab\there"), std::string("nul\0byte", 8), std::string("\xff\xfe")}) {
    std::string text = smallWith("relu(%x) : f32[2,3]", "relu(%x) : f32[2,3] loc(\"s\")");
    auto m = parseModule(text);
    ASSERT_TRUE(m.ok()) << m.status();
    (*m)->graph("g")->nodes().back()->setScope(scope);
    std::string printed = printModule(**m);
    auto again = parseModule(printed);
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << printed;
    EXPECT_EQ((*again)->graph("g")->nodes().back()->scope(), scope);
    EXPECT_EQ(printModule(**again), printed);
  }
}

}  // namespace
}  // namespace tandem::ir

namespace tandem::ir {
namespace {

TEST(ParserErrors, LexerErrorsAreNotHiddenByCountChecks) {
  std::string text = "module @m {\ngraph @g(%x: f32[2,3]) {\n  %r = relu(%x)";
  text.push_back('\0');
  text += " : f32[2,3]\n  return %r\n}\n}\n";
  EXPECT_EQ(parseError(text), "bad.tir:3:16: unexpected byte 0x0");
}

TEST(ParserErrors, EmptyModuleDeviceListAndEmptyVariadics) {
  EXPECT_EQ(parseError("module @m devices=[] {\n}\n"),
            "bad.tir:1:19: the module's device list is empty");
  EXPECT_EQ(parseError("module @m devices=[cpu:0] {\ngraph @g() {\n  all_reduce() {op=sum, "
                       "bucket=0, devices=[cpu:0]}\n  return\n}\n}\n"),
            "bad.tir:3:3: all_reduce: takes 1 or more operands, got 0");
}

}  // namespace
}  // namespace tandem::ir
