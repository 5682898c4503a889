#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>

#include "absl/strings/str_cat.h"
#include "backend/cpu/kernels.h"
#include "passes/plan_memory.h"
#include "passes/streams.h"
#include "runtime/cpu_stream.h"
#include "runtime/local_communicator.h"

namespace tandem::runtime {

using backend::TensorView;
using passes::StreamKind;

// Named, not anonymous: Executor::Impl (external linkage) holds these types.
namespace executor_detail {

// One device's share of a node: its operand and result views, the events of other
// streams it must wait for, and the event it records when another stream waits for it.
struct Part {
  size_t device = 0;
  std::vector<TensorView> in, out;
  std::vector<Event*> waits;
  std::unique_ptr<Event> done;
  int64_t offset = 0;  // split: where this device's slice starts
  int root = 0;        // broadcast: the source's rank; concat: the destination's
};

// A node as the executor runs it: one part for compute work, one per device for a
// collective.
struct Instr {
  const ir::Node* node = nullptr;
  bool comm = false;
  std::vector<Part> parts;
  std::unique_ptr<backend::Kernel> kernel;
};

struct Program {
  const ir::Graph* graph = nullptr;
  std::vector<AlignedBuffer> arenas;  // by device
  std::vector<HostTensor> staging;    // graph inputs, in order
  std::vector<std::unique_ptr<Instr>> instrs;
  std::vector<TensorView> outputs;
};

struct DeviceState {
  ir::Device device;
  std::unique_ptr<backend::cpu::CpuContext> ctx;
  std::unique_ptr<Stream> compute, comm;
};

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

ReduceOp reduceOpOf(const ir::Node& n) {
  const std::string& op = n.enumAttr("op");
  return op == "max" ? ReduceOp::kMax : op == "mean" ? ReduceOp::kMean : ReduceOp::kSum;
}

}  // namespace executor_detail

using namespace executor_detail;

struct Executor::Impl {
  ExecutorOptions options;
  std::vector<DeviceState> devices;
  std::unique_ptr<Communicator> communicator;
  absl::flat_hash_map<std::string, std::vector<AlignedBuffer>> vars;  // name -> by device
  absl::flat_hash_map<std::string, std::unique_ptr<Program>> programs;
  std::function<void(const ir::Node&, size_t)> hook;
  std::mutex trace_mu;
  std::vector<TraceEntry> trace;
  std::mutex error_mu;
  absl::Status error;

  absl::StatusOr<std::unique_ptr<Program>> load(const ir::Module& m, const ir::Graph& g);
  void enqueue(Program& p);
  void runWork(const Instr& ins, const Part& part);
  void fail(const ir::Node& n, const std::string& what) {
    std::lock_guard<std::mutex> l(error_mu);
    if (error.ok()) error = absl::InternalError(absl::StrCat(n.describe(), ": ", what));
  }
};

Executor::Executor(std::unique_ptr<ir::Module> module)
    : module_(std::move(module)), impl_(std::make_unique<Impl>()) {}

Executor::~Executor() {
  // Streams join their workers before the buffers their pending work points at go away.
  for (auto& d : impl_->devices) {
    d.compute.reset();
    d.comm.reset();
  }
}

absl::StatusOr<std::unique_ptr<Executor>> Executor::create(std::unique_ptr<ir::Module> module,
                                                           ExecutorOptions options) {
  if (!module->isReplicated())
    return absl::FailedPreconditionError(absl::StrCat(
        "module @", module->name(),
        " has no devices: run the pipeline (replicate, insert-collectives, ...) before executing"));
  for (const auto& g : module->graphs()) {
    const ir::MemoryPlan* plan = g->memoryPlan();
    if (plan != nullptr && plan->planned_nodes == g->numNodes()) continue;
    auto fresh = passes::planMemory(*module, *g);
    if (!fresh.ok()) return fresh.status();
    g->setMemoryPlan(std::make_shared<const ir::MemoryPlan>(std::move(*fresh)));
  }
  std::unique_ptr<Executor> ex(new Executor(std::move(module)));
  Impl& impl = *ex->impl_;
  const ir::Module& m = *ex->module_;
  impl.options = options;
  for (const ir::Device& d : m.devices()) {
    if (d.kind != ir::DeviceKind::kCpu)
      return absl::UnimplementedError(absl::StrCat(
          ir::toString(d), ": no runtime for this device kind in this build (use cpu:N devices)"));
    DeviceState s;
    s.device = d;
    s.ctx = std::make_unique<backend::cpu::CpuContext>(d, options.seed);
    s.compute = std::make_unique<CpuStream>(absl::StrCat(ir::toString(d), "/compute"),
                                            options.threads_per_device);
    s.comm = std::make_unique<CpuStream>(absl::StrCat(ir::toString(d), "/comm"), 1);
    impl.devices.push_back(std::move(s));
  }
  impl.communicator = std::make_unique<LocalCommunicator>(static_cast<int>(m.devices().size()));
  for (const ir::Var& v : m.vars()) {
    auto& replicas = impl.vars[v.name];
    for (size_t d = 0; d < m.devices().size(); ++d) replicas.emplace_back(v.type.bytes());
  }
  for (const auto& g : m.graphs()) {
    auto p = impl.load(m, *g);
    if (!p.ok()) return p.status();
    impl.programs[g->name()] = std::move(*p);
  }
  return ex;
}

absl::StatusOr<std::unique_ptr<Program>> Executor::Impl::load(const ir::Module& m,
                                                              const ir::Graph& g) {
  auto p = std::make_unique<Program>();
  p->graph = &g;
  const ir::MemoryPlan& plan = *g.memoryPlan();
  for (int64_t bytes : plan.arena_bytes) p->arenas.emplace_back(bytes);
  auto deviceIndexOf = [&](const ir::Value& v) { return *passes::deviceIndexOfValue(m, v); };

  absl::flat_hash_map<const ir::Value*, size_t> input_slot;
  for (const ir::Node* in : g.inputs()) {
    input_slot[in->result()] = p->staging.size();
    p->staging.emplace_back(in->result()->type());
  }
  auto viewOf = [&](const ir::Value& v) -> TensorView {
    const ir::Node& def = *v.def();
    if (def.op() == ir::Op::kInput) return p->staging[input_slot.at(&v)].view();
    size_t d = deviceIndexOf(v);
    if (def.op() == ir::Op::kParam) return {vars.at(def.symbolAttr("var"))[d].data(), v.type()};
    int64_t off = plan.offsets[def.id()][static_cast<size_t>(v.index())];
    return {p->arenas[d].data() + off, v.type()};
  };

  // Who writes each value: the instruction part, so that consumers on another stream can
  // wait for its event.
  absl::flat_hash_map<const ir::Node*, Instr*> instr_of;
  for (const auto& node : g.nodes()) {
    const ir::Node& n = *node;
    if (n.op() == ir::Op::kInput || n.op() == ir::Op::kParam) continue;
    auto ins = std::make_unique<Instr>();
    ins->node = &n;
    ins->comm = passes::streamOf(n) == StreamKind::kComm;
    if (!ins->comm) {
      size_t d = *m.deviceIndex(*n.device());
      // Made on the device's own stream: oneDNN fixes a primitive's thread count when it
      // is created, from the creating thread's OpenMP setting, and the stream's worker is
      // the thread whose setting (threads_per_device) must hold.
      absl::StatusOr<std::unique_ptr<backend::Kernel>> kernel;
      devices[d].compute->enqueue([&] { kernel = backend::cpu::makeKernel(n, *devices[d].ctx); });
      devices[d].compute->synchronize();
      if (!kernel.ok()) return kernel.status();
      ins->kernel = std::move(*kernel);
      Part part;
      part.device = d;
      for (const ir::Value* v : n.operands()) part.in.push_back(viewOf(*v));
      for (size_t r = 0; r < n.numResults(); ++r) part.out.push_back(viewOf(*n.result(r)));
      if (n.op() == ir::Op::kAssign)  // the variable's storage is assign's one output
        part.out.push_back({vars.at(n.symbolAttr("var"))[d].data(), n.operand(0)->type()});
      ins->parts.push_back(std::move(part));
    } else {
      const auto& devs = n.devicesAttr();
      if (devs.size() != m.devices().size())
        return absl::UnimplementedError(absl::StrCat(
            n.describe(), ": the local communicator runs collectives over all module devices"));
      const size_t nd = devs.size();
      int64_t offset = 0;
      for (size_t k = 0; k < nd; ++k) {
        Part part;
        part.device = *m.deviceIndex(devs[k]);
        switch (n.op()) {
          case ir::Op::kAllReduce: {
            size_t per = n.numOperands() / nd;
            for (size_t j = 0; j < per; ++j) {
              part.in.push_back(viewOf(*n.operand(k * per + j)));
              part.out.push_back(viewOf(*n.result(k * per + j)));
            }
            break;
          }
          case ir::Op::kSplit:
            part.in.push_back(viewOf(*n.operand(0)));
            part.out.push_back(viewOf(*n.result(k)));
            part.offset = offset;
            offset += n.result(k)->type().shape[static_cast<size_t>(n.intAttr("axis"))];
            break;
          case ir::Op::kBroadcast:
            part.in.push_back(viewOf(*n.operand(0)));
            part.out.push_back(viewOf(*n.result(k)));
            part.root = static_cast<int>(deviceIndexOf(*n.operand(0)));
            break;
          case ir::Op::kConcat:
            part.in.push_back(viewOf(*n.operand(k)));
            part.out.push_back(viewOf(*n.result(0)));
            part.root = static_cast<int>(deviceIndexOf(*n.result(0)));
            break;
          default:
            return absl::UnimplementedError(absl::StrCat(n.describe(), ": unknown collective"));
        }
        ins->parts.push_back(std::move(part));
      }
    }
    instr_of[&n] = ins.get();
    p->instrs.push_back(std::move(ins));
  }
  // Events where a value crosses streams: the producer's share records one, the
  // consumer's share waits for it.
  auto partOf = [&](const ir::Node* n, size_t device) -> Part& {
    for (Part& part : instr_of.at(n)->parts)
      if (part.device == device) return part;
    return instr_of.at(n)->parts[0];  // unreachable: streamWaits names existing shares
  };
  for (const passes::StreamWait& w : passes::streamWaits(m, g)) {
    Part& producer = partOf(w.producer, w.from.device);
    Part& consumer = partOf(w.consumer, w.at.device);
    if (!producer.done) {
      DeviceState& ds = devices[w.from.device];
      producer.done = (w.from.stream == StreamKind::kComm ? ds.comm : ds.compute)->createEvent();
    }
    consumer.waits.push_back(producer.done.get());
  }
  for (const ir::Value* v : g.outputs()) p->outputs.push_back(viewOf(*v));
  return p;
}

void Executor::Impl::runWork(const Instr& ins, const Part& part) {
  const ir::Node& n = *ins.node;
  if (hook) hook(n, part.device);
  int64_t start = options.trace ? nowNs() : 0;
  try {
    const int rank = static_cast<int>(part.device);
    switch (n.op()) {
      case ir::Op::kAllReduce:
        communicator->allReduce(rank, part.in, part.out, reduceOpOf(n));
        break;
      case ir::Op::kSplit:
        copySlice(part.in[0], part.out[0], static_cast<int>(n.intAttr("axis")), part.offset,
                  /*into_whole=*/false);
        break;
      case ir::Op::kBroadcast:
        communicator->broadcast(rank, part.root, part.in[0], part.out[0]);
        break;
      case ir::Op::kConcat:
        communicator->gather(rank, part.root, part.in[0], part.out[0],
                             static_cast<int>(n.intAttr("axis")));
        break;
      default:
        ins.kernel->run(part.in, part.out);
    }
  } catch (const std::exception& e) {
    fail(n, e.what());
  }
  if (options.trace) {
    int64_t end = nowNs();
    std::lock_guard<std::mutex> l(trace_mu);
    trace.push_back({&n, part.device, ins.comm, start, end});
  }
}

void Executor::Impl::enqueue(Program& p) {
  for (const auto& ins : p.instrs) {
    for (const Part& part : ins->parts) {
      DeviceState& ds = devices[part.device];
      Stream& stream = ins->comm ? *ds.comm : *ds.compute;
      for (Event* e : part.waits) stream.wait(*e);
      stream.enqueue([this, ins = ins.get(), &part] { runWork(*ins, part); });
      if (part.done) stream.record(*part.done);
    }
  }
}

absl::StatusOr<std::vector<HostTensor>> Executor::run(absl::string_view name,
                                                      absl::Span<const TensorView> inputs) {
  auto it = impl_->programs.find(std::string(name));
  if (it == impl_->programs.end())
    return absl::NotFoundError(absl::StrCat("module @", module_->name(), " has no graph @", name));
  Program& p = *it->second;
  if (inputs.size() != p.staging.size())
    return absl::InvalidArgumentError(
        absl::StrCat("@", name, " takes ", p.staging.size(), " inputs, got ", inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!(inputs[i].type == p.staging[i].type))
      return absl::InvalidArgumentError(absl::StrCat("@", name, " input ", i, " must be ",
                                                     ir::toString(p.staging[i].type), ", got ",
                                                     ir::toString(inputs[i].type)));
    std::memcpy(p.staging[i].buffer.data(), inputs[i].data, static_cast<size_t>(inputs[i].bytes()));
  }
  impl_->enqueue(p);
  // The host's one wait per step.
  for (auto& d : impl_->devices) {
    d.compute->synchronize();
    d.comm->synchronize();
  }
  {
    std::lock_guard<std::mutex> l(impl_->error_mu);
    if (!impl_->error.ok()) return impl_->error;
  }
  std::vector<HostTensor> out;
  for (const TensorView& v : p.outputs) {
    HostTensor& t = out.emplace_back(v.type);
    std::memcpy(t.buffer.data(), v.data, static_cast<size_t>(v.bytes()));
  }
  return out;
}

absl::StatusOr<HostTensor> Executor::readVariable(absl::string_view name, size_t device) const {
  const ir::Var* var = module_->findVar(name);
  if (var == nullptr)
    return absl::NotFoundError(
        absl::StrCat("module @", module_->name(), " has no variable @", name));
  if (device >= impl_->devices.size())
    return absl::OutOfRangeError(absl::StrCat("device index ", device, " out of range (",
                                              impl_->devices.size(), " devices)"));
  HostTensor t(var->type);
  std::memcpy(t.buffer.data(), impl_->vars.at(var->name)[device].data(),
              static_cast<size_t>(var->type.bytes()));
  return t;
}

std::vector<int64_t> Executor::arenaBytes(absl::string_view name) const {
  auto it = impl_->programs.find(std::string(name));
  if (it == impl_->programs.end()) return {};
  std::vector<int64_t> out;
  for (const AlignedBuffer& a : it->second->arenas) out.push_back(a.bytes());
  return out;
}

void Executor::setBeforeNodeHook(std::function<void(const ir::Node&, size_t)> hook) {
  impl_->hook = std::move(hook);
}

std::vector<TraceEntry> Executor::takeTrace() {
  std::lock_guard<std::mutex> l(impl_->trace_mu);
  return std::move(impl_->trace);
}

}  // namespace tandem::runtime
