// opgen: reads the op spec (ir/ops.td) and writes what derives from it (the grammar is at
// the top of ops.td):
//   ir/op_enum.h      Op, the traits, the enum attributes' C++ enums, the collective calls
//   ir/op_views.h     per op a typed view (Conv2dView(n).stride()) and creator (Conv2dArgs)
//   ir/op_table.cc    the OpInfo table: operands and results with their dtypes,
//                     attributes with defaults and ranges, traits, docs, rules, costs,
//                     optimizer and collective facts
//   ir/kernel_ops.h   TANDEM_KERNEL_OPS(X): X(Enum, name) for every op a kernel table holds,
//                     and per class TANDEM_CLASS_OPS(X): X(Enum) for its forward ops
//   ir/op_args.cc     the creators' spec() functions
//   ir/optimizer_configs.h  per optimizer update op a struct of its hyper-parameters,
//                     each defaulting to its preset (SgdConfig), and OptimizerConfig
//   op_table.md       docs/IR.md's op table
// A plain C++ program, not a script: a fresh Debian has no Python, and CMake builds it
// as a host tool first. Every error names the spec line.
//
//   opgen SPEC OUTDIR              generate
//   opgen --doc SPEC DOC [--check] rewrite DOC's generated op table (--check: exit 1 if stale)

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string g_spec_path;

[[noreturn]] void die(int line, const std::string& msg) {
  std::cerr << g_spec_path << ":" << line << ": " << msg << "\n";
  std::exit(1);
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep))
    if (!trim(cur).empty()) out.push_back(trim(cur));
  return out;
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool isIdent(const std::string& s) {
  if (s.empty() || !(s[0] >= 'a' && s[0] <= 'z')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

/// conv2d_backward_data -> Conv2dBackwardData; bf16 -> Bf16.
std::string camel(const std::string& snake) {
  std::string out;
  bool up = true;
  for (char c : snake) {
    if (c == '_') {
      up = true;
      continue;
    }
    out.push_back(up && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c);
    up = false;
  }
  return out;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

// ---- the spec -------------------------------------------------------------------------

struct Slot {  // an operand or a result
  std::string name;
  bool optional = false, variadic = false;
  // `x: float`: the dtypes it may have, as the spec words them ("" for any).
  std::string dtypes;
  // An optional operand that is an optimizer state present only `when` ATTR > 0: its
  // presence is the attribute, not the count, so optional operands may follow it.
  std::string when_attr;
};

struct Attr {
  std::string name, kind;  // kind: int float bool ints symbol devices, or an enum's name
  std::string default_value;
  std::string preset;      // `preset VALUE`: front ends' value when nobody gives one
  std::string range_text;  // ">= 1", "in [0, 1)"
  std::string lo = "", hi = "";
  bool lo_open = false, hi_open = false;
  int line = 0;
};

struct State {
  std::string operand, init, var, when, shape;
  int line = 0;
};

struct Op {
  std::string name;
  int line = 0;
  std::vector<Slot> operands, results;
  std::vector<Attr> attrs;
  std::vector<std::string> traits;
  std::string cost;
  std::vector<std::string> cost_args;
  std::string doc;
  // optimizer
  std::string param, grad, grouped, grouped_of, sharded, sharded_of, lr_scale;
  std::vector<State> states;
  // `present OPERAND when=ATTR`: the bool attribute that tells the optional operand.
  std::vector<State> presents;
  int optimizer_line = 0;
  // collective
  std::string kind, reads, writes, call;
  int collective_line = 0;
  // `op NAME : CLASS`; `grad reads x|y` and the backward op it makes
  std::string cls;
  std::string grad_reads, grad_cost, grad_doc;
  std::vector<std::string> grad_cost_args;
  int grad_line = 0;
  std::string forward;  // set on a backward op the spec made: its forward op
  // `onnx NAME SINCE..[UNTIL]`
  std::string onnx_name;
  int onnx_since = 0, onnx_until = 0, onnx_line = 0;

  bool has(const std::string& t) const {
    return std::find(traits.begin(), traits.end(), t) != traits.end();
  }
  int operandIndex(const std::string& n) const {
    for (size_t i = 0; i < operands.size(); ++i)
      if (operands[i].name == n) return static_cast<int>(i);
    return -1;
  }
  int resultIndex(const std::string& n) const {
    for (size_t i = 0; i < results.size(); ++i)
      if (results[i].name == n) return static_cast<int>(i);
    return -1;
  }
  int attrIndex(const std::string& n) const {
    for (size_t i = 0; i < attrs.size(); ++i)
      if (attrs[i].name == n) return static_cast<int>(i);
    return -1;
  }
};

struct Spec {
  std::vector<std::pair<std::string, std::string>> traits;  // name, doc
  std::map<std::string, std::vector<std::string>> enums;
  std::vector<std::string> enum_order;
  std::vector<Op> ops;
  std::vector<std::string> calls;  // collective calls, in first-use order
  std::vector<Op> classes;         // `class` stanzas: name, doc and the lines ops inherit

  const Op* findClass(const std::string& name) const {
    for (const Op& c : classes)
      if (c.name == name) return &c;
    return nullptr;
  }

  const Op* find(const std::string& name) const {
    for (const Op& o : ops)
      if (o.name == name) return &o;
    return nullptr;
  }
};

const std::set<std::string> kPlainKinds = {"int",    "float",   "bool", "ints",
                                           "symbol", "devices", "hw"};
const std::set<std::string> kCosts = {
    "none",        "elementwise",       "gemm",      "matmul",
    "contraction", "reduction",         "attention", "attention_backward",
    "conv_pool",   "conv_pool_backward"};
/// The formulas that take two operands or results (CostSpec::a, b), and one (CostSpec::a).
const std::set<std::string> kTwoValueCosts = {"gemm",
                                              "matmul",
                                              "contraction",
                                              "attention",
                                              "attention_backward",
                                              "conv_pool",
                                              "conv_pool_backward"};
const std::set<std::string> kOneValueCosts = {"reduction"};
const std::set<std::string> kCollectiveKinds = {"reduce", "broadcast",      "scatter",
                                                "gather", "reduce_scatter", "all_gather"};
const std::set<std::string> kReads = {"per_device", "group_source", "host", "module_devices"};
const std::set<std::string> kWrites = {"per_device", "first_device"};
const std::set<std::string> kInits = {"zeros", "ones"};
/// The dtype words of `x: DTYPE` (ir/types.h's DType) and the named sets.
const std::map<std::string, std::vector<std::string>> kDTypeWords = {
    {"f32", {"kF32"}}, {"bf16", {"kBF16"}}, {"i32", {"kI32"}},
    {"f64", {"kF64"}}, {"i64", {"kI64"}},   {"float", {"kF32", "kBF16"}}};

/// `float`, `i32`, `f32|i32`: the words checked, the text kept as written.
std::string parseDTypes(const std::string& text, const std::string& slot, int line) {
  const std::vector<std::string> ws = split(text, '|');
  if (!text.empty() &&
      (text.front() == '|' || text.back() == '|' || text.find("||") != std::string::npos))
    die(line, "bad dtype union '" + text + "' for " + slot + " (`f32|i32`)");
  if (ws.empty()) die(line, "'" + slot + ":' needs a dtype (f32, bf16, i32, f64, i64 or float)");
  std::string out;
  for (const std::string& w : ws) {
    if (!kDTypeWords.count(w))
      die(line, "unknown dtype '" + w + "' for " + slot +
                    " (f32, bf16, i32, f64, i64, or float for f32|bf16; `|` joins them)");
    out += (out.empty() ? "" : "|") + w;
  }
  return out;
}

std::vector<Slot> parseSlots(const std::string& text, int line, const char* what) {
  std::vector<Slot> out;
  for (std::string item : split(text, ',')) {
    Slot s;
    if (size_t colon = item.find(':'); colon != std::string::npos) {
      s.dtypes = parseDTypes(trim(item.substr(colon + 1)), trim(item.substr(0, colon)), line);
      item = trim(item.substr(0, colon));
    }
    if (item.size() > 3 && item.substr(item.size() - 3) == "...") {
      s.variadic = true;
      item.resize(item.size() - 3);
    } else if (!item.empty() && item.back() == '?') {
      s.optional = true;
      item.pop_back();
    }
    if (!isIdent(item)) die(line, std::string("bad ") + what + " name '" + item + "'");
    if (!out.empty() && out.back().variadic)
      die(line, std::string("a variadic ") + what + " must be the last");
    s.name = item;
    out.push_back(s);
  }
  // Optional slots come last, except that an op with one optional slot and no variadic
  // one may have it anywhere (fold_batch_norm's b?): its presence is then the count.
  size_t optionals = 0, variadics = 0;
  bool required_after_optional = false;
  for (const Slot& s : out) {
    optionals += s.optional;
    variadics += s.variadic;
    required_after_optional = required_after_optional || (optionals > 0 && !s.optional);
  }
  if (required_after_optional && (optionals > 1 || variadics > 0))
    die(line,
        std::string("optional ") + what + "s must be the last ones (or the only optional one)");
  return out;
}

/// Where slot `i` is on a node with `count` of them: slots after a middle optional slot
/// move up by one when it is absent. "" when fixed, else the C++ expression.
std::string slotIndexExpr(const std::vector<Slot>& slots, size_t i, const std::string& count) {
  size_t required = 0;
  int middle = -1;
  for (size_t j = 0; j < slots.size(); ++j) {
    required += !slots[j].optional && !slots[j].variadic;
    if (slots[j].optional && j + 1 < slots.size() && !slots[j + 1].optional)
      middle = static_cast<int>(j);
  }
  if (middle < 0 || static_cast<int>(i) <= middle) return "";
  return "(" + count + " > " + std::to_string(required) + " ? " + std::to_string(i) + " : " +
         std::to_string(i - 1) + ")";
}

bool isNumber(const std::string& s) {
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size();
}

Attr parseAttr(const std::string& text, int line, const Spec& spec) {
  Attr a;
  a.line = line;
  size_t colon = text.find(':');
  if (colon == std::string::npos) die(line, "expected `attr NAME: KIND`, got '" + text + "'");
  a.name = trim(text.substr(0, colon));
  if (!isIdent(a.name)) die(line, "bad attribute name '" + a.name + "'");
  std::vector<std::string> rest = words(text.substr(colon + 1));
  if (rest.empty()) die(line, "attribute " + a.name + " has no kind");
  a.kind = rest[0];
  if (!kPlainKinds.count(a.kind) && !spec.enums.count(a.kind))
    die(line, "unknown attribute kind '" + a.kind +
                  "' (int, float, bool, ints, symbol, "
                  "devices, hw, or an enum declared above)");
  if (rest.size() >= 3 && rest[rest.size() - 2] == "preset") {
    a.preset = rest.back();
    if (!((a.kind == "int" || a.kind == "float") && isNumber(a.preset)))
      die(line, "only int and float attributes take a preset (a number), got '" + a.preset + "'");
    rest.resize(rest.size() - 2);
  }
  size_t i = 1;
  if (i < rest.size() && rest[i] == "=") {
    if (i + 1 >= rest.size()) die(line, "`=` needs a default value");
    a.default_value = rest[i + 1];
    const bool is_bool = a.default_value == "true" || a.default_value == "false";
    if (!((a.kind == "int" || a.kind == "float") && isNumber(a.default_value)) &&
        !(a.kind == "bool" && is_bool))
      die(line,
          "only int, float and bool attributes take a default (a number, true or false), got '" +
              a.default_value + "'");
    i += 2;
  }
  if (i < rest.size()) {
    if (a.kind != "int" && a.kind != "float" && a.kind != "hw")
      die(line, "only int, float and hw attributes take a range");
    std::string check;
    for (size_t j = i; j < rest.size(); ++j) check += (j > i ? " " : "") + rest[j];
    a.range_text = check;
    if ((rest[i] == ">=" || rest[i] == ">") && rest.size() == i + 2 && isNumber(rest[i + 1])) {
      a.lo = rest[i + 1];
      a.lo_open = rest[i] == ">";
    } else if (rest[i] == "in" && rest.size() == i + 3 && rest[i + 1].size() > 2 &&
               (rest[i + 1][0] == '[' || rest[i + 1][0] == '(') && rest[i + 1].back() == ',' &&
               (rest[i + 2].back() == ']' || rest[i + 2].back() == ')')) {
      a.lo_open = rest[i + 1][0] == '(';
      a.lo = rest[i + 1].substr(1, rest[i + 1].size() - 2);
      a.hi_open = rest[i + 2].back() == ')';
      a.hi = rest[i + 2].substr(0, rest[i + 2].size() - 1);
      if (!isNumber(a.lo) || !isNumber(a.hi)) die(line, "bad range '" + check + "'");
    } else {
      die(line, "bad check '" + check + "' (expected `>= N`, `> N` or `in [A, B)`)");
    }
  }
  if (!a.preset.empty() && !a.lo.empty()) {  // a preset the verifier would refuse is a typo
    const double v = std::stod(a.preset), lo = std::stod(a.lo);
    const bool below = a.lo_open ? v <= lo : v < lo;
    const bool above = !a.hi.empty() && (a.hi_open ? v >= std::stod(a.hi) : v > std::stod(a.hi));
    if (below || above) die(line, "preset " + a.preset + " is outside " + a.range_text);
  }
  return a;
}

void parseCost(const std::string& rest, int line, std::string* cost,
               std::vector<std::string>* args) {
  size_t paren = rest.find('(');
  *cost = trim(rest.substr(0, paren));
  if (!kCosts.count(*cost))
    die(line, "unknown cost formula '" + *cost +
                  "' (none, elementwise, gemm, matmul, contraction, reduction, attention, "
                  "attention_backward, conv_pool)");
  args->clear();
  if (paren != std::string::npos) {
    if (rest.back() != ')') die(line, "unclosed '(' in cost");
    *args = split(rest.substr(paren + 1, rest.size() - paren - 2), ',');
  }
}

/// `onnx NAME SINCE..[UNTIL]`.
void parseOnnx(const std::string& rest, int line, Op* op) {
  std::vector<std::string> ws = words(rest);
  size_t dots = ws.size() == 2 ? ws[1].find("..") : std::string::npos;
  if (dots == std::string::npos || ws[0].empty() || !(ws[0][0] >= 'A' && ws[0][0] <= 'Z'))
    die(line,
        "expected `onnx NAME SINCE..[UNTIL]` (an ONNX op name and its opsets), got '" + rest + "'");
  const std::string since = ws[1].substr(0, dots), until = ws[1].substr(dots + 2);
  auto number = [&](const std::string& t) {
    if (t.empty() || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; }))
      die(line, "bad opset '" + t + "' in '" + rest + "'");
    return std::stoi(t);
  };
  op->onnx_name = ws[0];
  op->onnx_since = number(since);
  op->onnx_until = until.empty() ? 0 : number(until);
  if (op->onnx_until != 0 && op->onnx_until < op->onnx_since)
    die(line, "opset range '" + ws[1] + "' is empty");
  op->onnx_line = line;
}

std::map<std::string, std::string> keyValues(const std::string& text, int line,
                                             const std::set<std::string>& keys) {
  std::map<std::string, std::string> out;
  for (const std::string& w : words(text)) {
    size_t eq = w.find('=');
    if (eq == std::string::npos) die(line, "expected KEY=VALUE, got '" + w + "'");
    std::string k = w.substr(0, eq);
    if (!keys.count(k)) die(line, "unknown key '" + k + "'");
    if (out.count(k)) die(line, "key '" + k + "' is given twice");
    out[k] = w.substr(eq + 1);
  }
  return out;
}

Spec parse(std::istream& in) {
  Spec spec;
  Op* op = nullptr;
  std::string raw;
  for (int line = 1; std::getline(in, raw); ++line) {
    if (size_t hash = raw.find('#'); hash != std::string::npos) raw.resize(hash);
    if (trim(raw).empty()) continue;
    const bool indented = raw[0] == ' ' || raw[0] == '\t';
    std::string text = trim(raw);
    size_t sp = text.find_first_of(" \t");
    std::string key = text.substr(0, sp),
                rest = sp == std::string::npos ? "" : trim(text.substr(sp));
    if (!indented) {
      op = nullptr;
      if (key == "trait" || key == "enum") {
        size_t colon = rest.find(':');
        if (colon == std::string::npos) die(line, "expected `" + key + " NAME: ...`");
        std::string name = trim(rest.substr(0, colon)), body = trim(rest.substr(colon + 1));
        if (key == "trait") {
          if (!isIdent(name)) die(line, "bad trait name '" + name + "'");
          for (auto& t : spec.traits)
            if (t.first == name) die(line, "trait " + name + " is declared twice");
          spec.traits.push_back({name, body});
        } else {
          if (spec.enums.count(name)) die(line, "enum " + name + " is declared twice");
          std::vector<std::string> ws = words(body);
          if (ws.empty()) die(line, "enum " + name + " has no words");
          for (const std::string& w : ws)
            if (!isIdent(w)) die(line, "bad enum word '" + w + "'");
          spec.enums[name] = ws;
          spec.enum_order.push_back(name);
        }
      } else if (key == "class") {
        size_t colon = rest.find(':');
        if (colon == std::string::npos) die(line, "expected `class NAME: DOC`");
        std::string name = trim(rest.substr(0, colon));
        if (!isIdent(name)) die(line, "bad class name '" + name + "'");
        if (spec.findClass(name)) die(line, "class " + name + " is declared twice");
        spec.classes.push_back(Op{});
        op = &spec.classes.back();
        op->name = name;
        op->line = line;
        op->doc = trim(rest.substr(colon + 1));
      } else if (key == "op") {
        std::string name = rest, cls;
        if (size_t colon = rest.find(':'); colon != std::string::npos) {
          name = trim(rest.substr(0, colon));
          cls = trim(rest.substr(colon + 1));
        }
        if (!isIdent(name)) die(line, "bad op name '" + name + "' (snake_case expected)");
        if (spec.find(name)) die(line, "op " + name + " is declared twice");
        const Op* c = cls.empty() ? nullptr : spec.findClass(cls);
        if (!cls.empty() && c == nullptr)
          die(line, "unknown class '" + cls + "' (declare it above with `class`)");
        spec.ops.push_back(c ? *c : Op{});
        op = &spec.ops.back();
        op->name = name;
        op->line = line;
        op->cls = cls;
        op->doc.clear();
      } else {
        die(line, "expected `trait`, `enum`, `class` or `op`, got '" + key + "'");
      }
      continue;
    }
    if (op == nullptr) die(line, "an indented line belongs to an `op` or `class` above it");
    if (key == "operands") {
      op->operands = parseSlots(rest, line, "operand");
    } else if (key == "results") {
      op->results = parseSlots(rest, line, "result");
    } else if (key == "attr") {
      Attr a = parseAttr(rest, line, spec);
      if (op->attrIndex(a.name) >= 0) die(line, "attribute " + a.name + " is declared twice");
      op->attrs.push_back(a);
    } else if (key == "traits") {
      for (const std::string& t : words(rest)) {
        bool known = false;
        for (auto& d : spec.traits) known = known || d.first == t;
        if (!known) die(line, "unknown trait '" + t + "' (declare it with `trait`)");
        op->traits.push_back(t);
      }
    } else if (key == "cost") {
      parseCost(rest, line, &op->cost, &op->cost_args);
    } else if (key == "grad") {
      std::vector<std::string> ws = words(rest);
      const std::string tail = ws.empty() ? "" : trim(rest.substr(ws[0].size()));
      if (ws.size() == 2 && ws[0] == "reads") {
        op->grad_reads = ws[1];
        op->grad_line = line;
      } else if (!ws.empty() && ws[0] == "cost") {
        parseCost(tail, line, &op->grad_cost, &op->grad_cost_args);
      } else if (!ws.empty() && ws[0] == "doc") {
        op->grad_doc += (op->grad_doc.empty() ? "" : " ") + tail;
      } else {
        die(line, "expected `grad reads x|y`, `grad cost FORMULA` or `grad doc TEXT`");
      }
    } else if (key == "onnx") {
      parseOnnx(rest, line, op);
    } else if (key == "doc") {
      op->doc += (op->doc.empty() ? "" : " ") + rest;
    } else if (key == "optimizer") {
      auto kv = keyValues(
          rest, line,
          {"param", "grad", "grouped", "grouped_of", "sharded", "sharded_of", "lr_scale"});
      op->param = kv["param"], op->grad = kv["grad"], op->lr_scale = kv["lr_scale"];
      op->grouped = kv["grouped"], op->grouped_of = kv["grouped_of"];
      op->sharded = kv["sharded"], op->sharded_of = kv["sharded_of"];
      op->optimizer_line = line;
    } else if (key == "state") {
      std::vector<std::string> ws = words(rest);
      if (ws.empty()) die(line, "`state` needs an operand");
      auto kv = keyValues(rest.substr(ws[0].size()), line, {"init", "var", "when", "shape"});
      op->states.push_back({ws[0], kv["init"], kv["var"], kv["when"], kv["shape"], line});
    } else if (key == "present") {
      std::vector<std::string> ws = words(rest);
      if (ws.empty()) die(line, "`present` needs an operand");
      auto kv = keyValues(rest.substr(ws[0].size()), line, {"when"});
      op->presents.push_back({ws[0], "", "", kv["when"], "", line});
    } else if (key == "collective") {
      auto kv = keyValues(rest, line, {"kind", "reads", "writes", "call"});
      op->kind = kv["kind"], op->reads = kv["reads"], op->writes = kv["writes"];
      op->call = kv["call"];
      op->collective_line = line;
    } else {
      die(line, "unknown op statement '" + key + "'");
    }
  }
  return spec;
}

/// Adds, right after each op with `grad reads`, the backward op its stanza describes:
/// NAME_backward(dy, x or y) -> dx.
void makeBackwardOps(Spec& spec) {
  std::vector<Op> ops;
  for (const Op& o : spec.ops) {
    ops.push_back(o);
    if (o.grad_reads.empty()) {
      if (!o.grad_doc.empty() || !o.grad_cost.empty())
        die(o.line, "op " + o.name + ": `grad cost` and `grad doc` need `grad reads`");
      continue;
    }
    const int l = o.grad_line;
    if (o.cls.empty())
      die(l, "`grad reads` belongs to an op of a class (its rules are the class')");
    if (o.operands.size() != 1 || o.results.size() != 1 || o.operands[0].optional ||
        o.operands[0].variadic || o.results[0].optional || o.results[0].variadic)
      die(l, "`grad reads` needs one operand and one result");
    if (o.grad_reads != o.operands[0].name && o.grad_reads != o.results[0].name)
      die(l, "grad reads '" + o.grad_reads + "': neither the operand " + o.operands[0].name +
                 " nor the result " + o.results[0].name);
    if (o.grad_doc.empty()) die(l, "op " + o.name + ": its backward op needs a `grad doc`");
    Op b;
    b.name = o.name + "_backward";
    for (const Op& other : spec.ops)
      if (other.name == b.name) die(l, "op " + b.name + " is declared by hand too");
    b.line = l;
    // dy has y's dtypes, dx x's, and the value read its own (the class' `x: float`).
    const Slot &x = o.operands[0], &y = o.results[0];
    b.operands = {Slot{"dy"}, Slot{o.grad_reads}};
    b.operands[0].dtypes = y.dtypes.empty() ? x.dtypes : y.dtypes;
    b.operands[1].dtypes = o.grad_reads == x.name || y.dtypes.empty() ? x.dtypes : y.dtypes;
    b.results = {Slot{"d" + x.name}};
    b.results[0].dtypes = x.dtypes;
    b.traits = {"backward"};
    b.cost = o.grad_cost.empty() ? "elementwise" : o.grad_cost;
    b.cost_args = o.grad_cost_args;
    b.doc = o.grad_doc;
    b.cls = o.cls;
    b.forward = o.name;
    ops.push_back(b);
  }
  spec.ops = std::move(ops);
}

/// Checks what one line alone cannot: references between lines and ops.
void validate(Spec& spec) {
  makeBackwardOps(spec);
  for (Op& o : spec.ops) {
    if (o.doc.empty()) die(o.line, "op " + o.name + " has no `doc`");
    // A one-to-one mapping has nothing to translate: the exporter writes the node as is.
    if (o.onnx_line != 0 && !o.attrs.empty())
      die(o.onnx_line, "op " + o.name + " has attributes, so it maps to ONNX by hand, not `onnx`");
    if (o.onnx_line != 0) {
      bool plain = o.results.size() == 1 && !o.results[0].optional && !o.results[0].variadic;
      for (const Slot& s : o.operands) plain = plain && !s.optional && !s.variadic;
      if (!plain)
        die(o.onnx_line, "op " + o.name +
                             ": `onnx` maps ops of fixed operands and one result (ONNX's inputs "
                             "and output in order)");
    }
    if (o.cost.empty())
      die(o.line, "op " + o.name + " has no `cost` (none for ops that do no work)");
    std::set<std::string> names;  // accessor names of the view
    for (const auto* list : {&o.operands, &o.results})
      for (const Slot& s : *list)
        if (!names.insert(s.name).second)
          die(o.line, "op " + o.name + ": '" + s.name + "' names two operands or results");
    // The verifier checks a result's dtype by its position, which an optional result before
    // it would move.
    for (size_t i = 0; i < o.results.size(); ++i)
      for (size_t j = 0; j < i && !o.results[i].dtypes.empty() && !o.results[i].optional; ++j)
        if (o.results[j].optional)
          die(o.line, "op " + o.name + ": result " + o.results[i].name +
                          " follows an optional one, so it cannot declare a dtype");
    for (const Attr& a : o.attrs)
      if (!names.insert(a.name).second)
        die(a.line, "op " + o.name + ": attribute '" + a.name + "' shares a name with a value");
    const size_t want = kTwoValueCosts.count(o.cost)                              ? 2
                        : o.cost == "elementwise" || kOneValueCosts.count(o.cost) ? 1
                                                                                  : 0;
    if (o.cost == "elementwise" ? o.cost_args.size() > 1 : o.cost_args.size() != want)
      die(o.line,
          "cost " + o.cost + " of " + o.name + " takes " + std::to_string(want) + " argument(s)");
    if (o.cost == "elementwise" && !o.cost_args.empty() && !isNumber(o.cost_args[0]))
      die(o.line, "elementwise takes the flops per result element, a number");
    if (kTwoValueCosts.count(o.cost) || kOneValueCosts.count(o.cost))
      for (const std::string& arg : o.cost_args)
        if (o.operandIndex(arg) < 0 && o.resultIndex(arg) < 0)
          die(o.line, "cost argument '" + arg + "' is no operand or result of " + o.name);
    for (const std::string& arg : o.cost_args)
      if (int i = o.operandIndex(arg); i >= 0 && !slotIndexExpr(o.operands, i, "n").empty())
        die(o.line,
            "cost argument '" + arg + "' has no fixed position (it follows an optional operand)");
    const bool collective = o.has("collective");
    if (collective != (o.collective_line != 0))
      die(o.line, "op " + o.name + ": the `collective` trait and a `collective` line go together");
    if (collective) {
      const int l = o.collective_line;
      if (!kCollectiveKinds.count(o.kind)) die(l, "unknown collective kind '" + o.kind + "'");
      if (!kReads.count(o.reads)) die(l, "unknown reads '" + o.reads + "'");
      if (!kWrites.count(o.writes)) die(l, "unknown writes '" + o.writes + "'");
      if (!isIdent(o.call)) die(l, "bad call name '" + o.call + "'");
      if (o.attrIndex("devices") < 0 || o.attrs[o.attrIndex("devices")].kind != "devices")
        die(l, "a collective needs an attribute `devices: devices`");
      if (std::find(spec.calls.begin(), spec.calls.end(), o.call) == spec.calls.end())
        spec.calls.push_back(o.call);
    }
    // replicate writes the offset by this name on every op with the trait.
    if (o.has("sample_indexed") &&
        (o.attrIndex("sample_offset") < 0 || o.attrs[o.attrIndex("sample_offset")].kind != "int"))
      die(o.line, "op " + o.name + ": the `sample_indexed` trait needs `attr sample_offset: int`");
    const bool optimizer = o.has("optimizer");
    if (optimizer != (o.optimizer_line != 0))
      die(o.line, "op " + o.name + ": the `optimizer` trait and an `optimizer` line go together");
    if (!optimizer && !o.states.empty()) die(o.states[0].line, "`state` belongs to an optimizer");
    if (!optimizer) continue;
    const int l = o.optimizer_line;
    if (!o.grouped_of.empty()) {
      if (!o.param.empty() || !o.states.empty())
        die(l, "a grouped form takes its operands from the op it groups");
      const Op* single = spec.find(o.grouped_of);
      if (single == nullptr || single->grouped != o.name)
        die(l, o.grouped_of + " does not name " + o.name + " as its `grouped` form");
      if (o.operands.size() != 1 || !o.operands[0].variadic)
        die(l, "a grouped form has one variadic operand");
      if (single->attrs.size() != o.attrs.size())
        die(l, "a grouped form has the attributes of " + single->name);
      for (size_t i = 0; i < o.attrs.size(); ++i)
        if (o.attrs[i].name != single->attrs[i].name || o.attrs[i].kind != single->attrs[i].kind)
          die(o.attrs[i].line, "a grouped form has the attributes of " + single->name);
      continue;
    }
    if (!o.sharded_of.empty()) {
      // The flat-shard form reads what its single form reads (UpdateView takes the single
      // form's operand facts) and returns the updated weight shard.
      if (!o.param.empty() || !o.states.empty() || !o.grouped.empty() || !o.sharded.empty())
        die(l, "a sharded form takes its operands from the op it shards");
      const Op* single = spec.find(o.sharded_of);
      if (single == nullptr || single->sharded != o.name)
        die(l, o.sharded_of + " does not name " + o.name + " as its `sharded` form");
      bool same =
          single->operands.size() == o.operands.size() && single->attrs.size() == o.attrs.size();
      for (size_t i = 0; same && i < o.operands.size(); ++i)
        same = o.operands[i].name == single->operands[i].name &&
               o.operands[i].optional == single->operands[i].optional &&
               o.operands[i].variadic == single->operands[i].variadic &&
               o.operands[i].dtypes == single->operands[i].dtypes;
      for (size_t i = 0; same && i < o.attrs.size(); ++i)
        same = o.attrs[i].name == single->attrs[i].name && o.attrs[i].kind == single->attrs[i].kind;
      if (!same)
        die(l, "a sharded form has the operands (with their dtypes) and attributes of " +
                   single->name);
      if (o.results.size() != 1 || o.results[0].variadic || o.results[0].optional)
        die(l, "a sharded form has one result, the updated weight shard");
      for (const State& st : single->states)  // its optional states are told as the single's
        if (!st.when.empty())
          o.operands[o.operandIndex(st.operand)].when_attr = st.when.substr(0, st.when.find('>'));
      continue;
    }
    for (const std::string* r : {&o.param, &o.grad})
      if (o.operandIndex(*r) < 0) die(l, "'" + *r + "' is no operand of " + o.name);
    // Its attributes are the hyper-parameters front ends set (ir/optimizer_configs.h): each
    // needs the value a config starts from.
    if (o.attrIndex("lr") < 0)
      die(l, "optimizer " + o.name + " needs `attr lr` (the learning-rate schedule scales it)");
    for (const Attr& a : o.attrs)
      if (a.preset.empty())
        die(a.line, "attribute " + a.name + " of optimizer " + o.name +
                        " needs a `preset` (the value a training config starts from)");
    // The learning-rate factor follows every per-parameter operand (UpdateView finds it
    // there, in the grouped form too).
    if (!o.lr_scale.empty() &&
        (o.operandIndex(o.lr_scale) != static_cast<int>(o.operands.size()) - 1 ||
         !o.operands.back().optional))
      die(l, "lr_scale '" + o.lr_scale + "' must be the last operand of " + o.name +
                 ", an optional one");
    if (!o.grouped.empty() && spec.find(o.grouped) == nullptr)
      die(l, "grouped form '" + o.grouped + "' is no op (declare it too)");
    if (!o.sharded.empty() && spec.find(o.sharded) == nullptr)
      die(l, "sharded form '" + o.sharded + "' is no op (declare it too)");
    for (const State& s : o.states) {
      if (o.operandIndex(s.operand) < 0) die(s.line, "'" + s.operand + "' is no operand");
      if (!kInits.count(s.init)) die(s.line, "init must be zeros or ones");
      if (!isIdent(s.var)) die(s.line, "var must name the variable's suffix");
      if (!s.shape.empty() && s.shape != "param" && s.shape != "scalar")
        die(s.line, "shape must be param (the weight's type, the default) or scalar");
      if (!s.when.empty()) {
        size_t gt = s.when.find(">0");
        std::string attr = s.when.substr(0, gt);
        if (gt == std::string::npos || gt + 2 != s.when.size() || o.attrIndex(attr) < 0 ||
            o.attrs[o.attrIndex(attr)].kind != "float")
          die(s.line, "when must be ATTR>0 for a float attribute");
        if (!o.operands[o.operandIndex(s.operand)].optional)
          die(s.line, "a state present only `when` must be an optional operand");
        o.operands[o.operandIndex(s.operand)].when_attr = attr;
      }
    }
  }
  // `present OPERAND when=ATTR`: an optional operand told by a bool attribute, outside
  // optimizers (softmax_cross_entropy's class weights, followed by its optional total).
  for (Op& o : spec.ops)
    for (const State& p : o.presents) {
      const int i = o.operandIndex(p.operand);
      if (i < 0) die(p.line, "'" + p.operand + "' is no operand of " + o.name);
      if (!o.operands[static_cast<size_t>(i)].optional)
        die(p.line, "`present` tells an optional operand; '" + p.operand + "' is not one");
      const int a = o.attrIndex(p.when);
      if (a < 0 || o.attrs[static_cast<size_t>(a)].kind != "bool")
        die(p.line, "present ... when=ATTR needs a bool attribute of " + o.name);
      o.operands[static_cast<size_t>(i)].when_attr = p.when;
    }
  // Only the last optional operand may be told by the count; the ones before it are told
  // by their `when` attribute.
  for (Op& o : spec.ops)
    for (size_t i = 0; i + 1 < o.operands.size(); ++i)
      if (o.operands[i].optional && o.operands[i + 1].optional && o.operands[i].when_attr.empty())
        die(o.line, "op " + o.name + ": optional operand '" + o.operands[i].name +
                        "' is followed by another optional one, so its presence needs a "
                        "`state ... when=ATTR>0` line");
}

/// Where optional operand `i` of `op` is when operands before it are optional and told
/// by their `when` attribute (a view's C++ expression over its attribute accessors), or
/// "" when it has a fixed index.
std::string whenShiftedIndexExpr(const Op& op, size_t i) {
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on `"(" + s + ...`.
  std::string expr;
  for (size_t j = 0; j < i; ++j)
    if (!op.operands[j].when_attr.empty())
      expr.append(" - (").append(op.operands[j].when_attr).append("() > 0 ? 0u : 1u)");
  if (expr.empty()) return expr;
  std::string out("(size_t{");
  out.append(std::to_string(i)).append("}").append(expr).append(")");
  return out;
}

// ---- writers --------------------------------------------------------------------------

const char* kBanner = "// Generated by ir/opgen from ir/ops.td: edit the spec, not this file.\n";

std::string cppType(const Attr& a) {
  if (a.kind == "int") return "int64_t";
  if (a.kind == "float") return "double";
  if (a.kind == "bool") return "bool";
  if (a.kind == "ints") return "std::vector<int64_t>";
  if (a.kind == "symbol") return "std::string";
  if (a.kind == "devices") return "std::vector<Device>";
  if (a.kind == "hw") return "Hw";
  return a.kind;  // an enum
}

std::string kindEnum(const Attr& a, const Spec& spec) {
  if (spec.enums.count(a.kind)) return "AttrKind::kEnum";
  return "AttrKind::k" + camel(a.kind);
}

void writeEnumHeader(const Spec& spec, std::ostream& o) {
  o << kBanner << "#pragma once\n\n#include <cstddef>\n#include <cstdint>\n#include <optional>\n"
    << "#include \"absl/strings/string_view.h\"\n\nnamespace tandem::ir {\n\n/// Every op of "
       "ir/ops.td.\n"
    << "enum class Op : uint16_t {\n";
  for (const Op& op : spec.ops) o << "  k" << camel(op.name) << ",\n";
  o << "};\ninline constexpr size_t kNumOps = " << spec.ops.size() << ";\n\n"
    << "/// Properties passes ask about instead of listing op names.\nenum Trait : uint32_t {\n";
  for (size_t i = 0; i < spec.traits.size(); ++i)
    o << "  k" << camel(spec.traits[i].first) << " = 1u << " << i << ",  // "
      << spec.traits[i].second << "\n";
  o << "};\n\n";
  for (const std::string& name : spec.enum_order) {
    const auto& ws = spec.enums.at(name);
    o << "/// The words of enum attributes of type " << name << ".\nenum class " << name
      << " : uint8_t {";
    for (size_t i = 0; i < ws.size(); ++i) o << (i ? ", " : " ") << "k" << camel(ws[i]);
    o << " };\ninline absl::string_view toWord(" << name << " v) {\n  switch (v) {\n";
    for (const std::string& w : ws)
      o << "    case " << name << "::k" << camel(w) << ":\n      return \"" << w << "\";\n";
    o << "  }\n  return \"?\";\n}\ninline std::optional<" << name << "> parse" << name
      << "(absl::string_view w) {\n";
    for (const std::string& w : ws)
      o << "  if (w == \"" << w << "\") return " << name << "::k" << camel(w) << ";\n";
    o << "  return std::nullopt;\n}\n\n";
  }
  o << "/// The communicator calls collectives make (`collective ... call=`): the runtime\n"
    << "/// has one entry per call.\nenum class CollectiveCall : uint8_t {";
  for (size_t i = 0; i < spec.calls.size(); ++i)
    o << (i ? ", " : " ") << "k" << camel(spec.calls[i]);
  o << " };\n\n}  // namespace tandem::ir\n";
}

/// The single-form optimizer update ops (not grouped_of or sharded_of), in spec order.
std::vector<const Op*> optimizerOps(const Spec& spec) {
  std::vector<const Op*> out;
  for (const Op& op : spec.ops)
    if (!op.param.empty() && op.grouped_of.empty() && op.sharded_of.empty()) out.push_back(&op);
  return out;
}

/// sgd_update -> SgdConfig: what a front end sets to choose the optimizer and its values.
std::string configName(const Op& op) {
  const std::string suffix = "_update";
  std::string base = op.name;
  if (base.size() > suffix.size() &&
      base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0)
    base.resize(base.size() - suffix.size());
  return camel(base) + "Config";
}

/// Per optimizer update op a struct whose fields are its hyper-parameters (its attributes,
/// each defaulting to its `preset`), so that a training config names an optimizer and its
/// values in types the spec owns; OptimizerConfig is any of them.
void writeOptimizerConfigs(const Spec& spec, std::ostream& o) {
  o << kBanner << "#pragma once\n\n#include <cstdint>\n#include <variant>\n\n"
    << "#include \"ir/op_enum.h\"\n\nnamespace tandem::ir {\n";
  std::vector<std::string> names;
  for (const Op* op : optimizerOps(spec)) {
    const std::string C = configName(*op);
    names.push_back(C);
    o << "\n/// " << op->name << "'s hyper-parameters, each defaulting to its preset in "
      << "ir/ops.td.\nstruct " << C << " {\n  static constexpr Op kOp = Op::k" << camel(op->name)
      << ";\n";
    for (const Attr& a : op->attrs)
      o << "  " << cppType(a) << " " << a.name << " = " << a.preset << ";\n";
    o << "\n  bool operator==(const " << C << "&) const = default;\n"
      << "  /// Calls f(attribute name, field) for each, in the op's order.\n";
    for (const char* qualifier : {"", " const"}) {
      o << "  template <class F>\n  void forEach(F&& f)" << qualifier << " {\n";
      for (const Attr& a : op->attrs) o << "    f(\"" << a.name << "\", " << a.name << ");\n";
      o << "  }\n";
    }
    o << "};\n";
  }
  o << "\n/// An optimizer and its values: one of the structs above.\nusing OptimizerConfig = "
       "std::variant<";
  for (size_t i = 0; i < names.size(); ++i) o << (i ? ", " : "") << names[i];
  o << ">;\n\n}  // namespace tandem::ir\n";
}

/// For code shared by several ops (one convolution geometry for conv2d and its backward
/// and fused forms): per attribute name that every op declaring it declares with one kind,
/// ir::attr::NAME(node), which finds it on any of those ops by a switch over the op.
void writeSharedAttrs(const Spec& spec, std::ostream& o, std::ostream& defs) {
  std::map<std::string, std::vector<std::pair<const Op*, size_t>>> holders;
  std::map<std::string, std::string> kinds;
  std::set<std::string> mixed;
  for (const Op& op : spec.ops)
    for (size_t i = 0; i < op.attrs.size(); ++i) {
      const Attr& a = op.attrs[i];
      holders[a.name].push_back({&op, i});
      if (kinds.count(a.name) && kinds[a.name] != a.kind) mixed.insert(a.name);
      kinds[a.name] = a.kind;
    }
  o << "/// Attributes by name on any op that has them (generated: a misspelled name does not\n"
    << "/// compile); asking an op without it is a programming error and aborts, naming both.\n"
    << "namespace attr {\n";
  defs << "namespace attr {\n\n[[noreturn]] void missing(const Node& n, const char* attr) {\n"
       << "  std::fprintf(stderr, \"internal error: %s has no attribute '%s'\\n\",\n"
       << "               std::string(n.opName()).c_str(), attr);\n  std::abort();\n}\n\n";
  for (const auto& [name, ops] : holders) {
    if (mixed.count(name)) continue;
    const Attr& a = ops.front().first->attrs[ops.front().second];
    const bool ref = a.kind == "ints" || a.kind == "devices" || a.kind == "symbol";
    const std::string type = ref ? "const " + cppType(a) + "&" : cppType(a);
    o << type << " " << name << "(const Node& n);\n";
    defs << type << " " << name << "(const Node& n) {\n  size_t i = 0;\n  switch (n.op()) {\n";
    std::map<size_t, std::vector<const Op*>> by_index;
    for (const auto& [op, i] : ops) by_index[i].push_back(op);
    for (const auto& [i, list] : by_index) {
      for (const Op* op : list) defs << "    case Op::k" << camel(op->name) << ":\n";
      defs << "      i = " << i << ";\n      break;\n";
    }
    defs << "    default:\n      missing(n, \"" << name
         << "\");\n  }\n  const AttrValue& v = n.attrs()[i];\n";
    if (spec.enums.count(a.kind))
      defs << "  return *parse" << a.kind << "(std::get<EnumWord>(v).word);\n";
    else if (a.kind == "symbol")
      defs << "  return std::get<Symbol>(v).name;\n";
    else if (a.kind == "hw")
      defs << "  return Hw::of(v);\n";
    else
      defs << "  return std::get<" << cppType(a) << ">(v);\n";
    defs << "}\n\n";
  }
  o << "}  // namespace attr\n\n";
  defs << "}  // namespace attr\n\n";
}

void writeViews(const Spec& spec, std::ostream& o, std::ostream& defs) {
  defs << kBanner << "\n#pragma GCC diagnostic ignored \"-Wmaybe-uninitialized\"\n\n"
       << "#include <cstdio>\n#include <cstdlib>\n\n#include \"ir/op_views.h\"\n\nnamespace "
          "tandem::ir {\n\n";
  o << kBanner << R"(#pragma once

// One view per op: typed, named access to a node's operands, results and attributes
// (`Conv2dView v(node); v.stride(); v.b()`, null for an optional operand not given), and
// one creator per op whose fields are the operands and attributes by name
// (`g.create(Conv2dArgs{.x = x, .w = w, .stride = 1, .pad = 0}.spec({.names = {"y"}}))`):
// a misspelled name, or a required attribute left out, does not compile.

#include <cassert>
#include <concepts>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "ir/ir.h"

namespace tandem::ir {

/// A creator field that must be given: it has no default, so leaving it out of a
/// designated initializer does not compile.
template <typename T>
struct Required {
  template <typename U>
    requires std::constructible_from<T, U&&>
  Required(U&& v) : value(std::forward<U>(v)) {}  // NOLINT: implicit, so `.stride = 1` reads plainly
  T value;
};

)";
  for (const Op& op : spec.ops) {
    const std::string C = camel(op.name);
    o << "/// " << op.name << ": " << op.doc << "\nclass " << C << "View {\n public:\n"
      << "  static constexpr Op kOp = Op::k" << C << ";\n"
      << "  explicit " << C << "View(const Node& n) : n_(&n) { assert(n.op() == kOp); }\n"
      << "  static bool is(const Node& n) { return n.op() == kOp; }\n"
      << "  const Node& node() const { return *n_; }\n";
    for (size_t i = 0; i < op.operands.size(); ++i) {
      const Slot& s = op.operands[i];
      std::string moved = slotIndexExpr(op.operands, i, "n_->numOperands()");
      if (moved.empty()) moved = whenShiftedIndexExpr(op, i);
      const std::string at = moved.empty() ? std::to_string(i) : moved;
      // An operand after a middle optional one has no fixed index (its accessor knows).
      if (moved.empty()) o << "  static constexpr size_t k" << camel(s.name) << " = " << i << ";\n";
      const bool middle = s.optional && i + 1 < op.operands.size() && !op.operands[i + 1].optional;
      size_t required = 0;
      for (const Slot& t : op.operands) required += !t.optional && !t.variadic;
      if (s.variadic)
        o << "  absl::Span<Value* const> " << s.name << "() const { return absl::MakeConstSpan("
          << "n_->operands()).subspan(" << i << "); }\n";
      else if (s.optional && !s.when_attr.empty())
        o << "  Value* " << s.name << "() const { return " << s.when_attr
          << "() > 0 ? n_->operand(" << at << ") : nullptr; }\n";
      else if (s.optional)
        o << "  Value* " << s.name << "() const { return n_->numOperands() > "
          << (middle ? std::to_string(required) : at) << " ? n_->operand(" << at
          << ") : nullptr; }\n";
      else
        o << "  Value* " << s.name << "() const { return n_->operand(" << at << "); }\n";
    }
    for (size_t i = 0; i < op.results.size(); ++i) {
      const Slot& s = op.results[i];
      if (s.variadic)
        o << "  size_t num" << camel(s.name) << "() const { return n_->numResults() - " << i
          << "; }\n  Value* " << s.name << "(size_t j) const { return n_->result(" << i
          << " + j); }\n";
      else if (s.optional)
        o << "  Value* " << s.name << "() const { return n_->numResults() > " << i
          << " ? n_->result(" << i << ") : nullptr; }\n";
      else
        o << "  Value* " << s.name << "() const { return n_->result(" << i << "); }\n";
    }
    for (size_t i = 0; i < op.attrs.size(); ++i) {
      const Attr& a = op.attrs[i];
      const std::string slot = "n_->attrs()[" + std::to_string(i) + "]";
      if (spec.enums.count(a.kind))
        o << "  " << a.kind << " " << a.name << "() const { return *parse" << a.kind
          << "(std::get<EnumWord>(" << slot << ").word); }\n";
      else if (a.kind == "symbol")
        o << "  const std::string& " << a.name << "() const { return std::get<Symbol>(" << slot
          << ").name; }\n";
      else if (a.kind == "ints" || a.kind == "devices")
        o << "  const " << cppType(a) << "& " << a.name << "() const { return std::get<"
          << cppType(a) << ">(" << slot << "); }\n";
      else if (a.kind == "hw")
        o << "  Hw " << a.name << "() const { return Hw::of(" << slot << "); }\n";
      else
        o << "  " << cppType(a) << " " << a.name << "() const { return std::get<" << cppType(a)
          << ">(" << slot << "); }\n";
    }
    o << "\n private:\n  const Node* n_;\n};\n\n";

    // The creator.
    o << "/// Creates a " << op.name << " node: `g.create(" << C
      << "Args{...}.spec({.names = ...}))`.\n"
      << "struct " << C << "Args {\n";
    for (const Slot& s : op.operands)
      o << "  "
        << (s.variadic   ? "std::vector<Value*> " + s.name + ";"
            : s.optional ? "Value* " + s.name + " = nullptr;"
                         : "Required<Value*> " + s.name + ";")
        << "\n";
    for (const Attr& a : op.attrs)
      o << "  "
        << (a.default_value.empty() ? "Required<" + cppType(a) + "> " + a.name + ";"
                                    : cppType(a) + " " + a.name + " = " + a.default_value + ";")
        << "\n";
    o << "  /// `rest` with the op, operands and attributes filled in.\n"
      << "  NodeSpec spec(NodeSpec rest = {}) const;\n};\n\n";
    // Out of line (op_args.cc): one copy of each, and GCC's false -Wmaybe-uninitialized
    // about std::variant, which inlined copies of these trip, stays in one file.
    std::ostream& o = defs;
    o << "NodeSpec " << C << "Args::spec(NodeSpec rest) const {\n    rest.op = Op::k" << C << ";\n";
    for (const Slot& s : op.operands) {
      if (s.variadic)
        o << "    rest.operands.insert(rest.operands.end(), " << s.name << ".begin(), " << s.name
          << ".end());\n";
      else if (s.optional)
        o << "    if (" << s.name << " != nullptr) rest.operands.push_back(" << s.name << ");\n";
      else
        o << "    rest.operands.push_back(" << s.name << ".value);\n";
    }
    o << "    rest.attr_values.reserve(" << op.attrs.size() << ");\n";
    for (const Attr& a : op.attrs) {
      const std::string v = a.default_value.empty() ? a.name + ".value" : a.name;
      if (spec.enums.count(a.kind))
        o << "    rest.attr_values.push_back(EnumWord{std::string(toWord(" << v << "))});\n";
      else if (a.kind == "symbol")
        o << "    rest.attr_values.push_back(Symbol{" << v << "});\n";
      else if (a.kind == "hw")
        o << "    rest.attr_values.push_back(" << v << ".toAttr());\n";
      else
        o << "    rest.attr_values.push_back(" << v << ");\n";
    }
    o << "    return rest;\n}\n\n";
  }
  writeSharedAttrs(spec, o, defs);
  o << "}  // namespace tandem::ir\n";
  defs << "}  // namespace tandem::ir\n";
}

std::string valueRef(const Op& op, const std::string& name) {
  int i = op.operandIndex(name);
  if (i >= 0) return "CostArg{CostArg::kOperand, " + std::to_string(i) + "}";
  return "CostArg{CostArg::kResult, " + std::to_string(op.resultIndex(name)) + "}";
}

/// The rules an op's table entry points to: its own (defined in ir/ops/), or its class'
/// (kUnaryElementwiseRules, and kUnaryElementwiseBackwardRules for the backward ops that
/// `grad reads` makes).
std::string rulesName(const Op& op) {
  if (op.cls.empty()) return "k" + camel(op.name) + "Rules";
  return "k" + camel(op.cls) + (op.forward.empty() ? "" : "Backward") + "Rules";
}

/// A slot's OperandSpec::dtypes: "0" (any) or dtypeBit(DType::kF32) | ...
std::string dtypeMask(const Slot& s) {
  std::string out;
  for (const std::string& w : split(s.dtypes, '|'))
    for (const std::string& t : kDTypeWords.at(w))
      out += (out.empty() ? "" : " | ") + ("dtypeBit(DType::" + t + ")");
  return out.empty() ? "0" : "static_cast<uint8_t>(" + out + ")";
}

void writeTable(const Spec& spec, std::ostream& o) {
  o << kBanner << R"(
// GCC 12 warns falsely that std::variant attribute values may be used uninitialized when
// it inlines their copies into the table (seen at -O1 under ASan).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "ir/interfaces.h"
#include "ir/op_cost.h"
#include "ir/op_info.h"

namespace tandem::ir {

// Each op family file in ir/ops/ defines the rules its ops name here; a missing
// definition is a link error, so an op cannot be added without its shape rule.
)";
  std::set<std::string> rules;
  for (const Op& op : spec.ops)
    if (rules.insert(rulesName(op)).second) o << "extern const OpRules " << rulesName(op) << ";\n";
  o << "\nnamespace {\n\n";
  for (const Op& op : spec.ops) {
    if (op.grad_reads.empty()) continue;
    o << "const GradPair k" << camel(op.name) << "GradPair{.forward = Op::k" << camel(op.name)
      << ", .backward = Op::k" << camel(op.name) << "Backward, .reads = GradReads::k"
      << (op.grad_reads == op.operands[0].name ? "Input" : "Output") << "};\n";
  }
  for (const Op& op : spec.ops)
    if (op.onnx_line != 0)
      o << "const OnnxOp k" << camel(op.name) << "Onnx{.name = \"" << op.onnx_name
        << "\", .since = " << op.onnx_since << ", .until = " << op.onnx_until << "};\n";
  for (const Op& op : spec.ops) {
    if (!op.has("optimizer")) continue;
    const Op& single = !op.grouped_of.empty()   ? *spec.find(op.grouped_of)
                       : !op.sharded_of.empty() ? *spec.find(op.sharded_of)
                                                : op;
    o << "const OptimizerInfo k" << camel(op.name)
      << "Optimizer{\n    .param = " << single.operandIndex(single.param)
      << ",\n    .grad = " << single.operandIndex(single.grad) << ",\n    .states = {";
    for (const State& s : single.states)
      o << "{.operand = " << single.operandIndex(s.operand) << ", .init = Initializer::Kind::k"
        << camel(s.init) << ", .var_suffix = \"" << s.var << "\", .when_attr = "
        << (s.when.empty() ? -1 : single.attrIndex(s.when.substr(0, s.when.find('>'))))
        << ", .scalar = " << (s.shape == "scalar" ? "true" : "false") << "}, ";
    o << "},\n    .operands = " << single.operands.size() << ",\n    .lr_scale = "
      << (single.lr_scale.empty() ? "false" : "true") << ",\n";
    if (!op.grouped.empty()) o << "    .grouped = Op::k" << camel(op.grouped) << ",\n";
    if (!op.grouped_of.empty()) o << "    .grouped_of = Op::k" << camel(op.grouped_of) << ",\n";
    if (!op.sharded.empty()) o << "    .sharded = Op::k" << camel(op.sharded) << ",\n";
    if (!op.sharded_of.empty()) o << "    .sharded_of = Op::k" << camel(op.sharded_of) << ",\n";
    o << "};\n";
  }
  for (const Op& op : spec.ops) {
    if (!op.has("collective")) continue;
    o << "const CollectiveInfo k" << camel(op.name) << "Collective{.kind = CollectiveKind::k"
      << camel(op.kind) << ", .reads = CollectiveReads::k" << camel(op.reads)
      << ", .writes = CollectiveWrites::k" << camel(op.writes) << ", .call = CollectiveCall::k"
      << camel(op.call) << ", .devices_attr = " << op.attrIndex("devices")
      << ", .groups_attr = " << op.attrIndex("groups") << "};\n";
  }
  o << "\nstd::vector<OpInfo> buildTable() {\n  std::vector<OpInfo> t;\n  t.reserve(kNumOps);\n";
  for (const Op& op : spec.ops) {
    const std::string C = camel(op.name);
    o << "  t.push_back(OpInfo{\n      .op = Op::k" << C << ",\n      .name = \"" << op.name
      << "\",\n      .operands = {";
    for (const Slot& s : op.operands)
      o << "{\"" << s.name << "\", " << (s.optional ? "true" : "false") << ", "
        << (s.variadic ? "true" : "false") << ", " << dtypeMask(s) << ", "
        << (s.when_attr.empty() ? -1 : op.attrIndex(s.when_attr)) << "}, ";
    o << "},\n      .results = {";
    for (const Slot& s : op.results)
      o << "{\"" << s.name << "\", " << (s.optional ? "true" : "false") << ", "
        << (s.variadic ? "true" : "false") << ", " << dtypeMask(s) << "}, ";
    o << "},\n      .attrs = {";
    for (const Attr& a : op.attrs) {
      o << "\n          AttrSpec{.name = \"" << a.name << "\", .kind = " << kindEnum(a, spec);
      if (spec.enums.count(a.kind)) {
        o << ", .words = {";
        for (const std::string& w : spec.enums.at(a.kind)) o << "\"" << w << "\", ";
        o << "}";
      }
      if (!a.default_value.empty())
        o << ", .default_value = AttrValue{"
          << (a.kind == "bool"    ? "bool{"
              : a.kind == "float" ? "double{"
                                  : "int64_t{")
          << a.default_value << "}}";
      if (!a.range_text.empty())
        o << ", .range = AttrRange{.lo = " << a.lo
          << ", .hi = " << (a.hi.empty() ? "std::numeric_limits<double>::infinity()" : a.hi)
          << ", .lo_open = " << (a.lo_open ? "true" : "false")
          << ", .hi_open = " << (a.hi_open ? "true" : "false")
          << ", .text = " << quote(a.range_text) << "}";
      if (!a.preset.empty()) o << ", .preset = " << a.preset;
      o << "},";
    }
    o << "},\n      .traits = 0";
    for (const std::string& t : op.traits) o << " | k" << camel(t);
    o << ",\n      .doc = " << quote(op.doc) << ",\n      .rules = &" << rulesName(op) << ",\n"
      << "      .cost = CostSpec{.flops = &cost::" << op.cost;
    if (op.cost == "none") o << ", .work = false";
    if (op.cost == "elementwise" && !op.cost_args.empty())
      o << ", .per_element = " << op.cost_args[0];
    if (kTwoValueCosts.count(op.cost))
      o << ", .a = " << valueRef(op, op.cost_args[0]) << ", .b = " << valueRef(op, op.cost_args[1]);
    if (kOneValueCosts.count(op.cost)) o << ", .a = " << valueRef(op, op.cost_args[0]);
    o << "},\n";
    if (op.has("optimizer")) o << "      .optimizer = &k" << C << "Optimizer,\n";
    if (op.has("collective")) o << "      .collective = &k" << C << "Collective,\n";
    if (!op.cls.empty()) o << "      .op_class = \"" << op.cls << "\",\n";
    if (!op.grad_reads.empty()) o << "      .grad_pair = &k" << C << "GradPair,\n";
    if (!op.forward.empty()) o << "      .grad_pair = &k" << camel(op.forward) << "GradPair,\n";
    if (op.onnx_line != 0) o << "      .onnx = &k" << C << "Onnx,\n";
    o << "  });\n";
  }
  o << "  return t;\n}\n\n}  // namespace\n\nconst std::vector<OpInfo>& allOps() {\n"
    << "  static const std::vector<OpInfo>* table = new std::vector<OpInfo>(buildTable());\n"
    << "  return *table;\n}\n\n}  // namespace tandem::ir\n";
}

void writeKernelOps(const Spec& spec, std::ostream& o) {
  o << kBanner << "#pragma once\n\n// The kernel-table slots (backend/kernel_table.h): every op "
    << "a backend's kernel table\n// holds, that is every op the runtime does not execute "
    << "itself, as X(Enum, name).\n#define TANDEM_KERNEL_OPS(X)";
  for (const Op& op : spec.ops)
    if (!op.has("runtime")) o << " \\\n  X(" << camel(op.name) << ", " << op.name << ")";
  o << "\n";
  // Per class, its forward ops (each with a backward op made by `grad reads`): backends
  // instantiate one kernel template per op from it (backend/unary_math.h's NameMath).
  for (const Op& c : spec.classes) {
    std::string upper = c.name;
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    o << "\n// The ops of class " << c.name << " (" << c.doc << "), as X(Enum).\n#define TANDEM_"
      << upper << "_OPS(X)";
    for (const Op& op : spec.ops)
      if (op.cls == c.name && op.forward.empty()) o << " X(" << camel(op.name) << ")";
    o << "\n";
  }
}

/// docs/IR.md's operands or results cell: `x: float, labels: i32, b?` (`|` escaped).
std::string slotList(const std::vector<Slot>& slots) {
  std::string out;
  for (const Slot& s : slots) {
    std::string dtypes = s.dtypes;
    for (size_t p = 0; (p = dtypes.find('|', p)) != std::string::npos; p += 2)
      dtypes.replace(p, 1, "\\|");
    out += (out.empty() ? "" : ", ") + s.name +
           (s.optional   ? "?"
            : s.variadic ? "..."
                         : "") +
           (dtypes.empty() ? "" : ": " + dtypes);
  }
  return out;
}

std::string docTable(const Spec& spec) {
  std::ostringstream o;
  o << "| op | operands | results | attributes | traits | cost | what it does |\n"
    << "|---|---|---|---|---|---|---|\n";
  for (const Op& op : spec.ops) {
    std::string attrs, traits, cost = op.cost;
    for (const Attr& a : op.attrs) {
      std::string kind = spec.enums.count(a.kind) ? "" : a.kind;
      if (spec.enums.count(a.kind)) {
        for (const std::string& w : spec.enums.at(a.kind)) kind += (kind.empty() ? "" : "\\|") + w;
      }
      attrs += (attrs.empty() ? "" : ", ") + ("`" + a.name + ": " + kind) +
               (a.default_value.empty() ? "" : " = " + a.default_value) +
               (a.range_text.empty() ? "" : " " + a.range_text) +
               (a.preset.empty() ? "" : " preset " + a.preset) + "`";
    }
    for (const std::string& t : op.traits) traits += (traits.empty() ? "" : ", ") + t;
    if (!op.cost_args.empty()) {
      cost += "(";
      for (size_t i = 0; i < op.cost_args.size(); ++i) cost += (i ? ", " : "") + op.cost_args[i];
      cost += ")";
    }
    std::string doc = op.doc;
    if (op.onnx_line != 0)
      doc += " ONNX: " + op.onnx_name + " (opset " + std::to_string(op.onnx_since) + ".." +
             (op.onnx_until ? std::to_string(op.onnx_until) : "") + ").";
    for (size_t p = 0; (p = doc.find('|', p)) != std::string::npos; p += 2)
      doc.replace(p, 1, "\\|");
    o << "| `" << op.name << "` | " << slotList(op.operands) << " | " << slotList(op.results)
      << " | " << attrs << " | " << traits << " | " << cost << " | " << doc << " |\n";
  }
  return o.str();
}

const char* kDocBegin =
    "<!-- BEGIN op table: generated from ir/ops.td by ir/opgen; "
    "`cmake --build build --target update-ir-doc` rewrites it -->\n";
const char* kDocEnd = "<!-- END op table -->\n";

void writeFile(const std::string& path, const std::string& text) {
  // Unchanged files keep their time stamp, so that nothing recompiles needlessly.
  std::ifstream in(path, std::ios::binary);
  std::stringstream old;
  old << in.rdbuf();
  if (in && old.str() == text) return;
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) {
    std::cerr << "opgen: cannot write " << path << "\n";
    std::exit(1);
  }
}

Spec load(const std::string& path) {
  g_spec_path = path;
  std::ifstream in(path);
  if (!in) {
    std::cerr << "opgen: cannot read " << path << "\n";
    std::exit(1);
  }
  Spec spec = parse(in);
  validate(spec);
  return spec;
}

int updateDoc(const Spec& spec, const std::string& doc_path, bool check) {
  std::ifstream in(doc_path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string doc = buf.str();
  size_t b = doc.find(kDocBegin), e = doc.find(kDocEnd);
  if (!in || b == std::string::npos || e == std::string::npos || e < b) {
    std::cerr << doc_path << ": no generated op table (the lines '" << trim(kDocBegin) << "' and '"
              << trim(kDocEnd) << "')\n";
    return 1;
  }
  b += std::string(kDocBegin).size();
  const std::string fresh = doc.substr(0, b) + docTable(spec) + doc.substr(e);
  if (!check) {
    writeFile(doc_path, fresh);
    return 0;
  }
  if (fresh == doc) return 0;
  std::cerr << doc_path << ": the op table differs from " << g_spec_path
            << "; run `cmake --build build --target update-ir-doc`\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() >= 3 && args[0] == "--doc")
    return updateDoc(load(args[1]), args[2], args.size() == 4 && args[3] == "--check");
  if (args.size() != 2) {
    std::cerr << "usage: opgen SPEC OUTDIR | opgen --doc SPEC DOC [--check]\n";
    return 2;
  }
  const Spec spec = load(args[0]);
  const std::string out = args[1];
  std::ostringstream enums, views, arg_defs, table, kernels, optimizers;
  writeEnumHeader(spec, enums);
  writeViews(spec, views, arg_defs);
  writeTable(spec, table);
  writeKernelOps(spec, kernels);
  writeOptimizerConfigs(spec, optimizers);
  writeFile(out + "/ir/op_enum.h", enums.str());
  writeFile(out + "/ir/op_views.h", views.str());
  writeFile(out + "/ir/op_table.cc", table.str());
  writeFile(out + "/ir/op_args.cc", arg_defs.str());
  writeFile(out + "/ir/kernel_ops.h", kernels.str());
  writeFile(out + "/ir/optimizer_configs.h", optimizers.str());
  writeFile(out + "/op_table.md", docTable(spec));
  return 0;
}
