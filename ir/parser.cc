#include "ir/parser.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <optional>
#include <type_traits>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ir/file_input.h"
#include "ir/number_format.h"
#include "ir/plan.h"
#include "ir/status_macros.h"

namespace tandem::ir {
namespace {

// Hand-written lexer and recursive-descent parser: the grammar is small (docs/IR.md) and
// the error messages (file:line:col plus what was expected) matter more than generality.

enum class Tok { kEof, kPercent, kAt, kWord, kNumber, kString, kPunct, kBad };

struct Token {
  Tok kind = Tok::kEof;
  std::string text;  // name without sigil, word, number text, unescaped string, punct char
  int line = 1, col = 1;
};

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.';
}
bool isDigit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(absl::string_view s) : s_(s) {}

  Token next() {
    skipSpaceAndComments();
    Token t;
    t.line = line_;
    t.col = col_;
    if (pos_ >= s_.size()) return t;
    char c = s_[pos_];
    if (c == '%' || c == '@') {
      advance();
      t.kind = c == '%' ? Tok::kPercent : Tok::kAt;
      t.text = takeWhile(isNameChar);
      if (t.text.empty()) {
        t.kind = Tok::kBad;
        t.text = absl::StrCat("'", std::string(1, c), "' must be followed by a name");
      }
      return t;
    }
    if (size_t n = specialNumberLength(); n > 0) {  // inf, -inf, nan, nan(0x...)
      t.kind = Tok::kNumber;
      t.text = std::string(s_.substr(pos_, n));
      for (size_t i = 0; i < n; ++i) advance();
      return t;
    }
    if (isDigit(c) || ((c == '-' || c == '+') && pos_ + 1 < s_.size() &&
                       (isDigit(s_[pos_ + 1]) || s_[pos_ + 1] == '.'))) {
      t.kind = Tok::kNumber;
      size_t start = pos_;
      advance();
      while (pos_ < s_.size()) {
        char d = s_[pos_];
        bool exp_sign = (d == '-' || d == '+') && (s_[pos_ - 1] == 'e' || s_[pos_ - 1] == 'E');
        if (!(isDigit(d) || d == '.' || d == 'e' || d == 'E' || exp_sign)) break;
        advance();
      }
      t.text = std::string(s_.substr(start, pos_ - start));
      return t;
    }
    if (isNameChar(c)) {
      t.kind = Tok::kWord;
      t.text = takeWhile(isNameChar);
      return t;
    }
    if (c == '"') {
      advance();
      while (pos_ < s_.size() && s_[pos_] != '"' && s_[pos_] != '\n') {
        if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) advance();
        t.text.push_back(s_[pos_]);
        advance();
      }
      if (pos_ >= s_.size() || s_[pos_] != '"') {
        t.kind = Tok::kBad;
        t.text = "unterminated string";
        return t;
      }
      advance();
      t.kind = Tok::kString;
      return t;
    }
    if (absl::string_view("(){}[],:=").find(c) != absl::string_view::npos) {
      advance();
      t.kind = Tok::kPunct;
      t.text = std::string(1, c);
      return t;
    }
    t.kind = Tok::kBad;
    t.text = (c >= 32 && c < 127)
                 ? absl::StrCat("unexpected character '", std::string(1, c), "'")
                 : absl::StrCat("unexpected byte 0x", absl::Hex(static_cast<unsigned char>(c)));
    return t;
  }

 private:
  /// The length of the number at pos_ that is no digits: an infinity or a NaN as
  /// formatDouble writes them (ir/number_format.h), with an optional sign; 0 if none.
  size_t specialNumberLength() const {
    size_t at = pos_;
    if (at < s_.size() && (s_[at] == '-' || s_[at] == '+')) ++at;
    const absl::string_view rest = s_.substr(at);
    size_t n = 0;
    if (absl::StartsWith(rest, "inf")) {
      n = 3;
    } else if (absl::StartsWith(rest, "nan(")) {
      const size_t close = rest.find(')');
      if (close == absl::string_view::npos) return 0;
      n = close + 1;
    } else if (absl::StartsWith(rest, "nan")) {
      n = 3;
    } else {
      return 0;
    }
    if (n < rest.size() && isNameChar(rest[n])) return 0;  // a word such as "info"
    return at - pos_ + n;
  }
  void advance() {
    if (s_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  void skipSpaceAndComments() {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (c == '/' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '/') {
        while (pos_ < s_.size() && s_[pos_] != '\n') advance();
      } else {
        break;
      }
    }
  }
  std::string takeWhile(bool (*pred)(char)) {
    size_t start = pos_;
    while (pos_ < s_.size() && pred(s_[pos_])) advance();
    return std::string(s_.substr(start, pos_ - start));
  }

  absl::string_view s_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

// A token as an error message shows it: cut with an ellipsis past 64 bytes, so that a
// garbled multi-megabyte line gives a one-line message, not a copy of itself.
std::string clip(absl::string_view text) {
  constexpr size_t kMax = 64, kKeep = 48;
  if (text.size() <= kMax) return std::string(text);
  return absl::StrCat(text.substr(0, kKeep), "... (", text.size(), " bytes)");
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::kEof:
      return "end of input";
    case Tok::kPercent:
      return absl::StrCat("'%", clip(t.text), "'");
    case Tok::kAt:
      return absl::StrCat("'@", clip(t.text), "'");
    case Tok::kString:
      return absl::StrCat("string \"", clip(t.text), "\"");
    default:
      return absl::StrCat("'", clip(t.text), "'");
  }
}

constexpr int64_t kMaxElements = int64_t{1} << 48;
// Dimensions of a tensor type: PyTorch's limit is 25, ONNX models use at most 6 or so.
constexpr size_t kMaxTypeRank = 32;

class Parser {
 public:
  Parser(absl::string_view text, absl::string_view file) : lex_(text), file_(file) {
    tok_ = lex_.next();
  }

  absl::StatusOr<std::unique_ptr<Module>> parse() {
    RETURN_IF_ERROR(expectWord("module"));
    if (tok_.kind != Tok::kAt) return error("expected the module name '@NAME' after 'module'");
    auto m = std::make_unique<Module>(tok_.text);
    next();
    if (isWord("devices")) {
      next();
      RETURN_IF_ERROR(expectPunct("="));
      Token at = tok_;
      auto ds = parseDeviceList();
      if (!ds.ok()) return ds.status();
      if (ds->empty()) return errorAt(at, "the module's device list is empty");
      m->setDevices(*std::move(ds));
    }
    RETURN_IF_ERROR(expectPunct("{"));
    while (!isPunct("}")) {
      absl::Status s =
          isWord("var") ? parseVar(*m)
          : isWord("graph")
              ? parseGraph(*m)
              : error(absl::StrCat("expected 'var', 'graph' or '}', got ", describe(tok_)));
      if (!s.ok()) return s;
    }
    next();
    if (tok_.kind != Tok::kEof)
      return error(absl::StrCat("unexpected ", describe(tok_), " after the end of the module"));
    return m;
  }

 private:
  // ---- token helpers ------------------------------------------------------------------
  void next() { tok_ = lex_.next(); }
  bool isPunct(absl::string_view p) const { return tok_.kind == Tok::kPunct && tok_.text == p; }
  bool isWord(absl::string_view w) const { return tok_.kind == Tok::kWord && tok_.text == w; }

  absl::Status error(absl::string_view msg) const {
    if (tok_.kind == Tok::kBad)  // the lexer's complaint is the more precise one
      return absl::InvalidArgumentError(
          absl::StrCat(file_, ":", tok_.line, ":", tok_.col, ": ", tok_.text));
    return absl::InvalidArgumentError(
        absl::StrCat(file_, ":", tok_.line, ":", tok_.col, ": ", msg));
  }
  absl::Status errorAt(const Token& t, absl::string_view msg) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ":", t.line, ":", t.col, ": ", msg));
  }
  absl::Status expectPunct(absl::string_view p) {
    if (!isPunct(p)) return error(absl::StrCat("expected '", p, "', got ", describe(tok_)));
    next();
    return absl::OkStatus();
  }
  absl::Status expectWord(absl::string_view w) {
    if (!isWord(w)) return error(absl::StrCat("expected '", w, "', got ", describe(tok_)));
    next();
    return absl::OkStatus();
  }

  /// Reads the current number token as a T; `what` ("an integer", "a number") names it
  /// in errors.
  template <typename T>
  absl::StatusOr<T> parseNumber(absl::string_view what) {
    if (tok_.kind != Tok::kNumber)
      return error(absl::StrCat("expected ", what, ", got ", describe(tok_)));
    T v{};
    const std::string& s = tok_.text;
    bool ok = false;
    if constexpr (std::is_floating_point_v<T>) {
      // Every value formatDouble writes, infinities and NaNs with their payload included.
      const std::optional<double> d = parseDouble(s);
      ok = d.has_value();
      v = d.value_or(0);
    } else {
      const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
      auto [end, ec] = std::from_chars(begin, s.data() + s.size(), v);
      ok = ec == std::errc() && end == s.data() + s.size();
    }
    if (!ok) return error(absl::StrCat("expected ", what, ", got '", clip(s), "'"));
    next();
    return v;
  }
  absl::StatusOr<int64_t> parseInt() { return parseNumber<int64_t>("an integer"); }
  absl::StatusOr<double> parseFloat() { return parseNumber<double>("a number"); }

  // ---- pieces -------------------------------------------------------------------------
  absl::StatusOr<TensorType> parseType() {
    if (tok_.kind != Tok::kWord)
      return error(absl::StrCat("expected a tensor type such as f32[2,3], got ", describe(tok_)));
    auto dtype = parseDType(tok_.text);
    if (!dtype.ok()) return error(dtype.status().message());
    next();
    TensorType t{*dtype, {}};
    RETURN_IF_ERROR(expectPunct("["));
    int64_t elements = 1;
    while (!isPunct("]")) {
      if (!t.shape.empty()) RETURN_IF_ERROR(expectPunct(","));
      Token at = tok_;
      // No op takes more; a longer shape is a damaged file, and every message that
      // quotes the type would be as long as it.
      if (t.shape.size() == kMaxTypeRank)
        return errorAt(at,
                       absl::StrCat("the tensor type has more than ", kMaxTypeRank, " dimensions"));
      auto d = parseInt();
      if (!d.ok()) return d.status();
      if (*d < 0) return errorAt(at, absl::StrCat("dimension ", *d, " is negative"));
      if (*d > 0 && elements > kMaxElements / *d)
        return errorAt(at, "the tensor type has too many elements");
      elements *= std::max<int64_t>(*d, 1);
      t.shape.push_back(*d);
    }
    next();
    return t;
  }

  absl::StatusOr<Device> parseDeviceAfterKind(const Token& kind) {
    RETURN_IF_ERROR(expectPunct(":"));
    if (tok_.kind != Tok::kNumber)
      return error(absl::StrCat("expected a device index, got ", describe(tok_)));
    std::string text = absl::StrCat(clip(kind.text), ":", clip(tok_.text));
    next();
    // "cpu:0@1": the lexer reads "@1" as an '@' name; a device's rank is digits right after
    // its index (a graph name never starts with a digit).
    if (tok_.kind == Tok::kAt && !tok_.text.empty() && isDigit(tok_.text[0])) {
      absl::StrAppend(&text, "@", clip(tok_.text));
      next();
    }
    auto d = ir::parseDevice(text);
    if (!d.ok()) return errorAt(kind, d.status().message());
    return d;
  }

  absl::StatusOr<std::vector<Device>> parseDeviceList() {
    RETURN_IF_ERROR(expectPunct("["));
    std::vector<Device> out;
    absl::flat_hash_set<Device> seen;  // a collective of a big module lists every device
    while (!isPunct("]")) {
      if (!out.empty()) RETURN_IF_ERROR(expectPunct(","));
      if (tok_.kind != Tok::kWord)
        return error(absl::StrCat("expected a device such as cpu:0, got ", describe(tok_)));
      Token kind = tok_;
      next();
      auto d = parseDeviceAfterKind(kind);
      if (!d.ok()) return d.status();
      if (!seen.insert(*d).second)
        return errorAt(kind, absl::StrCat("device ", toString(*d), " is listed twice"));
      if (out.size() == kMaxDevices)
        return errorAt(kind,
                       absl::StrCat("the device list has more than ", kMaxDevices, " devices (",
                                    toString(*d), " is number ", kMaxDevices + 1, ")"));
      out.push_back(*d);
    }
    next();
    return out;
  }

  absl::StatusOr<Initializer> parseInitializer() {
    Initializer init;
    if (isWord("zeros")) {
      init.kind = Initializer::Kind::kZeros;
    } else if (isWord("ones")) {
      init.kind = Initializer::Kind::kOnes;
    } else if (isWord("kaiming")) {
      init.kind = Initializer::Kind::kKaiming;
    } else if (isWord("normal")) {
      init.kind = Initializer::Kind::kNormal;
      next();
      RETURN_IF_ERROR(expectPunct("("));
      RETURN_IF_ERROR(expectWord("std"));
      RETURN_IF_ERROR(expectPunct("="));
      Token at = tok_;
      auto std = parseFloat();
      if (!std.ok()) return std.status();
      if (!(*std > 0) || std::isinf(*std))
        return errorAt(at, "normal(std=...) needs a finite std > 0");
      init.std = *std;
      if (!isPunct(")")) return error(absl::StrCat("expected ')', got ", describe(tok_)));
    } else {
      return error(absl::StrCat(
          "expected an initializer (zeros, ones, kaiming or normal(std=S)), got ", describe(tok_)));
    }
    next();
    return init;
  }

  absl::Status parseVar(Module& m) {
    next();  // var
    if (tok_.kind != Tok::kAt)
      return error(absl::StrCat("expected '@NAME' after 'var', got ", describe(tok_)));
    Token name = tok_;
    next();
    RETURN_IF_ERROR(expectPunct(":"));
    auto type = parseType();
    if (!type.ok()) return type.status();
    RETURN_IF_ERROR(expectPunct("{"));
    RETURN_IF_ERROR(expectWord("role"));
    RETURN_IF_ERROR(expectPunct("="));
    if (tok_.kind != Tok::kWord)
      return error(absl::StrCat("expected a role, got ", describe(tok_)));
    auto role = parseVarRole(tok_.text);
    if (!role.ok()) return error(role.status().message());
    next();
    RETURN_IF_ERROR(expectPunct(","));
    RETURN_IF_ERROR(expectWord("init"));
    RETURN_IF_ERROR(expectPunct("="));
    auto init = parseInitializer();
    if (!init.ok()) return init.status();
    Var var{name.text, *type, *role, *init};
    // shard-weight-update's sharded state: its shards, their groups and the variables it
    // packs, in the order the printer writes them.
    if (isPunct(",")) {
      next();
      RETURN_IF_ERROR(expectWord("shards"));
      RETURN_IF_ERROR(expectPunct("="));
      RETURN_IF_ERROR(expectPunct("["));
      while (!isPunct("]")) {
        if (!var.shards.empty()) RETURN_IF_ERROR(expectPunct(","));
        ASSIGN_OR_RETURN(int64_t size, parseInt());
        var.shards.push_back(size);
      }
      next();
    }
    if (isPunct(",")) {
      next();
      bool packs = true;
      if (isWord("shard_groups")) {
        next();
        RETURN_IF_ERROR(expectPunct("="));
        ASSIGN_OR_RETURN(var.shard_groups, parseInt());
        packs = isPunct(",");
        if (packs) next();
      }
      if (packs) {
        RETURN_IF_ERROR(expectWord("packs"));
        RETURN_IF_ERROR(expectPunct("="));
        RETURN_IF_ERROR(expectPunct("["));
        while (!isPunct("]")) {
          if (!var.packs.empty()) RETURN_IF_ERROR(expectPunct(","));
          if (tok_.kind != Tok::kAt)
            return error(absl::StrCat("expected '@NAME' in packs, got ", describe(tok_)));
          VarPiece piece{.var = tok_.text};
          next();
          RETURN_IF_ERROR(expectPunct(":"));
          ASSIGN_OR_RETURN(piece.type, parseType());
          var.packs.push_back(std::move(piece));
        }
        next();
      }
    }
    RETURN_IF_ERROR(expectPunct("}"));
    absl::Status added = m.addVar(std::move(var));
    if (!added.ok()) return errorAt(name, added.message());
    return absl::OkStatus();
  }

  absl::StatusOr<AttrValue> parseAttrValue(const AttrSpec& spec) {
    switch (spec.kind) {
      case AttrKind::kInt: {
        auto v = parseInt();
        if (!v.ok()) return v.status();
        return AttrValue(*v);
      }
      case AttrKind::kFloat: {
        auto v = parseFloat();
        if (!v.ok()) return v.status();
        return AttrValue(*v);
      }
      case AttrKind::kBool:
        if (isWord("true") || isWord("false")) {
          bool b = tok_.text == "true";
          next();
          return AttrValue(b);
        }
        return error(absl::StrCat("expected true or false, got ", describe(tok_)));
      case AttrKind::kInts: {
        RETURN_IF_ERROR(expectPunct("["));
        std::vector<int64_t> out;
        while (!isPunct("]")) {
          if (!out.empty()) RETURN_IF_ERROR(expectPunct(","));
          auto v = parseInt();
          if (!v.ok()) return v.status();
          out.push_back(*v);
        }
        next();
        return AttrValue(std::move(out));
      }
      case AttrKind::kHw: {  // `3` or `[3,2]`
        if (!isPunct("[")) {
          auto v = parseInt();
          if (!v.ok()) return v.status();
          return AttrValue(*v);
        }
        next();
        auto h = parseInt();
        if (!h.ok()) return h.status();
        RETURN_IF_ERROR(expectPunct(","));
        auto w = parseInt();
        if (!w.ok()) return w.status();
        RETURN_IF_ERROR(expectPunct("]"));
        return Hw(*h, *w).toAttr();
      }
      case AttrKind::kSymbol: {
        if (tok_.kind != Tok::kAt)
          return error(absl::StrCat("expected '@NAME', got ", describe(tok_)));
        Symbol sym{tok_.text};
        next();
        return AttrValue(std::move(sym));
      }
      case AttrKind::kDevices: {
        auto ds = parseDeviceList();
        if (!ds.ok()) return ds.status();
        return AttrValue(*std::move(ds));
      }
      case AttrKind::kEnum: {
        if (tok_.kind != Tok::kWord)
          return error(absl::StrCat("expected one of ", spec.kindText(), ", got ", describe(tok_)));
        EnumWord w{tok_.text};
        if (!spec.accepts(w))
          return error(absl::StrCat("'", clip(tok_.text), "' is not one of ", spec.kindText()));
        next();
        return AttrValue(std::move(w));
      }
    }
    return error("unknown attribute kind");
  }

  absl::StatusOr<Value*> lookup(Graph& g) {
    if (tok_.kind != Tok::kPercent)
      return error(absl::StrCat("expected a value '%NAME', got ", describe(tok_)));
    Value* v = g.findValue(tok_.text);
    if (v == nullptr) return error(absl::StrCat("use of undefined value %", clip(tok_.text)));
    next();
    return v;
  }

  // ---- the execution plan (docs/IR.md) ----------------------------------------------
  // Its graph lines: `plan {fingerprint="...", parts=[...], alignment=N}` and one
  // `arena DEVICE {bytes=..., peak=..., unshared=...}` per device.
  absl::StatusOr<std::shared_ptr<GraphPlan>> parseGraphPlan(const Module& m) {
    auto plan = std::make_shared<GraphPlan>();
    next();  // plan
    RETURN_IF_ERROR(expectPunct("{"));
    bool first = true;
    while (!isPunct("}")) {
      if (!first) RETURN_IF_ERROR(expectPunct(","));
      first = false;
      ASSIGN_OR_RETURN(std::string key, planKey("the plan"));
      if (key == "fingerprint") {
        if (tok_.kind != Tok::kString || tok_.text.empty() || tok_.text.size() > 16 ||
            !absl::SimpleHexAtoi(tok_.text, &plan->fingerprint))
          return error(absl::StrCat("expected the fingerprint as 16 hex digits in quotes, got ",
                                    describe(tok_)));
        next();
      } else if (key == "parts") {
        RETURN_IF_ERROR(expectPunct("["));
        while (!isPunct("]")) {
          if (plan->parts != 0) RETURN_IF_ERROR(expectPunct(","));
          PlanPart part{};
          for (PlanPart p : kPlanParts)
            if (isWord(planPartName(p))) part = p;
          if (part == PlanPart{})
            return error(absl::StrCat(
                "expected a plan part (streams, events, layouts, algorithms or memory), got ",
                describe(tok_)));
          if (plan->has(part))
            return error(absl::StrCat("plan part '", tok_.text, "' is listed twice"));
          plan->add(part);
          next();
        }
        next();
      } else if (key == "alignment") {
        Token at = tok_;
        ASSIGN_OR_RETURN(plan->alignment, parseInt());
        if (plan->alignment < 1) return errorAt(at, "the plan's alignment must be at least 1");
      } else {
        return errorAt(tok_, absl::StrCat("the plan has no field '", key,
                                          "' (fingerprint, parts, alignment)"));
      }
    }
    next();
    while (isWord("arena")) {
      next();
      if (tok_.kind != Tok::kWord)
        return error(
            absl::StrCat("expected a device such as cpu:0 after 'arena', got ", describe(tok_)));
      Token kind = tok_;
      next();
      ASSIGN_OR_RETURN(Device d, parseDeviceAfterKind(kind));
      std::optional<size_t> index = m.deviceIndex(d);
      if (!index)
        return errorAt(kind,
                       absl::StrCat("arena of ", toString(d), ", which is not a module device"));
      if (*index != plan->arenas.size())
        return errorAt(kind,
                       absl::StrCat("arena of ", toString(d),
                                    " out of order: arenas follow the module's devices, expected ",
                                    plan->arenas.size() < m.devices().size()
                                        ? toString(m.devices()[plan->arenas.size()])
                                        : std::string("no more")));
      ArenaPlan& a = plan->arenas.emplace_back();
      RETURN_IF_ERROR(expectPunct("{"));
      for (auto [name, field] : {std::pair<const char*, int64_t*>{"bytes", &a.bytes},
                                 {"peak", &a.live_peak_bytes},
                                 {"unshared", &a.unshared_bytes}}) {
        if (field != &a.bytes) RETURN_IF_ERROR(expectPunct(","));
        RETURN_IF_ERROR(expectWord(name));
        RETURN_IF_ERROR(expectPunct("="));
        Token at = tok_;
        ASSIGN_OR_RETURN(*field, parseInt());
        if (*field < 0) return errorAt(at, absl::StrCat("arena ", name, " must not be negative"));
      }
      RETURN_IF_ERROR(expectPunct("}"));
    }
    return plan;
  }

  absl::StatusOr<std::string> planKey(absl::string_view where) {
    if (tok_.kind != Tok::kWord)
      return error(absl::StrCat("expected a field of ", where, ", got ", describe(tok_)));
    std::string key = tok_.text;
    next();
    RETURN_IF_ERROR(expectPunct("="));
    return key;
  }

  // A node's `plan{stream=S, wait=[%v, ...], layout=[L, ...], algo=A, offset=[N, ...],
  // workspace=[O, B]}`, where the text names `results` results.
  absl::StatusOr<NodePlan> parseNodePlan(Graph& g, const GraphPlan* plan, size_t results) {
    if (plan == nullptr)
      return error(
          "this node has a plan but its graph has none (a planned graph begins with "
          "its 'plan {...}' line)");
    next();  // plan
    RETURN_IF_ERROR(expectPunct("{"));
    NodePlan p;
    bool first = true;
    absl::flat_hash_set<std::string> seen;
    while (!isPunct("}")) {
      if (!first) RETURN_IF_ERROR(expectPunct(","));
      first = false;
      Token key_tok = tok_;
      ASSIGN_OR_RETURN(std::string key, planKey("a node's plan"));
      if (!seen.insert(key).second)
        return errorAt(key_tok, absl::StrCat("plan field '", key, "' is given twice"));
      auto needs = [&](PlanPart part, absl::string_view what) -> absl::Status {
        if (plan->has(part)) return absl::OkStatus();
        return errorAt(key_tok,
                       absl::StrCat("plan field '", key, "' but the graph's plan has no ", what));
      };
      if (key == "stream") {
        RETURN_IF_ERROR(needs(PlanPart::kStreams, "streams"));
        if (!isWord("compute") && !isWord("comm"))
          return error(absl::StrCat("expected a stream (compute or comm), got ", describe(tok_)));
        p.stream = isWord("comm") ? StreamKind::kComm : StreamKind::kCompute;
        next();
      } else if (key == "wait") {
        RETURN_IF_ERROR(needs(PlanPart::kEvents, "events"));
        RETURN_IF_ERROR(expectPunct("["));
        while (!isPunct("]")) {
          if (!p.waits.empty()) RETURN_IF_ERROR(expectPunct(","));
          ASSIGN_OR_RETURN(Value * v, lookup(g));
          p.waits.push_back({v->def()->id(), static_cast<uint32_t>(v->index())});
        }
        next();
      } else if (key == "layout") {
        // One layout per result, in order.
        RETURN_IF_ERROR(needs(PlanPart::kLayouts, "layouts"));
        RETURN_IF_ERROR(expectPunct("["));
        while (!isPunct("]")) {
          if (!p.layouts.empty()) RETURN_IF_ERROR(expectPunct(","));
          std::optional<ActivationLayout> l =
              tok_.kind == Tok::kWord ? layoutNamed(tok_.text) : std::nullopt;
          if (!l)
            return error(
                absl::StrCat("expected a layout (nchw, nChw16c or nhwc), got ", describe(tok_)));
          p.layouts.push_back(*l);
          next();
        }
        if (p.layouts.size() != results)
          return errorAt(key_tok,
                         absl::StrCat("the layout list gives ", p.layouts.size(),
                                      " layout(s) for the node's ", results, " result(s)"));
        next();
      } else if (key == "algo") {
        // A word of the node's target (AlgorithmRules): the plan verifier checks which.
        RETURN_IF_ERROR(needs(PlanPart::kAlgorithms, "algorithms"));
        if (tok_.kind != Tok::kWord)
          return error(absl::StrCat("expected an algorithm such as gemm, got ", describe(tok_)));
        p.algorithm = tok_.text;
        next();
      } else if (key == "offset") {
        RETURN_IF_ERROR(needs(PlanPart::kMemory, "memory"));
        RETURN_IF_ERROR(expectPunct("["));
        while (!isPunct("]")) {
          if (!p.offsets.empty()) RETURN_IF_ERROR(expectPunct(","));
          Token at = tok_;
          ASSIGN_OR_RETURN(int64_t off, parseInt());
          if (off < 0) return errorAt(at, absl::StrCat("offset ", off, " is negative"));
          p.offsets.push_back(off);
        }
        next();
      } else if (key == "workspace") {
        // [OFFSET, BYTES]: the kernel's scratch bytes in its device's arena.
        RETURN_IF_ERROR(needs(PlanPart::kMemory, "memory"));
        RETURN_IF_ERROR(expectPunct("["));
        Token at = tok_;
        ASSIGN_OR_RETURN(int64_t off, parseInt());
        RETURN_IF_ERROR(expectPunct(","));
        Token bytes_at = tok_;
        ASSIGN_OR_RETURN(int64_t bytes, parseInt());
        RETURN_IF_ERROR(expectPunct("]"));
        if (off < 0) return errorAt(at, absl::StrCat("workspace offset ", off, " is negative"));
        if (bytes <= 0)
          return errorAt(bytes_at, absl::StrCat("workspace of ", bytes,
                                                " bytes: a planned workspace has at least one"));
        p.workspace = WorkspacePlan{off, bytes};
      } else {
        return errorAt(key_tok, absl::StrCat("a node's plan has no field '", key,
                                             "' (stream, wait, layout, algo, offset, workspace)"));
      }
    }
    next();
    return p;
  }

  absl::Status parseNode(Graph& g, GraphPlan* plan) {
    Token start = tok_;
    std::vector<std::string> names;
    std::vector<Token> name_toks;
    if (tok_.kind == Tok::kPercent) {
      while (true) {
        if (tok_.kind != Tok::kPercent)
          return error(absl::StrCat("expected a result name '%NAME', got ", describe(tok_)));
        if (g.findValue(tok_.text) != nullptr)
          return error(absl::StrCat("value %", clip(tok_.text), " is defined twice"));
        for (const auto& n : names)
          if (n == tok_.text)
            return error(absl::StrCat("value %", clip(tok_.text), " is defined twice"));
        names.push_back(tok_.text);
        name_toks.push_back(tok_);
        next();
        if (!isPunct(",")) break;
        next();
      }
      RETURN_IF_ERROR(expectPunct("="));
    }
    if (tok_.kind != Tok::kWord)
      return error(absl::StrCat("expected an op name, got ", describe(tok_)));
    Token op_tok = tok_;
    auto op = opByName(tok_.text);
    if (!op) return error(absl::StrCat("unknown op '", clip(tok_.text), "'"));
    if (*op == Op::kInput)
      return error("input nodes are written in the graph header, not as nodes");
    const OpInfo& info = opInfo(*op);
    next();
    NodeSpec spec;
    spec.op = *op;
    spec.names = names;
    RETURN_IF_ERROR(expectPunct("("));
    while (!isPunct(")")) {
      if (!spec.operands.empty()) RETURN_IF_ERROR(expectPunct(","));
      auto v = lookup(g);
      if (!v.ok()) return v.status();
      spec.operands.push_back(*v);
    }
    next();
    if (isPunct("{")) {
      next();
      while (!isPunct("}")) {
        if (!spec.attrs.empty()) RETURN_IF_ERROR(expectPunct(","));
        if (tok_.kind != Tok::kWord)
          return error(absl::StrCat("expected an attribute name, got ", describe(tok_)));
        int idx = info.attrIndex(tok_.text);
        if (idx < 0)
          return error(absl::StrCat(info.name, " has no attribute '", clip(tok_.text), "'"));
        std::string attr_name = tok_.text;
        next();
        RETURN_IF_ERROR(expectPunct("="));
        auto value = parseAttrValue(info.attrs[idx]);
        if (!value.ok()) return value.status();
        spec.attrs.emplace_back(std::move(attr_name), *std::move(value));
      }
      next();
    }
    if (tok_.kind == Tok::kAt) {
      Token kind = tok_;
      next();
      auto d = parseDeviceAfterKind(kind);
      if (!d.ok()) return d.status();
      spec.device = *d;
    }
    std::vector<TensorType> types;
    if (isPunct(":")) {
      next();
      while (true) {
        auto t = parseType();
        if (!t.ok()) return t.status();
        types.push_back(*std::move(t));
        if (!isPunct(",")) break;
        next();
      }
    }
    std::optional<NodePlan> node_plan;
    if (isWord("plan")) {
      ASSIGN_OR_RETURN(node_plan, parseNodePlan(g, plan, names.size()));
    }
    if (isWord("loc")) {
      next();
      RETURN_IF_ERROR(expectPunct("("));
      if (tok_.kind != Tok::kString)
        return error(absl::StrCat("expected a scope string, got ", describe(tok_)));
      spec.scope = tok_.text;
      next();
      if (isPunct(",")) {
        next();
        if (tok_.kind != Tok::kString)
          return error(absl::StrCat("expected a location string, got ", describe(tok_)));
        spec.location = tok_.text;
        next();
      }
      RETURN_IF_ERROR(expectPunct(")"));
    }
    if (tok_.kind == Tok::kBad) return error("");  // the lexer's complaint comes first
    if (types.size() != names.size())
      return errorAt(start, absl::StrCat("the node names ", names.size(), " result(s) but gives ",
                                         types.size(), " type(s)"));
    if (info.has(kDeclaredType)) spec.declared_types = types;
    auto node = g.create(std::move(spec));
    if (!node.ok()) return errorAt(op_tok, node.status().message());
    if ((*node)->numResults() != names.size())
      return errorAt(op_tok, absl::StrCat(info.name, " produces ", (*node)->numResults(),
                                          " result(s) here, the text names ", names.size()));
    for (size_t i = 0; i < names.size(); ++i)
      if ((*node)->result(i)->type() != types[i])
        return errorAt(name_toks[i],
                       absl::StrCat("%", names[i], " is declared ", toString(types[i]), " but ",
                                    info.name, " gives ", toString((*node)->result(i)->type())));
    if (node_plan) {
      if (plan->nodes.size() <= (*node)->id()) plan->nodes.resize((*node)->id() + 1);
      plan->nodes[(*node)->id()] = *std::move(node_plan);
    }
    return absl::OkStatus();
  }

  absl::Status parseGraph(Module& m) {
    next();  // graph
    if (tok_.kind != Tok::kAt)
      return error(absl::StrCat("expected '@NAME' after 'graph', got ", describe(tok_)));
    Token name = tok_;
    auto created = m.addGraph(tok_.text);
    if (!created.ok()) return errorAt(name, created.status().message());
    Graph& g = **created;
    next();
    RETURN_IF_ERROR(expectPunct("("));
    bool first = true;
    while (!isPunct(")")) {
      if (!first) RETURN_IF_ERROR(expectPunct(","));
      first = false;
      if (tok_.kind != Tok::kPercent)
        return error(absl::StrCat("expected an argument '%NAME: TYPE', got ", describe(tok_)));
      if (g.findValue(tok_.text) != nullptr)
        return error(absl::StrCat("argument %", clip(tok_.text), " is declared twice"));
      NodeSpec spec;
      spec.op = Op::kInput;
      spec.names = {tok_.text};
      next();
      RETURN_IF_ERROR(expectPunct(":"));
      auto t = parseType();
      if (!t.ok()) return t.status();
      spec.declared_types = {*t};
      if (tok_.kind == Tok::kAt) {
        Token kind = tok_;
        next();
        auto d = parseDeviceAfterKind(kind);
        if (!d.ok()) return d.status();
        spec.device = *d;
      }
      auto node = g.create(std::move(spec));
      if (!node.ok()) return error(node.status().message());
    }
    next();
    RETURN_IF_ERROR(expectPunct("{"));
    std::shared_ptr<GraphPlan> plan;
    if (isWord("plan")) {
      ASSIGN_OR_RETURN(plan, parseGraphPlan(m));
    }
    while (!isWord("return")) {
      if (tok_.kind == Tok::kEof || isPunct("}"))
        return error(absl::StrCat("graph @", g.name(), " has no 'return'"));
      RETURN_IF_ERROR(parseNode(g, plan.get()));
    }
    next();
    std::vector<Value*> outs;
    while (tok_.kind == Tok::kPercent || (!outs.empty() && isPunct(","))) {
      if (!outs.empty()) RETURN_IF_ERROR(expectPunct(","));
      auto v = lookup(g);
      if (!v.ok()) return v.status();
      outs.push_back(*v);
    }
    g.setOutputs(std::move(outs));
    if (plan != nullptr) {
      plan->nodes.resize(g.idBound());
      g.setPlan(std::move(plan));  // after the last node: adding a node drops a graph's plan
    }
    return expectPunct("}");
  }

  Lexer lex_;
  std::string file_;
  Token tok_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Module>> parseModule(absl::string_view text,
                                                    absl::string_view filename) {
  return Parser(text, filename).parse();
}

absl::StatusOr<std::unique_ptr<Module>> parseModuleFile(const std::string& path) {
  // Bounded, and regular files only (ir/file_input.h): a FIFO or /dev/zero named as the
  // file would otherwise block or be read forever.
  constexpr int64_t kMaxIrBytes = int64_t{4} << 30;
  const InputName name{
      path == "-" ? std::string("standard input") : absl::StrCat("IR file '", path, "'"),
      "an IR file"};
  absl::StatusOr<std::string> text = readInputFile(path, name, kMaxIrBytes);
  if (!text.ok()) return text.status();
  return parseModule(*text, path == "-" ? "<stdin>" : path);
}

}  // namespace tandem::ir
