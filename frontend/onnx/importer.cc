#include "frontend/onnx/importer.h"

#include <cstdlib>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/build_module.h"
#include "frontend/builder_internals.h"
#include "frontend/model.h"
#include "frontend/onnx/converter.h"
#include "frontend/onnx/graph_index.h"
#include "frontend/onnx/patterns.h"
#include "frontend/onnx/refusals.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"
#include "onnx/defs/schema.h"

namespace tandem::onnx_import {

// --- NodeContext's attribute helpers -------------------------------------------------

const onnx::AttributeProto* NodeContext::attr(absl::string_view name) const {
  for (const auto& a : node().attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

bool NodeContext::hasAttr(absl::string_view name) const { return attr(name) != nullptr; }

namespace {

absl::Status wrongAttr(const onnx::AttributeProto& a, absl::string_view want) {
  return absl::InvalidArgumentError(
      absl::StrCat("attribute '", a.name(), "' is not ", want, " (type ",
                   onnx::AttributeProto::AttributeType_Name(a.type()), ")"));
}

}  // namespace

absl::StatusOr<int64_t> NodeContext::attrInt(absl::string_view name, int64_t dflt) const {
  const onnx::AttributeProto* a = attr(name);
  if (a == nullptr) return dflt;
  if (a->type() != onnx::AttributeProto::INT) return wrongAttr(*a, "an int");
  return a->i();
}

absl::StatusOr<float> NodeContext::attrFloat(absl::string_view name, float dflt) const {
  const onnx::AttributeProto* a = attr(name);
  if (a == nullptr) return dflt;
  if (a->type() != onnx::AttributeProto::FLOAT) return wrongAttr(*a, "a float");
  return a->f();
}

absl::StatusOr<std::vector<int64_t>> NodeContext::attrInts(absl::string_view name,
                                                           std::vector<int64_t> dflt) const {
  const onnx::AttributeProto* a = attr(name);
  if (a == nullptr) return dflt;
  if (a->type() != onnx::AttributeProto::INTS) return wrongAttr(*a, "a list of ints");
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

absl::StatusOr<std::string> NodeContext::attrString(absl::string_view name,
                                                    std::string dflt) const {
  const onnx::AttributeProto* a = attr(name);
  if (a == nullptr) return dflt;
  if (a->type() != onnx::AttributeProto::STRING) return wrongAttr(*a, "a string");
  return a->s();
}

bool NodeContext::hasInput(size_t i) const {
  return int(i) < node().input_size() && !node().input(int(i)).empty();
}

// --- names, inputs, outputs ----------------------------------------------------------

std::string identifierFor(absl::string_view onnx_name) {
  if (onnx_name.empty()) return std::string(1, '_');
  std::string out(onnx_name);
  for (char& c : out)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.'))
      c = '_';
  return out;
}

namespace {

std::set<std::string> initializerNames(const onnx::GraphProto& g) {
  std::set<std::string> names;
  for (const auto& t : g.initializer()) names.insert(t.name());
  return names;
}

std::string shapeText(const ir::Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ","), "]"); }

}  // namespace

std::vector<ModelInput> modelInputs(const OnnxModel& model) {
  const onnx::GraphProto& g = model.proto.graph();
  std::set<std::string> given = initializerNames(g);
  std::vector<ModelInput> out;
  for (const auto& in : g.input()) {
    if (given.contains(in.name())) continue;
    ModelInput m{in.name(), 0, {}};
    if (in.type().has_tensor_type()) {
      m.elem_type = in.type().tensor_type().elem_type();
      for (const auto& d : in.type().tensor_type().shape().dim())
        m.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<std::string> modelOutputs(const OnnxModel& model) {
  std::vector<std::string> out;
  for (const auto& o : model.proto.graph().output()) out.push_back(o.name());
  return out;
}

absl::StatusOr<ir::Shape> concreteShape(const ModelInput& input, const ir::Shape* given,
                                        const std::string& model_path, const std::string& remedy) {
  const bool same_rank = given != nullptr && given->size() == input.shape.size();
  for (size_t d = 0; d < input.shape.size() && (given == nullptr || same_rank); ++d)
    if (input.shape[d] < 0 && (given == nullptr || (*given)[d] < 0))
      return absl::InvalidArgumentError(absl::StrCat("ONNX model '", model_path, "': input '",
                                                     input.name, "' leaves dimension ", d, " open",
                                                     remedy.empty() ? "" : "; ", remedy));
  if (given == nullptr) return input.shape;
  bool fits = given->size() == input.shape.size();
  for (size_t d = 0; fits && d < given->size(); ++d)
    fits = input.shape[d] < 0 || input.shape[d] == (*given)[d];
  if (!fits) {
    std::string want;
    for (size_t d = 0; d < input.shape.size(); ++d)
      absl::StrAppend(&want, d ? "," : "", input.shape[d] < 0 ? "?" : absl::StrCat(input.shape[d]));
    return absl::InvalidArgumentError(absl::StrCat("input '", input.name, "' is ",
                                                   shapeText(*given), ", model '", model_path,
                                                   "' takes [", want, "]"));
  }
  return *given;
}

// --- the walk ------------------------------------------------------------------------

namespace {

/// A value of the ONNX graph while importing: a tensor of the graph being built, a value
/// known now, or the output of an unsupported node (then nothing reading it is built).
struct Entry {
  Tensor tensor;
  std::shared_ptr<const OnnxTensor> known;
  bool initializer = false;
  bool poisoned = false;
  /// Computed from the stand-in of a refused node's result (Importer::standIn): built only
  /// to find the refusals past it, so an error that only the stand-in causes is no error.
  bool tainted = false;
  /// The ONNX value a known value's variable is named after: the initializer an Identity
  /// chain passes on (PyTorch's exports copy weights so), or the value itself when empty.
  std::string origin;
  /// Set where `tensor` is this value before its broadcast (an Expand read only by ops
  /// that broadcast) or its zero padding (a Pad read only by ops that pad): the value's
  /// shape in the ONNX graph.
  ir::Shape onnx_shape;
  /// The padding left to the readers (setPaddedOutput): rows and columns on each side.
  int64_t pad = 0;

  const ir::Shape& shape() const {
    return known ? known->shape : !onnx_shape.empty() ? onnx_shape : tensor.shape();
  }
};

class Importer;

/// The shapes of a model's values imported at another batch size (emitGraph).
struct OtherBatchShapes {
  std::map<std::string, ir::Shape> shapes;
  int64_t batch = 0, other_batch = 0;
};

class Context final : public NodeContext {
 public:
  Context(Importer& imp, const onnx::NodeProto& node, int index, int version)
      : imp_(imp), node_(node), index_(index), version_(version) {}
  const onnx::NodeProto& node() const override { return node_; }
  int version() const override { return version_; }
  Builder& builder() override;
  bool isConstant(size_t i) const override;
  absl::StatusOr<const OnnxTensor*> constant(size_t i) override;
  bool isWeight(size_t i) const override;
  absl::StatusOr<Tensor> tensor(size_t i, ir::VarRole role,
                                std::optional<ir::Initializer> init) override;
  absl::StatusOr<Tensor> tensorOf(OnnxTensor value) override;
  absl::StatusOr<ir::Shape> shape(size_t i) override;
  absl::StatusOr<int32_t> elemType(size_t i) override;
  void setOutput(size_t i, Tensor t) override;
  void setOutput(size_t i, OnnxTensor value) override;
  void setBroadcastOutput(size_t i, Tensor t, ir::Shape shape) override;
  void setPaddedOutput(size_t i, Tensor t, int64_t pad) override;
  int64_t inputPadding(size_t i) const override;
  std::vector<const onnx::NodeProto*> readers(size_t i) const override;
  bool isGraphOutput(size_t i) const override;
  absl::Status alias(size_t in, size_t out) override;
  Tensor emit(ir::NodeSpec spec, size_t result) override;
  std::optional<OtherBatch> atOtherBatch(size_t i) const override;
  std::optional<OtherBatch> inputAtOtherBatch(size_t i) const override;

 private:
  absl::StatusOr<const Entry*> input(size_t i) const;
  Importer& imp_;
  const onnx::NodeProto& node_;
  int index_;
  int version_;
};

class Importer {
 public:
  Importer(const OnnxModel& model, Builder& b, VarValues* values)
      : model_(model), b_(b), values_(values) {
    std::string file = model.path;
    if (size_t slash = file.rfind('/'); slash != std::string::npos) file.erase(0, slash + 1);
    file_ = file;
  }

  absl::StatusOr<std::vector<Tensor>> run(const std::map<std::string, Tensor>& inputs,
                                          const std::map<std::string, OnnxTensor>& known,
                                          std::map<size_t, OnnxTensor>* known_outputs) {
    const onnx::GraphProto& g = model_.proto.graph();
    for (const auto& t : g.initializer()) {
      ASSIGN_OR_RETURN(OnnxTensor v,
                       decodeTensor(t, absl::StrCat(what(), ": initializer '", t.name(), "'")));
      entries_[t.name()] = Entry{.known = std::make_shared<OnnxTensor>(std::move(v)),
                                 .initializer = true,
                                 .origin = t.name()};
    }
    for (const ModelInput& in : modelInputs(model_)) {
      if (auto k = known.find(in.name); k != known.end()) {
        entries_[in.name] = Entry{.known = std::make_shared<OnnxTensor>(k->second)};
        continue;
      }
      auto it = inputs.find(in.name);
      if (it == inputs.end())
        return absl::InvalidArgumentError(
            absl::StrCat(what(), ": input '", in.name, "' not given"));
      entries_[in.name] = Entry{.tensor = it->second};
      if (it->second.valid()) input_shapes_[in.name] = it->second.shape();
      if (recorded_ != nullptr && it->second.valid()) (*recorded_)[in.name] = it->second.shape();
    }
    index_.emplace(g);
    fusions_ = findFusions(*index_);
    RETURN_IF_ERROR(checkOps());
    // Every node is checked, also past the first refused one: its results are stand-ins
    // of the shapes ONNX's inference gives, so what reads them is checked too.
    for (int i = 0; i < g.node_size() && !stopped_; ++i) RETURN_IF_ERROR(convert(g.node(i), i));
    if (!refusals_.empty()) return refusalError();
    std::vector<Tensor> outs;
    for (const auto& o : g.output()) {
      auto it = entries_.find(o.name());
      if (it == entries_.end())
        return absl::InvalidArgumentError(
            absl::StrCat(what(), ": graph output '", o.name(), "' is computed by no node"));
      if (known_outputs != nullptr && it->second.known && !it->second.tensor.valid() &&
          it->second.known->elem_type != onnx::TensorProto::FLOAT) {
        OnnxTensor v = *it->second.known;
        v.name = o.name();
        (*known_outputs)[outs.size()] = std::move(v);
        outs.push_back(Tensor());
        continue;
      }
      absl::StatusOr<Tensor> t = materialize(o.name(), it->second, ir::VarRole::kBuffer, {});
      if (absl::IsUnimplemented(t.status()))
        refusals_.push_back(
            {.op = "graph output",
             .node = absl::StrCat("'", o.name(), "'"),
             .why = std::string(t.status().message()),
             .line = absl::StrCat("graph output '", o.name(), "': ", t.status().message()),
             .index = g.node_size()});
      else if (!t.ok())
        return t.status();
      else
        outs.push_back(*t);
    }
    if (!refusals_.empty()) return refusalError();
    return outs;
  }

  std::string what() const { return absl::StrCat("ONNX model '", model_.path, "'"); }
  const OnnxModel& model() const { return model_; }
  Builder& builder() { return b_; }
  const std::string& file() const { return file_; }

  const Entry* find(const std::string& name) const {
    auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second;
  }
  void set(const std::string& name, Entry e) { entries_[name] = std::move(e); }

  std::vector<const onnx::NodeProto*> readers(const std::string& value) const {
    std::vector<const onnx::NodeProto*> out;
    for (int i : index_->readers(value)) out.push_back(&index_->node(i));
    return out;
  }
  bool isGraphOutput(const std::string& value) const { return index_->isOutput(value); }

  /// The entry as a tensor of the graph: a known value becomes a variable (once).
  absl::StatusOr<Tensor> materialize(const std::string& name, const Entry& e, ir::VarRole role,
                                     std::optional<ir::Initializer> init) {
    if (e.tensor.valid() || !e.known) return e.tensor;
    const OnnxTensor& v = *e.known;
    // Doubles are held as floats (decodeTensor) and computed so; booleans and integers
    // (a mask Where selects with) as floats where each is exact in one (|v| <= 2^24).
    std::vector<float> as_floats;
    if (!v.isFloat()) {
      for (size_t i = 0; i < v.ints.size(); ++i) {
        if (std::abs(v.ints[i]) > (int64_t{1} << 24))
          return NodeContext::unsupported(
              absl::StrCat("value '", name, "' is ", elemTypeName(v.elem_type),
                           " and used as a tensor at run "
                           "time, where Tandem computes in float, which does not hold its element ",
                           i, " (", v.ints[i], ") exactly"));
        as_floats.push_back(float(v.ints[i]));
      }
    }
    // Initializers are the model's weights (trained); values computed from constants are
    // buffers, never trained.
    if (!e.initializer) role = ir::VarRole::kBuffer;
    std::string var = varOf(name, e);
    if (!init) {
      init = v.shape.size() >= 2 && role == ir::VarRole::kParam
                 ? b_.options().weight_init
                 : ir::Initializer{ir::Initializer::Kind::kZeros};
    }
    Tensor t = b_.variable(var, ir::TensorType{ir::DType::kF32, v.shape}, role, *init);
    if (!t.valid()) return b_.status();
    (*values_)[var] = v.isFloat() ? v.floats : std::move(as_floats);
    return t;
  }

 private:
  /// The variable of the known value `name`: named after the initializer an Identity chain
  /// passes on, but one per value that reads it. PyTorch's eval-mode export merges
  /// initializers of equal values (a fresh model's zero biases and batch-norm means) into
  /// one, read through Identity nodes: a weight and a running statistic that only start
  /// equal must not become one variable. The first value to read an initializer gets its
  /// name; the same in every graph, as the graphs read the values in the same order.
  std::string varOf(const std::string& name, const Entry& e) {
    const std::string& origin = e.origin.empty() ? name : e.origin;
    const std::string& first = origin_readers_.try_emplace(origin, name).first->second;
    if (first == name) return varName(origin);
    return varName(name == origin ? absl::StrCat(name, ".read") : name);
  }

  /// A variable name per ONNX value, unique among this import's and the same in every
  /// graph built from the model (train and eval steps share the variables).
  std::string varName(const std::string& onnx_name) {
    if (auto it = var_names_.find(onnx_name); it != var_names_.end()) return it->second;
    std::string base = identifierFor(onnx_name), name = base;
    for (int k = 1; used_var_names_.contains(name); ++k) name = absl::StrCat(base, "_", k);
    used_var_names_.insert(name);
    return var_names_[onnx_name] = name;
  }

  /// Every node's op must be one Tandem converts at the version the model uses: all that
  /// are not, in one error, before anything is built.
  absl::Status checkOps() {
    // A newer opset than libonnx knows would select older schemas (ReduceMean-13's axes
    // attribute for ReduceMean-18's axes input): refused, not misread.
    const auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
    if (auto r = ranges.find(""); r != ranges.end() && model_.opset > r->second.second)
      return absl::UnimplementedError(absl::StrCat(
          what(), ": Tandem does not support opset ", model_.opset,
          ": the ONNX library it reads models with knows opsets up to ", r->second.second));
    const onnx::GraphProto& g = model_.proto.graph();
    for (int i = 0; i < g.node_size(); ++i) {
      const onnx::NodeProto& n = g.node(i);
      if (fusions_.interior.contains(i) || fusions_.by_root.contains(i)) continue;
      if (!n.domain().empty() && n.domain() != "ai.onnx") {
        refuse(n, i, absl::StrCat("of domain '", n.domain(), "'"), " ",
               absl::StrCat(n.op_type(), " of domain '", n.domain(), "'"));
        continue;
      }
      const OpConverter* c = findConverter(n.op_type());
      if (c == nullptr) {
        refuse(n, i, "", "");
        continue;
      }
      const int v = version(n);
      if (v < c->min_version)
        refuse(n, i,
               absl::StrCat("version ", v, " (opset ", model_.opset, "); Tandem reads ",
                            n.op_type(), "-", c->min_version, " and later"));
      else if (c->max_version != 0 && v > c->max_version)
        refuse(
            n, i,
            absl::StrCat("version ", v, " (opset ", model_.opset, "); Tandem reads ", n.op_type(),
                         "-", c->min_version, " to ", n.op_type(), "-", c->max_version));
    }
    return absl::OkStatus();
  }

  /// Records that node `index`, `n`, is refused `why` ("" when its op has no converter);
  /// `joiner` goes between the node and why in a line of its own; `op`, when given, is
  /// what the report groups it under in place of its op type (and then says no why).
  void refuse(const onnx::NodeProto& n, int index, const std::string& why,
              const char* joiner = ": ", const std::string& op = "") {
    refused_.insert(index);
    if (stop_at_first_refusal_) stopped_ = true;
    refusals_.push_back(
        {.op = op.empty() ? n.op_type() : op,
         .node = n.name().empty()
                     ? absl::StrCat(
                           "#", index,
                           n.output_size() > 0 ? absl::StrCat(" (output '", n.output(0), "')") : "")
                     : absl::StrCat("'", n.name(), "'"),
         .why = op.empty() ? why : "",
         .line = absl::StrCat(describeNode(n, index), why.empty() ? "" : joiner, why),
         .index = index});
  }

  /// The results of node `n`, which was refused or read a refused node's result: each a
  /// stand-in (a constant of the type ONNX's inference gives it) that the nodes reading it
  /// are checked with, or, where ONNX gives no float type and full shape, poisoned (what
  /// reads it is not checked, only counted).
  void standIn(const onnx::NodeProto& n) {
    const std::map<std::string, ir::Shape>& shapes = standInShapes();
    for (const std::string& out : n.output()) {
      if (out.empty()) continue;
      auto shape = shapes.find(out);
      auto type = model_.inferred_types.find(out);
      const bool usable =
          shape != shapes.end() && type != model_.inferred_types.end() &&
          type->second == onnx::TensorProto::FLOAT &&
          std::all_of(shape->second.begin(), shape->second.end(), [](int64_t d) { return d > 0; });
      Tensor t;
      if (usable)
        t = BuilderInternals::addNode(
            b_,
            ir::ConstantArgs{.value = 0}.spec(
                {.declared_types = {ir::TensorType{ir::DType::kF32, shape->second}}}),
            absl::StrCat("unchecked_", identifierFor(out)), std::source_location::current());
      entries_[out] = t.valid() ? Entry{.tensor = t, .tainted = true} : Entry{.poisoned = true};
    }
  }

  /// The shapes stand-ins take: ONNX's inferred ones, or where this import's inputs are
  /// not the model's (a batch it left open), ONNX's inference again at this import's.
  const std::map<std::string, ir::Shape>& standInShapes() {
    if (!inputs_open_) return model_.inferred_shapes;
    if (!shapes_here_) shapes_here_ = inferShapesAt(model_, input_shapes_);
    return *shapes_here_;
  }

  int version(const onnx::NodeProto& n) const {
    const onnx::OpSchema* s =
        onnx::OpSchemaRegistry::Schema(n.op_type(), int(model_.opset), n.domain());
    return s == nullptr ? 0 : s->since_version();
  }

  /// Converts node `index`, `n` (or, at a pattern's root, the pattern: patterns.h).
  absl::Status convert(const onnx::NodeProto& n, int index) {
    if (fusions_.interior.contains(index)) return absl::OkStatus();  // built at its root
    const Fusion* fusion = nullptr;
    if (auto f = fusions_.by_root.find(index); f != fusions_.by_root.end()) fusion = &f->second;
    const onnx::NodeProto& built = fusion ? fusion->node : n;
    bool tainted = false;
    for (const std::string& in : built.input()) {
      if (in.empty()) continue;
      const Entry* e = find(in);
      if (e == nullptr)
        return absl::InvalidArgumentError(absl::StrCat(what(), ": ", describeNode(n, index),
                                                       " reads '", in, "', which nothing defines"));
      if (e->poisoned) {  // reads a refused node's result of no known shape: not checked
        if (!refused_.contains(index)) ++unchecked_;
        for (const std::string& out : n.output()) entries_[out] = Entry{.poisoned = true};
        return absl::OkStatus();
      }
      tainted = tainted || e->tainted;
    }
    if (refused_.contains(index)) {  // its op: checkOps said why
      standIn(n);
      return absl::OkStatus();
    }
    Context ctx(*this, built, index, fusion ? 0 : version(n));
    absl::Status s = fusion ? findFusedConverter(built.op_type())->convert(ctx)
                            : findConverter(n.op_type())->convert(ctx);
    if (s.ok() && !b_.status().ok()) s = b_.status();
    if (absl::IsUnimplemented(s)) {
      auto note = fusions_.near_misses.find(index);
      refuse(n, index,
             absl::StrCat(s.message(), note == fusions_.near_misses.end()
                                           ? ""
                                           : absl::StrCat("; here ", note->second)));
      if (b_.status().ok()) standIn(n);
      return absl::OkStatus();
    }
    if (!s.ok() && tainted) {
      // Only the stand-in it reads may be at fault: not checked. A builder that failed
      // builds nothing more, so the walk ends here.
      ++unchecked_;
      if (!b_.status().ok()) {
        for (int k = index + 1; k < index_->graph().node_size(); ++k)
          if (!refused_.contains(k) && !fusions_.interior.contains(k)) ++unchecked_;
        stopped_ = true;
      } else {
        standIn(n);
      }
      return absl::OkStatus();
    }
    if (!s.ok())
      return absl::Status(s.code(),
                          absl::StrCat(what(), ": ", describeNode(n, index), ": ", s.message()));
    for (int k = 0; k < n.output_size(); ++k) {
      const std::string& out = n.output(k);
      if (out.empty()) continue;
      const Entry* e = find(out);
      if (e == nullptr)
        return absl::InternalError(absl::StrCat(what(), ": ", describeNode(n, index),
                                                ": the importer made no value for output '", out,
                                                "'"));
      if (tainted) {
        entries_[out].tainted = true;
        continue;
      }
      // ONNX's shape inference is the oracle for every shape the converter made.
      auto inferred = model_.inferred_shapes.find(out);
      const ir::Shape& got = e->shape();
      if (inferred != model_.inferred_shapes.end() && inferred->second != got && !inputs_open_)
        return absl::InternalError(absl::StrCat(
            what(), ": ", describeNode(n, index), ": output '", out, "' is ", shapeText(got),
            " here but ", shapeText(inferred->second), " by ONNX's shape inference"));
      if (recorded_ != nullptr) (*recorded_)[out] = got;
    }
    return absl::OkStatus();
  }

  absl::Status refusalError() const {
    return onnx_import::refusalError(what(), refusals_, model_.proto.graph().node_size(),
                                     unchecked_);
  }

  const OnnxModel& model_;
  Builder& b_;
  VarValues* values_;
  std::string file_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> var_names_;
  std::set<std::string> used_var_names_;
  std::map<std::string, std::string> origin_readers_;  // initializer -> its first value (varOf)
  std::vector<Refusal> refusals_;
  std::set<int> refused_;  // nodes whose op checkOps refused
  int unchecked_ = 0;      // nodes not checked: they read a result with no stand-in
  bool stopped_ = false;   // the walk ended early (unchecked_ counts the rest)
  bool stop_at_first_refusal_ = false;
  std::map<std::string, ir::Shape> input_shapes_;                // this import's, by ONNX name
  std::optional<std::map<std::string, ir::Shape>> shapes_here_;  // standInShapes()
  bool inputs_open_ = false;
  std::map<std::string, ir::Shape>* recorded_ = nullptr;
  const OtherBatchShapes* other_batch_ = nullptr;
  std::optional<GraphIndex> index_;  // of the model's graph, made by run()
  Fusions fusions_;

 public:
  /// Set when the import's input shapes differ from the model's (a batch it left open):
  /// ONNX's inferred shapes are then for other sizes.
  void setInputsOpen(bool open) { inputs_open_ = open; }
  /// Stops at the first refused node, rather than checking them all (an import whose
  /// failure only means "no shapes at the other batch").
  void stopAtFirstRefusal() { stop_at_first_refusal_ = true; }
  /// Every node output's shape goes to `shapes`, by ONNX name (the import at another batch).
  void recordShapes(std::map<std::string, ir::Shape>* shapes) { recorded_ = shapes; }
  void setOtherBatch(const OtherBatchShapes* other) { other_batch_ = other; }
  friend class Context;
};

Builder& Context::builder() { return imp_.builder(); }

absl::StatusOr<const Entry*> Context::input(size_t i) const {
  if (!hasInput(i)) return absl::InvalidArgumentError(absl::StrCat("input ", i, " is missing"));
  return imp_.find(node_.input(int(i)));
}

bool Context::isConstant(size_t i) const {
  auto e = input(i);
  return e.ok() && (*e)->known != nullptr;
}

bool Context::isWeight(size_t i) const {
  auto e = input(i);
  return e.ok() && (*e)->initializer;
}

absl::StatusOr<const OnnxTensor*> Context::constant(size_t i) {
  ASSIGN_OR_RETURN(const Entry* e, input(i));
  if (!e->known && e->tainted)  // a refused node's result: whether it would be known is unknown
    return absl::FailedPreconditionError(
        absl::StrCat("input ", i, " is computed from a refused node's result"));
  if (!e->known)
    return unsupported(
        absl::StrCat("input ", i, " ('", node_.input(int(i)),
                     "') must be known when the model is imported, not computed at run time"));
  return e->known.get();
}

absl::StatusOr<Tensor> Context::tensor(size_t i, ir::VarRole role,
                                       std::optional<ir::Initializer> init) {
  ASSIGN_OR_RETURN(const Entry* e, input(i));
  ASSIGN_OR_RETURN(Tensor t, imp_.materialize(node_.input(int(i)), *e, role, init));
  if (e->known) {  // a variable from now on
    Entry copy = *e;
    copy.tensor = t;
    imp_.set(node_.input(int(i)), std::move(copy));
  }
  return t;
}

absl::StatusOr<Tensor> Context::tensorOf(OnnxTensor value) {
  std::string name = value.name;
  return imp_.materialize(name, Entry{.known = std::make_shared<OnnxTensor>(std::move(value))},
                          ir::VarRole::kBuffer, std::nullopt);
}

absl::StatusOr<ir::Shape> Context::shape(size_t i) {
  ASSIGN_OR_RETURN(const Entry* e, input(i));
  return e->shape();
}

absl::StatusOr<int32_t> Context::elemType(size_t i) {
  ASSIGN_OR_RETURN(const Entry* e, input(i));
  if (e->known) return e->known->elem_type;
  if (e->tensor.valid() && e->tensor.value()->type().dtype == ir::DType::kI32)
    return int32_t{onnx::TensorProto::INT32};
  // A comparison's result is a boolean held in f32 (ir/ops.td compare).
  auto inferred = imp_.model().inferred_types.find(node_.input(int(i)));
  if (inferred != imp_.model().inferred_types.end() && inferred->second == onnx::TensorProto::BOOL)
    return int32_t{onnx::TensorProto::BOOL};
  return int32_t{onnx::TensorProto::FLOAT};
}

void Context::setOutput(size_t i, Tensor t) {
  if (wantsOutput(i)) imp_.set(node_.output(int(i)), Entry{.tensor = t});
}

void Context::setOutput(size_t i, OnnxTensor value) {
  if (wantsOutput(i))
    imp_.set(node_.output(int(i)), Entry{.known = std::make_shared<OnnxTensor>(std::move(value))});
}

void Context::setBroadcastOutput(size_t i, Tensor t, ir::Shape shape) {
  if (wantsOutput(i)) imp_.set(node_.output(int(i)), Entry{.tensor = t, .onnx_shape = shape});
}

void Context::setPaddedOutput(size_t i, Tensor t, int64_t pad) {
  if (!wantsOutput(i)) return;
  ir::Shape padded = t.shape();
  for (size_t a = padded.size() - 2; a < padded.size(); ++a) padded[a] += 2 * pad;
  imp_.set(node_.output(int(i)), Entry{.tensor = t, .onnx_shape = padded, .pad = pad});
}

int64_t Context::inputPadding(size_t i) const {
  auto e = input(i);
  return e.ok() ? (*e)->pad : 0;
}

std::vector<const onnx::NodeProto*> Context::readers(size_t i) const {
  return wantsOutput(i) ? imp_.readers(node_.output(int(i)))
                        : std::vector<const onnx::NodeProto*>{};
}

bool Context::isGraphOutput(size_t i) const {
  return wantsOutput(i) && imp_.isGraphOutput(node_.output(int(i)));
}

absl::Status Context::alias(size_t in, size_t out) {
  ASSIGN_OR_RETURN(const Entry* e, input(in));
  Entry copy = *e;
  if (copy.known && copy.origin.empty()) copy.origin = node_.input(int(in));
  if (wantsOutput(out)) imp_.set(node_.output(int(out)), std::move(copy));
  return absl::OkStatus();
}

/// The shape of value `name` in the import at the other batch, if there is one.
std::optional<NodeContext::OtherBatch> otherBatchOf(const OtherBatchShapes* other,
                                                    const std::string& name) {
  if (other == nullptr) return std::nullopt;
  auto it = other->shapes.find(name);
  if (it == other->shapes.end()) return std::nullopt;
  return NodeContext::OtherBatch{
      .shape = it->second, .batch = other->batch, .other_batch = other->other_batch};
}

std::optional<NodeContext::OtherBatch> Context::atOtherBatch(size_t i) const {
  if (!wantsOutput(i)) return std::nullopt;
  return otherBatchOf(imp_.other_batch_, node_.output(int(i)));
}

std::optional<NodeContext::OtherBatch> Context::inputAtOtherBatch(size_t i) const {
  if (!hasInput(i)) return std::nullopt;
  return otherBatchOf(imp_.other_batch_, node_.input(int(i)));
}

Tensor Context::emit(ir::NodeSpec spec, size_t result) {
  const std::string layer = identifierFor(
      node_.name().empty() ? absl::StrCat(node_.op_type(), "_", index_) : node_.name());
  Tensor t = BuilderInternals::addNode(imp_.builder(), std::move(spec), layer,
                                       std::source_location::current(), result);
  // Where the node came from: the model file and the node's index in its graph.
  if (t.valid()) t.value()->def()->setLocation(absl::StrCat(imp_.file(), "#", index_));
  return t;
}

}  // namespace

namespace {

/// The model imported once more, into a scratch module, with its open batch one larger:
/// every value's shape there. The importer folds shape arithmetic (Shape, Gather, Mul,
/// Concat) on the batch it imports at, so a Reshape's target holds the batch as a number,
/// at whatever axis the model puts it (nn.MultiheadAttention's sequence-first [T, N*H, hd]);
/// the dimensions that differ between the two imports are those that depend on the batch,
/// which a reshape writes -1 so that replicate's per-device shares reshape alike (as
/// `tandem export` finds the batch's axes by building a model for two batches). Unset
/// where no input leaves exactly axis 0 open, or where the other import fails (the import
/// proper then says why, if it fails too).
std::optional<OtherBatchShapes> importAtOtherBatch(const OnnxModel& model,
                                                   const std::map<std::string, Tensor>& inputs,
                                                   const std::map<std::string, OnnxTensor>& known) {
  OtherBatchShapes out;
  std::vector<std::pair<std::string, ir::Shape>> open;  // inputs whose batch is open
  for (const ModelInput& in : modelInputs(model)) {
    if (known.contains(in.name)) continue;
    auto it = inputs.find(in.name);
    if (it == inputs.end() || !it->second.valid()) return std::nullopt;
    ir::Shape given = it->second.shape();
    for (size_t d = 1; d < in.shape.size(); ++d)
      if (in.shape[d] < 0) return std::nullopt;  // open beyond the batch: not probed
    if (in.shape.empty() || in.shape[0] >= 0 || given.size() != in.shape.size()) continue;
    if (out.batch != 0 && given[0] != out.batch) return std::nullopt;
    out.batch = given[0];
    open.emplace_back(in.name, std::move(given));
  }
  if (open.empty() || out.batch <= 0) return std::nullopt;
  out.other_batch = out.batch + 1;
  ir::Module scratch("other_batch");
  if (!scratch.addGraph(std::string(ir::kInitGraph)).ok()) return std::nullopt;
  absl::StatusOr<ir::Graph*> g = scratch.addGraph(std::string(kInferGraph));
  if (!g.ok()) return std::nullopt;
  Builder b = BuilderInternals::make(scratch, BuildOptions{});
  BuilderInternals::beginGraph(b, *g, /*training=*/false);
  // Every data input is a variable of the scratch module: the open ones one sample larger.
  std::map<std::string, Tensor> other_inputs;
  for (const auto& [name, t] : inputs) {
    if (!t.valid()) continue;
    ir::TensorType type = t.value()->type();
    for (const auto& [open_name, shape] : open)
      if (open_name == name) type.shape[0] = out.other_batch;
    Tensor v = b.variable(absl::StrCat("in_", identifierFor(name)), type, ir::VarRole::kFed,
                          ir::Initializer{ir::Initializer::Kind::kZeros});
    if (!v.valid()) return std::nullopt;
    other_inputs[name] = v;
  }
  VarValues values;
  std::map<size_t, OnnxTensor> known_outputs;
  Importer imp(model, b, &values);
  imp.setInputsOpen(true);
  imp.stopAtFirstRefusal();
  imp.recordShapes(&out.shapes);
  if (!imp.run(other_inputs, known, &known_outputs).ok()) return std::nullopt;
  return out;
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> emitGraph(const OnnxModel& model, Builder& b,
                                              const std::map<std::string, Tensor>& inputs,
                                              VarValues* values,
                                              const std::map<std::string, OnnxTensor>& known,
                                              std::map<size_t, OnnxTensor>* known_outputs) {
  Importer imp(model, b, values);
  for (const ModelInput& in : modelInputs(model)) {
    auto it = inputs.find(in.name);
    if (it != inputs.end() && it->second.valid() && it->second.shape() != in.shape)
      imp.setInputsOpen(true);
  }
  std::optional<OtherBatchShapes> other = importAtOtherBatch(model, inputs, known);
  if (other) imp.setOtherBatch(&*other);
  return imp.run(inputs, known, known_outputs);
}

namespace {

/// Whether ONNX element type `t` is an integer or boolean type (known inputs are those).
bool rawIntegerType(int32_t t) {
  switch (t) {
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT32:
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL:
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::StatusOr<ImportedModel> importModel(const OnnxModel& model, const ImportOptions& options) {
  std::string name = model.path;
  if (size_t slash = name.rfind('/'); slash != std::string::npos) name.erase(0, slash + 1);
  if (size_t dot = name.rfind('.'); dot != std::string::npos && dot > 0) name.erase(dot);
  // A graph without outputs computes nothing anyone can read: a broken or cut model.
  if (model.proto.graph().output_size() == 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "ONNX model '", model.path, "': its graph has no outputs, so it computes nothing"));
  ImportedModel out;
  out.module = std::make_unique<ir::Module>(identifierFor(name));
  ASSIGN_OR_RETURN(ir::Graph * init, out.module->addGraph(std::string(ir::kInitGraph)));
  ASSIGN_OR_RETURN(ir::Graph * infer, out.module->addGraph(std::string(kInferGraph)));
  Builder b = BuilderInternals::make(*out.module, BuildOptions{});
  BuilderInternals::beginGraph(b, infer, /*training=*/false);
  // The model's inputs are fed variables that `tandem run` writes, not graph inputs:
  // replicate splits a graph's inputs along a batch axis they share, and an ONNX graph's
  // inputs need not have one (Gemm's A [M,K] and B [K,N]; a scalar).
  std::map<std::string, Tensor> inputs;
  for (const ModelInput& in : modelInputs(model)) {
    const bool integral = in.elem_type != onnx::TensorProto::FLOAT && in.elem_type != 0 &&
                          rawIntegerType(in.elem_type);
    if (auto k = options.known_inputs.find(in.name); integral && k != options.known_inputs.end()) {
      if (k->second.elem_type != in.elem_type)
        return absl::InvalidArgumentError(
            absl::StrCat("input '", in.name, "' is ", elemTypeName(k->second.elem_type),
                         ", model '", model.path, "' takes ", elemTypeName(in.elem_type)));
      ASSIGN_OR_RETURN(ir::Shape shape, concreteShape(in, &k->second.shape, model.path));
      (void)shape;
      continue;
    }
    // A double input is computed in f32 (docs/ONNX.md), as PyTorch's float models are.
    if (in.elem_type != onnx::TensorProto::FLOAT && in.elem_type != onnx::TensorProto::DOUBLE)
      return absl::UnimplementedError(absl::StrCat(
          "ONNX model '", model.path, "': Tandem does not support its input '", in.name, "': ",
          in.elem_type == 0
              ? "not a tensor (a sequence, map or optional)"
              : absl::StrCat(elemTypeName(in.elem_type), " (Tandem computes in float)")));
    auto given = options.input_shapes.find(in.name);
    ASSIGN_OR_RETURN(
        ir::Shape shape,
        concreteShape(in, given == options.input_shapes.end() ? nullptr : &given->second,
                      model.path, options.open_dimension_remedy));
    if (std::find(shape.begin(), shape.end(), 0) != shape.end())
      return absl::UnimplementedError(absl::StrCat(
          "ONNX model '", model.path, "': Tandem does not support its input '", in.name,
          "': it is empty ([", absl::StrJoin(shape, ","), "]; Tandem has no empty tensors)"));
    Tensor t = b.variable(identifierFor(in.name), ir::TensorType{ir::DType::kF32, shape},
                          ir::VarRole::kFed, ir::Initializer{ir::Initializer::Kind::kZeros});
    if (!t.valid()) return b.status();
    inputs[in.name] = t;
    out.inputs.push_back(in.name);
  }
  ASSIGN_OR_RETURN(std::vector<Tensor> outs, emitGraph(model, b, inputs, &out.values,
                                                       options.known_inputs, &out.known_outputs));
  out.outputs = modelOutputs(model);
  for (const onnx::ValueInfoProto& o : model.proto.graph().output())
    out.output_types.push_back(o.type().tensor_type().elem_type());
  // The outputs keep the model's names (as identifiers), so that a .tir module says which
  // is which and `tandem run` names its output_K.pb files' tensors after them.
  std::vector<ir::Value*> values;
  std::set<ir::Value*> named;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!outs[k].valid()) continue;
    ir::Value* v = outs[k].value();
    const std::string name = identifierFor(out.outputs[k]);
    if (named.contains(v)) {  // one value under two names: the second is a copy of it
      Tensor copy = BuilderInternals::addNode(
          b,
          ir::ReshapeArgs{
              .x = v, .shape = std::vector<int64_t>(v->type().shape.begin(), v->type().shape.end())}
              .spec(),
          name, std::source_location::current());
      if (!copy.valid()) return b.status();
      v = copy.value();
    }
    // A value that holds the name already (a node's, or an earlier output's that the
    // identifiers make equal) keeps it only if it is an output.
    ir::Value* holder = infer->findValue(name);
    if (holder != nullptr && holder != v && !named.contains(holder))
      infer->rename(holder, infer->uniqueName(name));
    infer->rename(v, name);
    named.insert(v);
    values.push_back(v);
  }
  infer->setOutputs(std::move(values));
  RETURN_IF_ERROR(buildInitGraph(*out.module, *init));
  return out;
}

}  // namespace tandem::onnx_import
