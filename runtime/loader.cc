#include "runtime/loader.h"

#include <algorithm>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "backend/processes.h"
#include "ir/interfaces.h"
#include "ir/op_views.h"
#include "ir/placement.h"
#include "ir/plan.h"
#include "ir/plan_verifier.h"
#include "ir/status_macros.h"
#include "runtime/executor.h"

namespace tandem::runtime {
namespace {

using backend::TensorView;

// The plan is the compiler's; the loader only checks that it is there, fresh, sound and
// aligned for these devices, then follows it.
absl::Status checkPlan(const ir::Module& m, const ir::Graph& g,
                       const std::vector<std::unique_ptr<backend::Device>>& devices) {
  const ir::GraphPlan* plan = g.plan();
  if (plan == nullptr)
    return absl::FailedPreconditionError(absl::StrCat(
        "graph @", g.name(), " of module @", m.name(),
        " has no execution plan: run assign-streams, plan-events and plan-memory as the "
        "pipeline's last passes (the executor plans nothing itself)"));
  RETURN_IF_ERROR(ir::checkPlanFor(g, ir::PlanPart::kEvents, "plan-events"));
  RETURN_IF_ERROR(ir::checkPlanFor(g, ir::PlanPart::kMemory, "plan-memory"));
  RETURN_IF_ERROR(ir::verifyPlan(g));
  for (size_t d = 0; d < devices.size(); ++d) {
    if (devices[d] == nullptr) continue;  // another process's
    ASSIGN_OR_RETURN(const backend::Backend* b, backend::backendFor(devices[d]->id().kind));
    if (plan->alignment % b->alignment() != 0)
      return absl::FailedPreconditionError(
          absl::StrCat("the plan of graph @", g.name(), " aligns to ", plan->alignment,
                       " bytes but ", ir::toString(devices[d]->id()), " needs ", b->alignment(),
                       ": run plan-memory{alignment=", b->alignment(), "}"));
  }
  return absl::OkStatus();
}

class ProgramBuilder {
 public:
  ProgramBuilder(LoadedModule& lm, const ir::Graph& g,
                 std::map<std::vector<size_t>, backend::CommunicatorGroup*>& groups,
                 bool prefetch_inputs)
      : lm_(lm),
        m_(*lm.module),
        g_(g),
        plan_(*g.plan()),
        groups_(groups),
        prefetch_inputs_(prefetch_inputs) {}

  absl::StatusOr<std::unique_ptr<Program>> build() {
    p_ = std::make_unique<Program>();
    p_->graph = &g_;
    for (size_t d = 0; d < lm_.devices.size(); ++d) {
      if (lm_.devices[d] == nullptr) {  // another process's: no memory here
        p_->arenas.emplace_back();
        continue;
      }
      if (!first_local_) first_local_ = d;
      RETURN_IF_ERROR(lm_.devices[d]->prepareGraph(g_));
      absl::StatusOr<backend::DeviceBuffer> arena = lm_.devices[d]->allocate(plan_.arenas[d].bytes);
      if (!arena.ok())  // the device's words, with which arena it was
        return absl::Status(arena.status().code(),
                            absl::StrCat(ir::toString(lm_.devices[d]->id()), ": the arena of @",
                                         g_.name(), ": ", arena.status().message()));
      p_->arenas.push_back(*std::move(arena));
    }
    for (const ir::Node* in : g_.inputs()) {
      const ir::TensorType& t = in->result()->type();
      input_slot_[in->result()] = p_->input_types.size();
      p_->input_types.push_back(t);
      // Host staging for the batch, in the memory the first device copies from fastest.
      for (InputSlot& slot : p_->slots) {
        ASSIGN_OR_RETURN(backend::DeviceBuffer buf,
                         lm_.devices[*first_local_]->allocateHost(t.bytes()));
        slot.staging.push_back(std::move(buf));
      }
    }
    p_->label_checks = labelChecks(g_);
    for (InputSlot& slot : p_->slots) slot.copied.resize(lm_.devices.size());
    for (const auto& node : g_.nodes()) {
      const ir::Node& n = *node;
      if (ir::isSource(n.op())) continue;
      auto ins = std::make_unique<Instr>();
      ins->node = &n;
      ins->comm = plan_.of(n).stream == ir::StreamKind::kComm;
      RETURN_IF_ERROR(n.info().has(ir::kCollective) ? addCollective(n, *ins) : addCompute(n, *ins));
      instr_of_[&n] = ins.get();
      p_->instrs.push_back(std::move(ins));
    }
    RETURN_IF_ERROR(addEvents());
    RETURN_IF_ERROR(addOutputs());
    return std::move(p_);
  }

 private:
  absl::StatusOr<TensorView> viewOf(const ir::Value& v) {
    const ir::Node& def = *v.def();
    if (def.op() == ir::Op::kInput)  // its staging depends on the slot: addSplitSources
      return absl::FailedPreconditionError(
          absl::StrCat("%", v.name(), " is a graph input: only split reads one"));
    std::optional<size_t> d = ir::deviceIndexOfValue(m_, v);
    if (!d) return absl::InternalError(absl::StrCat("%", v.name(), " is on no module device"));
    // Another process's value: its type only (a broadcast's root, read there).
    if (lm_.devices[*d] == nullptr) return TensorView{nullptr, v.type(), {}};
    if (ir::ParamView::is(def)) return lm_.vars.at(ir::ParamView(def).var())[*d].view(v.type());
    return p_->arenas[*d].view(v.type(), plan_.offset(v));
  }

  absl::Status addCompute(const ir::Node& n, Instr& ins) {
    const size_t d = *m_.deviceIndex(*n.device());
    if (lm_.devices[d] == nullptr) return absl::OkStatus();  // another process runs it
    Share share;
    share.device = d;
    for (const ir::Value* v : n.operands()) {
      if (v->def()->op() == ir::Op::kInput)
        return absl::FailedPreconditionError(
            absl::StrCat(n.describe(), " reads the graph input %", v->name(),
                         " directly; inputs reach devices through split (run insert-collectives)"));
      ASSIGN_OR_RETURN(TensorView view, viewOf(*v));
      share.in.push_back(view);
    }
    for (size_t r = 0; r < n.numResults(); ++r) {
      ASSIGN_OR_RETURN(TensorView view, viewOf(*n.result(r)));
      share.out.push_back(view);
    }
    if (ir::AssignView::is(n))  // the variable's storage is assign's one output
      share.out.push_back(lm_.vars.at(ir::AssignView(n).var())[d].view(n.operand(0)->type()));
    // Made here, at load time: a kernel's primitives and descriptors are never made inside
    // a step.
    ASSIGN_OR_RETURN(ins.kernel, lm_.devices[d]->makeKernel(n));
    // Its workspace is bytes of the arena the plan gives it (plan-memory): the kernel
    // allocates none, so the arena, made before any step, is all a recording points into.
    if (const std::optional<ir::WorkspacePlan>& ws = plan_.of(n).workspace) {
      const ir::TensorType bytes{ir::DType::kF32, ir::Shape{ws->bytes / 4}};
      RETURN_IF_ERROR(ins.kernel->bindWorkspace(p_->arenas[d].view(bytes, ws->offset)));
    }
    ins.shares.push_back(std::move(share));
    return absl::OkStatus();
  }

  // concat: one share, on the destination, copies every device's slice in (a peer copy);
  // no communicator is involved.
  absl::Status addConcat(const ir::Node& n, Instr& ins) {
    Share share;
    share.device = *m_.deviceIndex(ir::CollectiveView(n).devices()[0]);
    for (const ir::Value* v : n.operands())
      if (std::optional<size_t> d = ir::deviceIndexOfValue(m_, *v);
          d && m_.devices()[*d].rank != m_.devices()[share.device].rank)
        return absl::UnimplementedError(
            absl::StrCat(n.describe(), " gathers from ", ir::toString(m_.devices()[*d]), " onto ",
                         ir::toString(m_.devices()[share.device]),
                         ": concat across processes is not supported"));
    if (lm_.devices[share.device] == nullptr) return absl::OkStatus();
    for (const ir::Value* v : n.operands()) {
      ASSIGN_OR_RETURN(TensorView in, viewOf(*v));
      share.in.push_back(in);
    }
    ASSIGN_OR_RETURN(TensorView out, viewOf(*n.result(0)));
    share.out.push_back(out);
    ins.shares.push_back(std::move(share));
    return absl::OkStatus();
  }

  // The shares of a collective: per device of its list, the operands it reads and the
  // results it writes (ir/interfaces.h), and what its communicator call needs besides.
  absl::Status addCollective(const ir::Node& n, Instr& ins) {
    const ir::CollectiveView c(n);
    if (c.call() == ir::CollectiveCall::kCopyToPeer) return addConcat(n, ins);
    const auto& devs = c.devices();
    // A copy of the host's batch in: no communicator across processes, and each share's
    // slice starts where the previous one's ends.
    const bool from_host = c.call() == ir::CollectiveCall::kCopyFromHost;
    auto extent = [&](size_t k) {
      return n.result(k)->type().shape[static_cast<size_t>(ir::SplitView(n).axis())];
    };
    int64_t offset = 0;
    for (const std::vector<size_t>& group : c.groups()) {
      // group: positions in the node's device list; the group's communicators by device.
      std::vector<size_t> key;
      for (size_t k : group) key.push_back(*m_.deviceIndex(devs[k]));
      // A group wholly on other processes (a hierarchical reduction's group of another
      // process): nothing here takes part, and no communicator is made for it.
      if (std::none_of(key.begin(), key.end(),
                       [&](size_t d) { return lm_.devices[d] != nullptr; })) {
        if (from_host)
          for (size_t k : group) offset += extent(k);
        continue;
      }
      // A split only copies the host's batch in: it needs no communicator across
      // processes (one of this process's devices alone still gets the local one, as before).
      const bool spans = spansProcesses(key);
      backend::CommunicatorGroup* comms = nullptr;
      if (!spans || !from_host) {
        ASSIGN_OR_RETURN(comms, communicatorsFor(key));
      }
      int local_rank = 0;  // this share's rank in `comms`, which has only local members
      for (size_t rank = 0; rank < group.size(); ++rank) {
        const size_t k = group[rank];
        if (lm_.devices[key[rank]] == nullptr) {  // another process's share
          if (from_host) offset += extent(k);
          continue;
        }
        Share share;
        share.device = key[rank];
        share.group = comms;
        if (comms != nullptr) share.comm = &comms->rank(local_rank++);
        if (spans && !from_host) share.label = collectiveLabel(n);
        const ir::IndexRange reads = c.readsAt(k), writes = c.writesAt(k);
        for (size_t i = reads.begin; i < reads.end; ++i) {
          ASSIGN_OR_RETURN(TensorView in, viewOf(*n.operand(i)));
          share.in.push_back(in);
        }
        for (size_t i = writes.begin; i < writes.end; ++i) {
          ASSIGN_OR_RETURN(TensorView out, viewOf(*n.result(i)));
          share.out.push_back(out);
        }
        if (c.call() == ir::CollectiveCall::kBroadcast) {  // from the group's source (root)
          ASSIGN_OR_RETURN(share.root, rootRank(n, key, *n.operand(reads.begin)));
        }
        if (c.call() == ir::CollectiveCall::kReduceScatter ||
            c.call() == ir::CollectiveCall::kAllGather) {
          // The shards are the group's flat 1-D pieces: reduce_scatter's results, all_gather's
          // operands (one per device, in rank order).
          const bool scatter = c.call() == ir::CollectiveCall::kReduceScatter;
          for (size_t q : group)
            share.shard_sizes.push_back((scatter ? n.result(q) : n.operand(q))->type().shape[0]);
        }
        if (from_host) {
          share.offset = offset;
          RETURN_IF_ERROR(addSplitSources(n, share));
          offset += extent(k);
        }
        ins.shares.push_back(std::move(share));
      }
    }
    return absl::OkStatus();
  }

  // What a split's share reads in each input slot: the slot's staging of the whole batch,
  // or, on a device with a prefetch stream, a buffer of the device's own (outside the
  // arena, so no step value aliases it) that the slot's prefetch copy fills.
  absl::Status addSplitSources(const ir::Node& n, Share& share) {
    const ir::Value& whole = *n.operand(0);
    if (!ir::InputView::is(*whole.def()))
      return absl::FailedPreconditionError(
          absl::StrCat(n.describe(), " splits %", whole.name(),
                       ", which is not a graph input: split copies the host's batch in"));
    const size_t i = input_slot_.at(&whole);
    backend::Device& device = *lm_.devices[share.device];
    backend::Stream* prefetch = prefetch_inputs_ ? device.prefetchStream() : nullptr;
    const TensorView& part = share.out[0];
    for (size_t t = 0; t < p_->slots.size(); ++t) {
      InputSlot& slot = p_->slots[t];
      const TensorView staging = slot.staging[i].view(p_->input_types[i]);
      if (prefetch == nullptr) {
        share.sources[t] = {staging, false};
        continue;
      }
      ASSIGN_OR_RETURN(backend::DeviceBuffer buf, device.allocate(part.bytes()));
      const TensorView slice = buf.view(part.type);
      slot.slices.push_back(std::move(buf));
      slot.copies.push_back({.split = &n,
                             .device = share.device,
                             .whole = staging,
                             .slice = slice,
                             .axis = static_cast<int>(ir::SplitView(n).axis()),
                             .offset = share.offset});
      if (slot.copied[share.device] == nullptr) slot.copied[share.device] = prefetch->createEvent();
      share.sources[t] = {slice, true};
    }
    return absl::OkStatus();
  }

  bool spansProcesses(const std::vector<size_t>& key) const {
    for (size_t d : key)
      if (m_.devices()[d].rank != m_.devices()[key[0]].rank) return true;
    return false;
  }

  // "all_reduce %fc1.w.grad.sum.0 (bucket 2)": a collective in a timeout's message.
  static std::string collectiveLabel(const ir::Node& n) {
    std::string label = absl::StrCat(n.opName(), " %", n.result(0)->name());
    if (n.numResults() > 1) absl::StrAppend(&label, ", ...");
    if (std::optional<int64_t> bucket = ir::CollectiveView(n).bucket())
      absl::StrAppend(&label, " (bucket ", *bucket, ")");
    return label;
  }

  // The rank, within the group of devices `key`, of the device holding `v`.
  absl::StatusOr<int> rootRank(const ir::Node& n, const std::vector<size_t>& key,
                               const ir::Value& v) {
    std::optional<size_t> d = ir::deviceIndexOfValue(m_, v);
    auto it = d ? std::find(key.begin(), key.end(), *d) : key.end();
    if (it == key.end())
      return absl::FailedPreconditionError(
          absl::StrCat(n.describe(), ": %", v.name(), " is not on a device of its group"));
    return static_cast<int>(it - key.begin());
  }

  absl::StatusOr<backend::CommunicatorGroup*> communicatorsFor(const std::vector<size_t>& key) {
    if (auto it = groups_.find(key); it != groups_.end()) return it->second;
    if (spansProcesses(key)) return processCommunicatorsFor(key);
    std::vector<backend::Device*> members;
    for (size_t d : key) {
      if (lm_.devices[d]->id().kind != lm_.devices[key[0]]->id().kind)
        return absl::UnimplementedError(
            absl::StrCat("a collective joins ", ir::toString(lm_.devices[key[0]]->id()), " and ",
                         ir::toString(lm_.devices[d]->id()),
                         ": collectives across device kinds are not supported"));
      members.push_back(lm_.devices[d].get());
    }
    ASSIGN_OR_RETURN(const backend::Backend* b, backend::backendFor(members[0]->id().kind));
    ASSIGN_OR_RETURN(std::unique_ptr<backend::CommunicatorGroup> group,
                     b->createCommunicators(members));
    backend::CommunicatorGroup* raw = group.get();
    lm_.groups.push_back(std::move(group));
    groups_[key] = raw;
    return raw;
  }

  // A group across processes: this process's members talk to the others through the
  // backend's communicators across processes, over an MPI communicator of the processes
  // involved, made here by each of them in the same order (every process loads the same
  // module).
  absl::StatusOr<backend::CommunicatorGroup*> processCommunicatorsFor(
      const std::vector<size_t>& key) {
    std::vector<ir::Device> members;
    std::vector<backend::Device*> local;
    std::vector<int> ranks;
    for (size_t d : key) {
      const ir::Device& id = m_.devices()[d];
      if (id.kind != m_.devices()[key[0]].kind)
        return absl::UnimplementedError(absl::StrCat(
            "a collective joins ", ir::toString(m_.devices()[key[0]]), " and ", ir::toString(id),
            ": collectives across device kinds are not supported"));
      members.push_back(id);
      ranks.push_back(id.rank);
      if (lm_.devices[d] != nullptr) local.push_back(lm_.devices[d].get());
    }
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    // Every collective across processes runs on one thread per process, its first
    // device's comm-stream worker, so that MPI's blocking calls come in the same order on
    // every process (processes.h). The pipeline's groups always lead with it.
    if (local.front()->id() != lm_.devices[*first_local_]->id())
      return absl::UnimplementedError(absl::StrCat(
          "a collective across processes has ", ir::toString(local.front()->id()),
          " as its first device of rank ", local.front()->id().rank, ", not ",
          ir::toString(lm_.devices[*first_local_]->id()),
          ": the rank's collectives across processes must all run on its first device"));
    ASSIGN_OR_RETURN(std::shared_ptr<backend::ProcessComm> procs,
                     backend::Processes::current().communicator(ranks));
    ASSIGN_OR_RETURN(const backend::Backend* b, backend::backendFor(members[0].kind));
    ASSIGN_OR_RETURN(std::unique_ptr<backend::CommunicatorGroup> group,
                     b->createProcessCommunicators(local, members, std::move(procs)));
    backend::CommunicatorGroup* raw = group.get();
    lm_.groups.push_back(std::move(group));
    groups_[key] = raw;
    return raw;
  }

  backend::Stream& streamOf(size_t device, ir::StreamKind kind) {
    return kind == ir::StreamKind::kComm ? lm_.devices[device]->commStream()
                                         : lm_.devices[device]->computeStream();
  }

  // The plan's waits: the producer's share records an event, the consumer's share waits
  // for it.
  absl::Status addEvents() {
    auto shareOf = [&](const ir::Node* n, size_t device) -> Share* {
      for (Share& s : instr_of_.at(n)->shares)
        if (s.device == device) return &s;
      return nullptr;
    };
    for (const ir::StreamWait& w : ir::streamWaits(m_, g_)) {
      // Across processes the collectives themselves order the work.
      if (lm_.devices[w.from.device] == nullptr || lm_.devices[w.at.device] == nullptr) continue;
      Share* producer = shareOf(w.producer, w.from.device);
      Share* consumer = shareOf(w.consumer, w.at.device);
      if (producer == nullptr || consumer == nullptr)
        return absl::InternalError(absl::StrCat("stream wait between ", w.producer->describe(),
                                                " and ", w.consumer->describe(),
                                                " names a device that runs no share"));
      if (!producer->done) producer->done = streamOf(w.from.device, w.from.stream).createEvent();
      consumer->waits.push_back(producer->done.get());
    }
    return absl::OkStatus();
  }

  // Each output is copied to host memory on the stream that writes it, after the step.
  absl::Status addOutputs() {
    for (const ir::Value* v : g_.outputs()) {
      std::optional<size_t> d = ir::deviceIndexOfValue(m_, *v);
      if (!d || v->def()->op() == ir::Op::kInput)
        return absl::FailedPreconditionError(
            absl::StrCat("graph @", g_.name(), " returns %", v->name(), ", which is on no device"));
      if (lm_.devices[*d] == nullptr) {
        ASSIGN_OR_RETURN(v, localCopyOf(*v));
      }
      d = ir::deviceIndexOfValue(m_, *v);
      OutputCopy copy;
      copy.device = *d;
      copy.comm = plan_.of(*v->def()).stream == ir::StreamKind::kComm;
      ASSIGN_OR_RETURN(copy.src, viewOf(*v));
      ASSIGN_OR_RETURN(copy.host, lm_.devices[*d]->allocateHost(v->type().bytes()));
      p_->outputs.push_back(std::move(copy));
    }
    return absl::OkStatus();
  }

  // An output on another process's device: an all_reduce (or all_gather) gives every
  // device of a group the same bits, so this process returns its own first device's
  // result of it in the value's group.
  absl::StatusOr<const ir::Value*> localCopyOf(const ir::Value& v) {
    const ir::Node& n = *v.def();
    const std::optional<ir::CollectiveKind> kind = ir::collectiveKind(n);
    if (kind == ir::CollectiveKind::kReduce || kind == ir::CollectiveKind::kAllGather) {
      const ir::CollectiveView c(n);
      const size_t at = c.positionOfResult(static_cast<size_t>(v.index()));
      const size_t j = static_cast<size_t>(v.index()) - c.writesAt(at).begin;
      const std::vector<std::vector<size_t>> groups = c.groups();
      for (size_t k : groups[c.groupOf(at)])
        if (lm_.devices[*m_.deviceIndex(c.devices()[k])] != nullptr)
          return n.result(c.writesAt(k).begin + j);
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "graph @", g_.name(), " returns %", v.name(), ", which is on ",
        ir::toString(m_.devices()[*ir::deviceIndexOfValue(m_, v)]),
        " of another process (only an all_reduce's or all_gather's results are on every "
        "process of their group)"));
  }

  LoadedModule& lm_;
  const ir::Module& m_;
  const ir::Graph& g_;
  const ir::GraphPlan& plan_;
  std::map<std::vector<size_t>, backend::CommunicatorGroup*>& groups_;
  std::unique_ptr<Program> p_;
  absl::flat_hash_map<const ir::Value*, size_t> input_slot_;
  absl::flat_hash_map<const ir::Node*, Instr*> instr_of_;
  std::optional<size_t> first_local_;  // this process's first device
  bool prefetch_inputs_;               // ExecutorOptions::prefetch_inputs
};

}  // namespace

LoadedModule::~LoadedModule() {
  // In dependency order. First every stream finishes its work (a CPU worker's pending
  // kernels point at arenas and variables); then what was made on the devices goes:
  // recorded steps (a CUDA graph's teardown uses its streams), kernels and events, the
  // communicators, the memory; the devices (streams, library handles) last.
  for (auto& d : devices) {
    if (d == nullptr) continue;  // another process's
    for (backend::Stream* s : {&d->computeStream(), &d->commStream(), d->prefetchStream()})
      if (s != nullptr) (void)s->synchronize();  // an error has been reported, or cannot be now
  }
  programs.clear();
  groups.clear();
  vars.clear();
  devices.clear();
}

absl::StatusOr<std::unique_ptr<LoadedModule>> loadModule(std::unique_ptr<ir::Module> module,
                                                         const ExecutorOptions& options) {
  if (!module->isReplicated())
    return absl::FailedPreconditionError(absl::StrCat(
        "module @", module->name(),
        " has no devices: run the pipeline (replicate, insert-collectives, ...) before executing"));
  RETURN_IF_ERROR(backend::checkSettings(options.backend_options));
  auto lm = std::make_unique<LoadedModule>();
  lm->module = std::move(module);
  const ir::Module& m = *lm->module;
  const backend::Processes& procs = backend::Processes::current();
  bool any_local = false;
  for (size_t d = 0; d < m.devices().size(); ++d) {
    const ir::Device& id = m.devices()[d];
    if (id.rank >= procs.size())
      return absl::FailedPreconditionError(absl::StrCat(
          ir::toString(id), " belongs to rank ", id.rank, ", but this run has ", procs.size(),
          procs.size() == 1 ? " process (start one per rank with mpirun -np "
                            : " processes (start one per rank with mpirun -np ",
          id.rank + 1, " or more)"));
    if (id.rank != procs.rank()) {  // another process's device
      lm->devices.push_back(nullptr);
      continue;
    }
    any_local = true;
    absl::StatusOr<const backend::Backend*> b = backend::backendFor(id.kind);
    if (!b.ok())
      return absl::Status(b.status().code(),
                          absl::StrCat(ir::toString(id), ": ", b.status().message()));
    ASSIGN_OR_RETURN(std::unique_ptr<backend::Device> device,
                     (*b)->createDevice(id, {.index = static_cast<int>(d),
                                             .seed = options.seed,
                                             .settings = &options.backend_options}));
    lm->devices.push_back(std::move(device));
  }
  if (!any_local)
    return absl::FailedPreconditionError(absl::StrCat("module @", m.name(), " has no device of rank ",
                                                      procs.rank(), " (its devices are ",
                                                      ir::toString(m.devices()), ")"));
  for (const auto& g : m.graphs()) RETURN_IF_ERROR(checkPlan(m, *g, lm->devices));
  for (const ir::Var& v : m.vars()) {
    auto& replicas = lm->vars[v.name];
    for (auto& device : lm->devices) {
      if (device == nullptr) {
        replicas.emplace_back();
        continue;
      }
      // A sharded variable's replica is the device's shard.
      absl::StatusOr<backend::DeviceBuffer> buf =
          device->allocate(v.replicaType(replicas.size()).bytes());
      if (!buf.ok())
        return absl::Status(buf.status().code(),
                            absl::StrCat(ir::toString(device->id()), ": variable @", v.name, ": ",
                                         buf.status().message()));
      replicas.push_back(*std::move(buf));
    }
  }
  std::map<std::vector<size_t>, backend::CommunicatorGroup*> groups;
  for (const auto& g : m.graphs()) {
    ASSIGN_OR_RETURN(std::unique_ptr<Program> p,
                     ProgramBuilder(*lm, *g, groups, options.prefetch_inputs).build());
    lm->programs[g->name()] = std::move(p);
  }
  return lm;
}

}  // namespace tandem::runtime
