#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/attrs.h"
#include "ir/op_info.h"
#include "ir/types.h"

namespace tandem::ir {

class Graph;
class Module;
class Node;
struct GraphPlan;

/// Immutable strings shared by many nodes (scopes, source locations), kept once. Modules
/// cloned from one another share their pool.
class StringPool {
 public:
  /// The pooled copy of `s`; its address stays valid as long as the pool lives.
  const std::string& intern(absl::string_view s);
  /// The pooled empty string, the same for every pool.
  static const std::string& empty();

 private:
  absl::node_hash_set<std::string> strings_;
};

/// An SSA value: one result of one node. Owned by its node.
class Value {
 public:
  const std::string& name() const { return name_; }
  const TensorType& type() const { return type_; }
  void setType(TensorType t) { type_ = std::move(t); }
  /// The node that defines this value, and which of its results it is.
  Node* def() const { return def_; }
  int index() const { return index_; }
  /// Where the value lives; unset before replication and for host inputs.
  const std::optional<Device>& device() const { return device_; }
  void setDevice(std::optional<Device> d) { device_ = d; }

 private:
  friend class Node;
  friend class Graph;
  friend class Module;
  std::string name_;
  TensorType type_;
  Node* def_ = nullptr;
  int index_ = 0;
  std::optional<Device> device_;
};

/// One operation in a graph.
class Node {
 public:
  Op op() const { return op_; }
  const OpInfo& info() const { return opInfo(op_); }
  absl::string_view opName() const { return info().name; }
  Graph* graph() const { return graph_; }
  /// A small number, unique in its graph and below Graph::idBound(), fixed while the node
  /// stays in that graph: passes index side tables with it instead of hashing pointers.
  uint32_t id() const { return id_; }

  const std::vector<Value*>& operands() const { return operands_; }
  Value* operand(size_t i) const { return operands_[i]; }
  size_t numOperands() const { return operands_.size(); }
  void setOperand(size_t i, Value* v) { operands_[i] = v; }

  size_t numResults() const { return results_.size(); }
  Value* result(size_t i = 0) const { return results_[i].get(); }

  /// Attributes, in the order of the op's schema (ir/ops.td).
  const std::vector<AttrValue>& attrs() const { return attrs_; }
  const AttrValue& attr(absl::string_view name) const;
  template <typename T>
  const T& attrAs(absl::string_view name) const {
    return std::get<T>(attr(name));
  }
  int64_t intAttr(absl::string_view name) const { return attrAs<int64_t>(name); }
  double floatAttr(absl::string_view name) const { return attrAs<double>(name); }
  bool boolAttr(absl::string_view name) const { return attrAs<bool>(name); }
  const std::string& enumAttr(absl::string_view name) const { return attrAs<EnumWord>(name).word; }
  const std::string& symbolAttr(absl::string_view name) const { return attrAs<Symbol>(name).name; }
  const std::vector<Device>& devicesAttr() const { return attrAs<std::vector<Device>>("devices"); }
  void setAttr(absl::string_view name, AttrValue v);

  /// The device of a non-collective node (collectives place each result by `devices`).
  const std::optional<Device>& device() const { return device_; }
  void setDevice(std::optional<Device> d);

  /// The model scope the node came from ("stage2.block0"), and the DSL source location
  /// ("resnet.cc:42") when known. Both are for messages and dumps only.
  const std::string& scope() const { return *scope_; }
  void setScope(absl::string_view s);
  const std::string& location() const { return *location_; }
  void setLocation(absl::string_view l);

  /// "%name (conv2d @cpu:0, scope stage1.block0)": how messages refer to this node.
  std::string describe() const;

 private:
  friend class Graph;
  friend class Module;
  /// Index of attribute `name` in attrs_; aborts for a name the op table does not list.
  size_t attrSlot(absl::string_view name) const;
  Op op_ = Op::kInput;
  uint32_t id_ = 0;
  Graph* graph_ = nullptr;
  std::vector<Value*> operands_;
  std::vector<std::unique_ptr<Value>> results_;
  std::vector<AttrValue> attrs_;
  std::optional<Device> device_;
  // Interned in the module's string pool: every replica of a node shares them.
  const std::string* scope_ = &StringPool::empty();
  const std::string* location_ = &StringPool::empty();
};

/// What a node creation needs; results get their types from the op's shape rule unless
/// the op has kDeclaredType (then `declared_types` is used). Passes and the frontend fill
/// it with an op's typed creator: `Conv2dArgs{.x = x, ...}.spec({.names = {"y"}})`.
struct NodeSpec {
  Op op = Op::kInput;
  std::vector<Value*> operands;
  /// Attributes by name (the parser, generic code) ...
  std::vector<std::pair<std::string, AttrValue>> attrs;
  /// ... or every attribute in the schema's order (what the typed creators of
  /// ir/op_views.h fill in); used when `attrs` is empty.
  std::vector<AttrValue> attr_values;
  std::optional<Device> device;
  /// Base names of the results; made unique within the graph.
  std::vector<std::string> names;
  std::vector<TensorType> declared_types;
  std::string scope;
  std::string location;
};

/// A straight-line SSA program: nodes in execution order, then the returned values.
/// Input nodes come first; every operand is defined by an earlier node.
class Graph {
 public:
  Graph(Module* module, std::string name);
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  Module* module() const { return module_; }
  const std::string& name() const { return name_; }

  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  size_t numNodes() const { return nodes_.size(); }
  std::vector<Node*> inputs() const;
  const std::vector<Value*>& outputs() const { return outputs_; }
  void setOutputs(std::vector<Value*> outs) { outputs_ = std::move(outs); }

  /// Creates a node at position `pos` (default: the end), running the shape rule. The
  /// error says which node could not be built and why.
  absl::StatusOr<Node*> create(NodeSpec spec, size_t pos = SIZE_MAX);
  /// Copies `src` (from any graph) with new operands and device; result names get
  /// `suffix` appended. `known_types` are result types the caller already knows (the new
  /// type of a declared-type op, or the source's types when the operands' types are
  /// unchanged); null runs the shape rule.
  absl::StatusOr<Node*> createClone(const Node& src, std::vector<Value*> operands,
                                    std::optional<Device> device, absl::string_view suffix,
                                    const std::vector<TensorType>* known_types = nullptr);
  /// Takes over a node of another graph (about to be discarded) in place: renames its
  /// results with `suffix`, places it, and re-runs its shape rule when `reinfer` (or sets
  /// `declared` as its result types). Appends it at `pos`.
  absl::StatusOr<Node*> adoptRenamed(std::unique_ptr<Node> node, std::optional<Device> device,
                                     absl::string_view suffix, bool reinfer,
                                     const std::vector<TensorType>* declared, size_t pos);
  /// Moves a node built elsewhere (or detached) into this graph at `pos`.
  Node* insert(std::unique_ptr<Node> node, size_t pos = SIZE_MAX);
  /// Removes every node for which `dead` is true, in one linear pass. The caller makes
  /// sure no remaining node uses their results.
  void eraseIf(const std::function<bool(const Node&)>& dead);
  /// Replaces the node list (passes that rebuild a graph in a new order).
  void setNodes(std::vector<std::unique_ptr<Node>> nodes);
  std::vector<std::unique_ptr<Node>> takeNodes();

  /// Makes room for `nodes` more nodes (passes that know how many they will add).
  void reserve(size_t nodes);
  /// A name not yet used in this graph, derived from `base` ("x", "x_1", "x_2", ...).
  std::string uniqueName(absl::string_view base);
  /// Renames a value (keeps names unique; returns the name actually given).
  std::string rename(Value* v, absl::string_view base);
  /// Value lookup by name (parser, tests).
  Value* findValue(absl::string_view name) const;

  /// One more than the largest node id handed out (ids of erased nodes are not reused).
  uint32_t idBound() const { return next_id_; }

  /// A number no other graph of this process has had (a copy gets its own): with the
  /// memory plan, the key of what a backend derives from a graph once for all its devices.
  uint64_t serial() const { return serial_; }

  /// The execution plan the plan passes attached (ir/plan.h), or null when there is none
  /// or the graph's nodes changed since (adding, removing or reordering nodes drops it; any
  /// other change makes it stale, which its fingerprint tells).
  const GraphPlan* plan() const { return plan_.get(); }
  void setPlan(std::shared_ptr<GraphPlan> plan) { plan_ = std::move(plan); }
  /// The plan to extend in place (a plan pass), copied first when a clone of the module
  /// shares it; null when there is none.
  GraphPlan* mutablePlan();

  /// Position of each node in the list, looked up by node id.
  class Positions {
   public:
    size_t at(const Node* n) const { return pos_[n->id()]; }

   private:
    friend class Graph;
    std::vector<size_t> pos_;
  };
  /// Positions of the nodes as they are now (recomputed; O(nodes)).
  Positions positions() const;
  /// For every value, the nodes that use it (recomputed; O(nodes + edges)).
  absl::flat_hash_map<const Value*, std::vector<Node*>> users() const;

 private:
  friend class Module;
  void adopt(Node* n);
  /// Makes v's name unique in this graph (numbering it if taken) and indexes it.
  void bindName(Value* v);
  /// `base` itself when free, else a numbered variant; reuses the string's storage.
  std::string claimName(std::string base);
  /// Shared tail of create and createClone: types, names, placement, insertion.
  absl::StatusOr<Node*> finish(std::unique_ptr<Node> node, std::vector<TensorType> declared,
                               std::vector<std::string> names, size_t pos, bool infer = true);
  Module* module_;
  std::string name_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> outputs_;
  std::shared_ptr<GraphPlan> plan_;
  // Keys view the names owned by the values (a value is renamed only through rename()).
  absl::flat_hash_map<absl::string_view, Value*> names_;
  absl::flat_hash_map<std::string, int> name_counters_;
  uint32_t next_id_ = 0;
  uint64_t serial_;
};

/// What a persistent variable is for.
enum class VarRole : uint8_t {
  kParam,      // trained: autodiff gives it a gradient and an sgd_update
  kBuffer,     // state such as batch-norm running statistics
  kOptimizer,  // optimizer state such as SGD momentum
  kFed,        // written by the runtime before every step (the learning-rate schedule's
               // factor): a step reads it, nothing in a graph writes it
};
absl::string_view varRoleName(VarRole r);
absl::StatusOr<VarRole> parseVarRole(absl::string_view s);

/// A variable of the unsharded module that a packed one holds part of (checkpoints name it).
struct VarPiece {
  std::string var;
  TensorType type;
  bool operator==(const VarPiece&) const = default;
};

/// A persistent tensor owned by the module; after replication every device holds a replica.
struct Var {
  std::string name;
  TensorType type;
  VarRole role = VarRole::kParam;
  Initializer init;
  /// Sharded (shard-weight-update's optimizer state): `type` is flat, and device d's
  /// replica holds only its shard of shards[d] elements, the ones after those of the
  /// devices before it in its shard group. Empty: every device holds the whole variable.
  std::vector<int64_t> shards;
  /// The module's devices cut into this many consecutive groups, each holding the whole
  /// variable in shards (the same shards in every group): 1 shards it over all devices;
  /// more (under --allreduce-groups, sharded within each group and replicated across the
  /// groups, as FSDP's hybrid sharding) costs a group's share of it per device.
  int64_t shard_groups = 1;
  /// The unsharded module's variables this one stands for, so that a checkpoint keeps
  /// their names and shapes: sharded, their elements back to back are `type`; not
  /// sharded (a bucket's update count), each of them has this variable's value.
  std::vector<VarPiece> packs;

  bool sharded() const { return !shards.empty(); }
  /// The type of device d's replica (d < shards.size() when sharded).
  TensorType replicaType(size_t d) const {
    return sharded() ? TensorType{type.dtype, {shards[d]}} : type;
  }
  /// How many devices share one copy of the variable (a shard group's size).
  size_t shardGroupSize() const { return shards.size() / static_cast<size_t>(shard_groups); }
  /// Where device d's shard starts in the flat variable.
  int64_t shardOffset(size_t d) const {
    int64_t at = 0;
    const size_t first = sharded() ? d - d % shardGroupSize() : 0;
    for (size_t i = first; i < d && i < shards.size(); ++i) at += shards[i];
    return at;
  }
};

/// The unit passes transform: variables and the init, train_step and eval_step graphs.
class Module {
 public:
  explicit Module(std::string name) : name_(std::move(name)) {}
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& name() const { return name_; }

  /// Empty until `replicate` runs; then every variable has one replica per device.
  const std::vector<Device>& devices() const { return devices_; }
  void setDevices(std::vector<Device> ds);
  bool isReplicated() const { return !devices_.empty(); }
  /// Position of `d` in devices(), or nullopt when it is not a module device. O(1): passes
  /// and the verifier ask it for every node and every device of a collective.
  std::optional<size_t> deviceIndex(const Device& d) const;

  const std::vector<Var>& vars() const { return vars_; }
  const Var* findVar(absl::string_view name) const;
  /// Adds a variable; fails if the name is taken.
  absl::Status addVar(Var v);
  /// Replaces variable `name`'s initializer (zeros for one whose values are written after
  /// the init graph runs, so that no random draws are made to be thrown away); fails if
  /// there is no such variable.
  absl::Status setInitializer(absl::string_view name, const Initializer& init);
  /// Removes the variables `drop` names (a pass that replaces them; their reads go first).
  void removeVars(const absl::flat_hash_set<std::string>& drop);
  /// Total elements of all variables with the given role.
  int64_t countElements(VarRole role) const;

  const std::vector<std::unique_ptr<Graph>>& graphs() const { return graphs_; }
  Graph* graph(absl::string_view name) const;
  /// Adds an empty graph; fails if the name is taken.
  absl::StatusOr<Graph*> addGraph(std::string name);
  /// Replaces a graph with a rebuilt one of the same name (keeps the order).
  void replaceGraph(std::unique_ptr<Graph> g);

  /// Deep copy (benchmarks run a pipeline many times on one built model). The copy shares
  /// this module's string pool.
  std::unique_ptr<Module> clone() const;

  StringPool& strings() const { return *strings_; }

 private:
  std::string name_;
  std::vector<Device> devices_;
  absl::flat_hash_map<Device, size_t> device_index_;  // devices_[i] -> i (first if repeated)
  std::vector<Var> vars_;
  absl::flat_hash_map<std::string, size_t> var_index_;
  std::vector<std::unique_ptr<Graph>> graphs_;
  std::shared_ptr<StringPool> strings_ = std::make_shared<StringPool>();
};

/// Canonical graph names.
inline constexpr absl::string_view kInitGraph = "init";
inline constexpr absl::string_view kTrainGraph = "train_step";
/// The fed variable the optimizer updates read the learning-rate schedule's factor from
/// (passes/feed_learning_rate.h); the runtime writes it before every step.
inline constexpr absl::string_view kLrScaleVar = "lr_scale";
/// The fed variable (i32[1]) that holds the index of the step's update in the whole run,
/// written by the runtime before every step when a module has it (dropout's masks).
inline constexpr absl::string_view kStepVar = "step";
inline constexpr absl::string_view kEvalGraph = "eval_step";

}  // namespace tandem::ir
