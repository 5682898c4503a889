#include "ir/ir.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ir/interfaces.h"
#include "ir/plan.h"

namespace tandem::ir {

Graph::Graph(Module* module, std::string name)
    : module_(module), name_(std::move(name)), serial_([] {
        static std::atomic<uint64_t> next{1};
        return next.fetch_add(1, std::memory_order_relaxed);
      }()) {}

// ---- StringPool -------------------------------------------------------------------------

const std::string& StringPool::intern(absl::string_view s) {
  if (s.empty()) return empty();
  return *strings_.emplace(s).first;
}

const std::string& StringPool::empty() {
  static const std::string* kEmpty = new std::string();
  return *kEmpty;
}

// ---- Node -------------------------------------------------------------------------------

void Node::setScope(absl::string_view s) { scope_ = &graph_->module()->strings().intern(s); }
void Node::setLocation(absl::string_view l) { location_ = &graph_->module()->strings().intern(l); }

size_t Node::attrSlot(absl::string_view name) const {
  int i = info().attrIndex(name);
  if (i < 0 || static_cast<size_t>(i) >= attrs_.size()) {
    // Asking for an attribute the op table does not list is a bug in the caller.
    std::fprintf(stderr, "internal error: %s has no attribute '%.*s'\n",
                 std::string(opName()).c_str(), int(name.size()), name.data());
    std::abort();
  }
  return static_cast<size_t>(i);
}

const AttrValue& Node::attr(absl::string_view name) const { return attrs_[attrSlot(name)]; }

void Node::setAttr(absl::string_view name, AttrValue v) { attrs_[attrSlot(name)] = std::move(v); }

void Node::setDevice(std::optional<Device> d) {
  device_ = d;
  if (!info().has(kCollective))
    for (auto& r : results_) r->setDevice(d);
}

std::string Node::describe() const {
  std::string head;
  if (!results_.empty()) {
    head = absl::StrCat("%", results_[0]->name(), " (", opName());
  } else if (!operands_.empty()) {
    head = absl::StrCat(opName(), "(%", operands_[0]->name(), ") (", opName());
  } else {
    head = absl::StrCat(opName(), " (", opName());
  }
  if (device_) absl::StrAppend(&head, " @", toString(*device_));
  if (!scope().empty()) absl::StrAppend(&head, ", scope ", scope());
  if (!location().empty()) absl::StrAppend(&head, ", at ", location());
  return head + ")";
}

// ---- Graph ------------------------------------------------------------------------------

std::vector<Node*> Graph::inputs() const {
  std::vector<Node*> out;
  for (const auto& n : nodes_)
    if (n->op() == Op::kInput) out.push_back(n.get());
  return out;
}

void Graph::reserve(size_t nodes) {
  nodes_.reserve(nodes_.size() + nodes);
  names_.reserve(names_.size() + nodes + nodes / 4);  // most nodes have one result
}

std::string Graph::uniqueName(absl::string_view base) { return claimName(std::string(base)); }

std::string Graph::claimName(std::string name) {
  if (name.empty()) name.push_back('v');
  if (!names_.contains(name)) return name;
  int& counter = name_counters_[name];
  std::string candidate;
  do {
    candidate = absl::StrCat(name, "_", ++counter);
  } while (names_.contains(candidate));
  return candidate;
}

void Graph::bindName(Value* v) {
  // One hash lookup in the common case of a free name.
  if (names_.try_emplace(v->name_, v).second) return;
  v->name_ = claimName(std::move(v->name_));
  names_[v->name_] = v;
}

std::string Graph::rename(Value* v, absl::string_view base) {
  names_.erase(v->name_);
  v->name_ = uniqueName(base);
  names_[v->name_] = v;
  return v->name_;
}

Value* Graph::findValue(absl::string_view name) const {
  auto it = names_.find(name);
  return it == names_.end() ? nullptr : it->second;
}

namespace {

void placeResults(Node& n, const std::vector<std::unique_ptr<Value>>& results) {
  std::optional<CollectiveView> c = CollectiveView::of(n);
  if (!c) {
    for (const auto& r : results) r->setDevice(n.device());
    return;
  }
  // Before the shape rule has checked it, a collective may list no devices or fewer
  // results than devices: those results stay unplaced and the rule reports why.
  if (c->devices().empty() ||
      (c->info().writes == CollectiveWrites::kPerDevice && results.size() < c->devices().size()))
    return;
  for (size_t i = 0; i < results.size(); ++i)
    results[i]->setDevice(c->devices()[c->positionOfResult(i)]);
}

absl::Status setAttrs(Node& n, std::vector<AttrValue>& slots,
                      std::vector<std::pair<std::string, AttrValue>>& given,
                      std::vector<AttrValue>& in_order) {
  const OpInfo& info = n.info();
  if (given.empty() && !in_order.empty()) {  // a typed creator: every attribute, in order
    if (in_order.size() != info.attrs.size())
      return absl::InvalidArgumentError(absl::StrCat(info.name, " takes ", info.attrs.size(),
                                                     " attributes, got ", in_order.size()));
    for (size_t i = 0; i < in_order.size(); ++i)
      if (!info.attrs[i].accepts(in_order[i]))
        return absl::InvalidArgumentError(
            absl::StrCat("attribute '", info.attrs[i].name, "' of ", info.name, " must be ",
                         info.attrs[i].kindText(), ", got ", toString(in_order[i])));
    slots = std::move(in_order);
    for (size_t i = 0; i < slots.size(); ++i)
      if (info.attrs[i].kind == AttrKind::kHw) slots[i] = canonicalHw(std::move(slots[i]));
    return absl::OkStatus();
  }
  std::vector<bool> seen(info.attrs.size(), false);
  slots.assign(info.attrs.size(), AttrValue{});
  for (auto& [name, value] : given) {
    int i = info.attrIndex(name);
    if (i < 0)
      return absl::InvalidArgumentError(absl::StrCat(info.name, " has no attribute '", name, "'"));
    if (!info.attrs[i].accepts(value))
      return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' of ", info.name,
                                                     " must be ", info.attrs[i].kindText(),
                                                     ", got ", toString(value)));
    if (seen[i])
      return absl::InvalidArgumentError(
          absl::StrCat("attribute '", name, "' of ", info.name, " is given twice"));
    seen[i] = true;
    slots[i] =
        info.attrs[i].kind == AttrKind::kHw ? canonicalHw(std::move(value)) : std::move(value);
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (seen[i]) continue;
    if (info.attrs[i].default_value) {
      slots[i] = *info.attrs[i].default_value;
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat(info.name, " needs attribute '",
                                                     info.attrs[i].name, "' (",
                                                     info.attrs[i].kindText(), ")"));
  }
  return absl::OkStatus();
}

/// Prefixes a node-construction error with the node ("%conv1 (conv2d) in scope conv1").
absl::Status whereIs(const Node& n, const std::vector<std::string>& names, const absl::Status& s) {
  std::string who =
      names.empty() ? std::string(n.opName()) : absl::StrCat("%", names[0], " (", n.opName(), ")");
  if (!n.scope().empty()) absl::StrAppend(&who, " in scope ", n.scope());
  if (!n.location().empty()) absl::StrAppend(&who, " at ", n.location());
  return absl::Status(s.code(), absl::StrCat(who, ": ", s.message()));
}

}  // namespace

absl::StatusOr<Node*> Graph::create(NodeSpec spec, size_t pos) {
  auto node = std::make_unique<Node>();
  node->op_ = spec.op;
  node->graph_ = this;
  node->operands_ = std::move(spec.operands);
  node->device_ = spec.device;
  node->setScope(spec.scope);
  node->setLocation(spec.location);
  if (absl::Status s = setAttrs(*node, node->attrs_, spec.attrs, spec.attr_values); !s.ok())
    return whereIs(*node, spec.names, s);
  return finish(std::move(node), std::move(spec.declared_types), std::move(spec.names), pos);
}

absl::StatusOr<Node*> Graph::createClone(const Node& src, std::vector<Value*> operands,
                                         std::optional<Device> device, absl::string_view suffix,
                                         const std::vector<TensorType>* known_types) {
  auto node = std::make_unique<Node>();
  node->op_ = src.op_;
  node->graph_ = this;
  node->operands_ = std::move(operands);
  node->attrs_ = src.attrs_;
  node->device_ = device;
  if (&src.graph_->module()->strings() == &module_->strings()) {
    node->scope_ = src.scope_;
    node->location_ = src.location_;
  } else {
    node->setScope(src.scope());
    node->setLocation(src.location());
  }
  if (known_types != nullptr && known_types->size() == src.results_.size()) {
    // Fast path (most replicas): nothing to infer, names built in place.
    node->results_.reserve(src.results_.size());
    for (size_t i = 0; i < src.results_.size(); ++i) {
      auto v = std::make_unique<Value>();
      v->type_ = (*known_types)[i];
      v->def_ = node.get();
      v->index_ = static_cast<int>(i);
      const std::string& base = src.results_[i]->name_;
      v->name_.reserve(base.size() + suffix.size());
      v->name_.append(base).append(suffix.data(), suffix.size());
      bindName(v.get());
      node->results_.push_back(std::move(v));
    }
    placeResults(*node, node->results_);
    return insert(std::move(node), SIZE_MAX);
  }
  std::vector<std::string> names;
  names.reserve(src.results_.size());
  for (const auto& r : src.results_) names.push_back(absl::StrCat(r->name_, suffix));
  std::vector<TensorType> types;
  if (known_types != nullptr) {
    types = *known_types;
  } else if (src.info().has(kDeclaredType)) {
    for (const auto& r : src.results_) types.push_back(r->type_);
  }
  return finish(std::move(node), std::move(types), std::move(names), SIZE_MAX,
                /*infer=*/known_types == nullptr);
}

absl::StatusOr<Node*> Graph::adoptRenamed(std::unique_ptr<Node> node, std::optional<Device> device,
                                          absl::string_view suffix, bool reinfer,
                                          const std::vector<TensorType>* declared, size_t pos) {
  bool same_pool = &node->graph_->module()->strings() == &module_->strings();
  node->graph_ = this;
  if (!same_pool) {
    node->setScope(std::string(node->scope()));
    node->setLocation(std::string(node->location()));
  }
  node->setDevice(device);
  if (declared != nullptr) {
    for (size_t i = 0; i < node->results_.size() && i < declared->size(); ++i)
      node->results_[i]->type_ = (*declared)[i];
  } else if (reinfer) {
    auto inferred = inferTypes(*node);
    if (!inferred.ok() || inferred->size() != node->results_.size()) {
      std::vector<std::string> names;
      if (!node->results_.empty()) names.push_back(node->results_[0]->name_);
      return whereIs(
          *node, names,
          inferred.ok() ? absl::InternalError("result count changed") : inferred.status());
    }
    for (size_t i = 0; i < inferred->size(); ++i)
      node->results_[i]->type_ = std::move((*inferred)[i]);
  }
  for (auto& r : node->results_) {
    r->name_.append(suffix.data(), suffix.size());
    bindName(r.get());
  }
  return insert(std::move(node), pos);
}

absl::StatusOr<Node*> Graph::finish(std::unique_ptr<Node> node, std::vector<TensorType> declared,
                                    std::vector<std::string> names, size_t pos, bool infer) {
  const OpInfo& info = node->info();
  size_t n_ops = node->operands_.size();
  if (n_ops < info.minOperands() || n_ops > info.maxOperands())
    return whereIs(
        *node, names,
        absl::InvalidArgumentError(absl::StrCat("takes ", info.minOperands(),
                                                info.maxOperands() == SIZE_MAX ? " or more"
                                                : info.maxOperands() != info.minOperands()
                                                    ? absl::StrCat(" to ", info.maxOperands())
                                                    : std::string(),
                                                " operands, got ", n_ops)));
  for (size_t i = 0; i < n_ops; ++i)
    if (node->operands_[i] == nullptr)
      return whereIs(*node, names,
                     absl::InvalidArgumentError(absl::StrCat("operand ", i, " is missing")));
  if (info.has(kDeclaredType) || !infer) {
    node->results_.reserve(declared.size());
    for (auto& t : declared) {
      auto v = std::make_unique<Value>();
      v->type_ = std::move(t);
      node->results_.push_back(std::move(v));
    }
  }
  if (!infer) {  // the caller vouches for the types (see createClone)
  } else if (auto inferred = inferTypes(*node); !inferred.ok()) {
    return whereIs(*node, names, inferred.status());
  } else if (!info.has(kDeclaredType)) {
    node->results_.reserve(inferred->size());
    for (auto& t : *inferred) {
      auto v = std::make_unique<Value>();
      v->type_ = std::move(t);
      node->results_.push_back(std::move(v));
    }
  }
  for (size_t i = 0; i < node->results_.size(); ++i) {
    Value* v = node->results_[i].get();
    v->def_ = node.get();
    v->index_ = static_cast<int>(i);
    std::string base = i < names.size() ? std::move(names[i])
                       : !names.empty() ? absl::StrCat(node->results_[0]->name_, ".", i)
                                        : std::string(info.name);
    v->name_ = std::move(base);
    bindName(v);
  }
  placeResults(*node, node->results_);
  return insert(std::move(node), pos);
}

void Graph::adopt(Node* n) {
  n->graph_ = this;
  for (auto& r : n->results_) {
    auto it = names_.find(r->name_);
    if (it == names_.end() || it->second != r.get()) bindName(r.get());
  }
}

GraphPlan* Graph::mutablePlan() {
  if (plan_ != nullptr && plan_.use_count() > 1) plan_ = std::make_shared<GraphPlan>(*plan_);
  return plan_.get();
}

Node* Graph::insert(std::unique_ptr<Node> node, size_t pos) {
  plan_.reset();
  Node* raw = node.get();
  if (raw->graph_ != this) adopt(raw);
  raw->id_ = next_id_++;
  if (pos >= nodes_.size()) {
    nodes_.push_back(std::move(node));
  } else {
    nodes_.insert(nodes_.begin() + static_cast<ptrdiff_t>(pos), std::move(node));
  }
  return raw;
}

void Graph::eraseIf(const std::function<bool(const Node&)>& dead) {
  plan_.reset();
  std::vector<std::unique_ptr<Node>> kept;
  kept.reserve(nodes_.size());
  for (auto& n : nodes_) {
    if (dead(*n)) {
      for (auto& r : n->results_) names_.erase(r->name_);
    } else {
      kept.push_back(std::move(n));
    }
  }
  nodes_ = std::move(kept);
}

void Graph::setNodes(std::vector<std::unique_ptr<Node>> nodes) {
  plan_.reset();
  nodes_ = std::move(nodes);
  for (auto& n : nodes_)
    if (n->graph_ != this) {  // a node from elsewhere gets an id of this graph
      n->graph_ = this;
      n->id_ = next_id_++;
    }
}

std::vector<std::unique_ptr<Node>> Graph::takeNodes() {
  plan_.reset();
  return std::move(nodes_);
}

Graph::Positions Graph::positions() const {
  Positions p;
  p.pos_.assign(next_id_, SIZE_MAX);
  for (size_t i = 0; i < nodes_.size(); ++i) p.pos_[nodes_[i]->id_] = i;
  return p;
}

absl::flat_hash_map<const Value*, std::vector<Node*>> Graph::users() const {
  absl::flat_hash_map<const Value*, std::vector<Node*>> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_)
    for (Value* v : n->operands_) out[v].push_back(n.get());
  return out;
}

// ---- Module -----------------------------------------------------------------------------

absl::string_view varRoleName(VarRole r) {
  switch (r) {
    case VarRole::kParam:
      return "param";
    case VarRole::kBuffer:
      return "buffer";
    case VarRole::kOptimizer:
      return "optimizer";
    case VarRole::kFed:
      return "fed";
  }
  return "?";
}

absl::StatusOr<VarRole> parseVarRole(absl::string_view s) {
  for (VarRole r : {VarRole::kParam, VarRole::kBuffer, VarRole::kOptimizer, VarRole::kFed})
    if (varRoleName(r) == s) return r;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown variable role '", s, "' (expected param, buffer, optimizer or fed)"));
}

void Module::setDevices(std::vector<Device> ds) {
  devices_ = std::move(ds);
  device_index_.clear();
  device_index_.reserve(devices_.size());
  for (size_t i = 0; i < devices_.size(); ++i) device_index_.try_emplace(devices_[i], i);
}

std::optional<size_t> Module::deviceIndex(const Device& d) const {
  auto it = device_index_.find(d);
  if (it == device_index_.end()) return std::nullopt;
  return it->second;
}

const Var* Module::findVar(absl::string_view name) const {
  auto it = var_index_.find(name);
  return it == var_index_.end() ? nullptr : &vars_[it->second];
}

absl::Status Module::addVar(Var v) {
  if (var_index_.contains(v.name))
    return absl::AlreadyExistsError(absl::StrCat("variable @", v.name, " is declared twice"));
  var_index_[v.name] = vars_.size();
  vars_.push_back(std::move(v));
  return absl::OkStatus();
}

absl::Status Module::setInitializer(absl::string_view name, const Initializer& init) {
  auto it = var_index_.find(name);
  if (it == var_index_.end())
    return absl::NotFoundError(absl::StrCat("no variable @", name, " to initialize"));
  vars_[it->second].init = init;
  return absl::OkStatus();
}

void Module::removeVars(const absl::flat_hash_set<std::string>& drop) {
  std::vector<Var> kept;
  kept.reserve(vars_.size());
  for (Var& v : vars_)
    if (!drop.contains(v.name)) kept.push_back(std::move(v));
  vars_ = std::move(kept);
  var_index_.clear();
  for (size_t i = 0; i < vars_.size(); ++i) var_index_[vars_[i].name] = i;
}

int64_t Module::countElements(VarRole role) const {
  int64_t n = 0;
  for (const Var& v : vars_)
    if (v.role == role) n += v.type.numElements();
  return n;
}

Graph* Module::graph(absl::string_view name) const {
  for (const auto& g : graphs_)
    if (g->name() == name) return g.get();
  return nullptr;
}

absl::StatusOr<Graph*> Module::addGraph(std::string name) {
  if (graph(name) != nullptr)
    return absl::AlreadyExistsError(absl::StrCat("graph @", name, " is defined twice"));
  graphs_.push_back(std::make_unique<Graph>(this, std::move(name)));
  return graphs_.back().get();
}

void Module::replaceGraph(std::unique_ptr<Graph> g) {
  for (auto& slot : graphs_)
    if (slot->name() == g->name()) {
      slot = std::move(g);
      return;
    }
  graphs_.push_back(std::move(g));
}

std::unique_ptr<Module> Module::clone() const {
  auto m = std::make_unique<Module>(name_);
  m->devices_ = devices_;
  m->device_index_ = device_index_;
  m->vars_ = vars_;
  m->var_index_ = var_index_;
  m->strings_ = strings_;
  for (const auto& g : graphs_) {
    auto copy = std::make_unique<Graph>(m.get(), g->name());
    absl::flat_hash_map<const Value*, Value*> map;
    map.reserve(g->numNodes() * 2);
    for (const auto& n : g->nodes()) {
      auto c = std::make_unique<Node>();
      c->op_ = n->op_;
      c->graph_ = copy.get();
      c->attrs_ = n->attrs_;
      c->device_ = n->device_;
      c->scope_ = n->scope_;
      c->location_ = n->location_;
      c->id_ = n->id_;
      c->operands_.reserve(n->operands_.size());
      for (Value* v : n->operands_) c->operands_.push_back(map.at(v));
      for (const auto& r : n->results_) {
        auto v = std::make_unique<Value>(*r);
        v->def_ = c.get();
        map[r.get()] = v.get();
        copy->names_[v->name_] = v.get();
        c->results_.push_back(std::move(v));
      }
      copy->nodes_.push_back(std::move(c));
    }
    for (Value* v : g->outputs()) copy->outputs_.push_back(map.at(v));
    copy->name_counters_ = g->name_counters_;
    copy->next_id_ = g->next_id_;
    copy->plan_ = g->plan_;  // node ids are kept, so the plan still fits
    m->graphs_.push_back(std::move(copy));
  }
  return m;
}

}  // namespace tandem::ir
