#include "runtime/executor.h"

#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backend/processes.h"
#include "ir/interfaces.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"
#include "runtime/label_check.h"
#include "runtime/loader.h"

namespace tandem::runtime {
namespace {

// Enqueues one share of a collective on its comm stream, by the communicator call its spec
// names (a new collective's call is a case here); a copy from the host reads input slot
// `slot`.
absl::Status launchCollective(const ir::Node& n, Share& s, int slot, backend::Device& device,
                              backend::Stream& stream) {
  if (!s.label.empty() && s.comm != nullptr) s.comm->labelNext(s.label);
  switch (ir::CollectiveView(n).call()) {
    case ir::CollectiveCall::kAllReduce:
      return s.comm->allReduce(s.in, s.out, ir::AllReduceView(n).op(), stream);
    case ir::CollectiveCall::kReduceScatter:
      return s.comm->reduceScatter(s.in[0], s.out[0], s.shard_sizes, ir::ReduceScatterView(n).op(),
                                   stream);
    case ir::CollectiveCall::kAllGather:
      return s.comm->allGather(s.in[0], s.out[0], s.shard_sizes, stream);
    case ir::CollectiveCall::kCopyFromHost: {
      const SplitSource& from = s.sources[static_cast<size_t>(slot)];
      const int axis = static_cast<int>(ir::SplitView(n).axis());
      // A prefetched slice is already the share's part: a copy on the device (peer copy
      // of a whole tensor, offset 0).
      return from.prefetched ? device.copyIntoSlice(from.in, s.out[0], axis, 0, stream)
                             : device.copySliceFromHost(from.in, s.out[0], axis, s.offset, stream);
    }
    case ir::CollectiveCall::kBroadcast:
      for (size_t j = 0; j < s.in.size(); ++j)
        RETURN_IF_ERROR(s.comm->broadcast(s.root, s.in[j], s.out[j], stream));
      return absl::OkStatus();
    case ir::CollectiveCall::kCopyToPeer: {
      const int axis = static_cast<int>(ir::ConcatView(n).axis());
      int64_t offset = 0;
      for (const backend::TensorView& part : s.in) {
        RETURN_IF_ERROR(device.copyIntoSlice(part, s.out[0], axis, offset, stream));
        offset += part.dim(axis);
      }
      return absl::OkStatus();
    }
  }
  return absl::InternalError(absl::StrCat(n.describe(), ": unknown communicator call"));
}

}  // namespace

Executor::Executor(std::unique_ptr<LoadedModule> loaded, ExecutorOptions options)
    : loaded_(std::move(loaded)), options_(options) {}

Executor::~Executor() = default;

absl::StatusOr<std::unique_ptr<Executor>> Executor::create(std::unique_ptr<ir::Module> module,
                                                           ExecutorOptions options) {
  ASSIGN_OR_RETURN(std::unique_ptr<LoadedModule> loaded, loadModule(std::move(module), options));
  return std::unique_ptr<Executor>(new Executor(std::move(loaded), options));
}

const ir::Module& Executor::module() const { return *loaded_->module; }

absl::StatusOr<Program*> Executor::program(absl::string_view name) const {
  auto it = loaded_->programs.find(std::string(name));
  if (it == loaded_->programs.end())
    return absl::NotFoundError(
        absl::StrCat("module @", loaded_->module->name(), " has no graph @", name));
  return it->second.get();
}

// Trace entries are filled by the streams' stamps, found by index: the vector may grow
// while earlier entries are being stamped.
size_t Executor::traceStart(backend::Stream& stream, TraceEntry entry) {
  size_t at = 0;
  {
    std::lock_guard<std::mutex> l(trace_mu_);
    at = trace_.size();
    trace_.push_back(entry);
  }
  stream.stamp([this, at](int64_t ns) {
    std::lock_guard<std::mutex> l(trace_mu_);
    trace_[at].start_ns = ns;
  });
  return at;
}

void Executor::traceEnd(backend::Stream& stream, size_t at) {
  stream.stamp([this, at](int64_t ns) {
    std::lock_guard<std::mutex> l(trace_mu_);
    trace_[at].end_ns = ns;
  });
}

absl::Status Executor::enqueueStep(Program& p, int slot) {
  for (const auto& ins : p.instrs) {
    const ir::Node& n = *ins->node;
    // One host thread issues every device's share of a collective: each group's shares are
    // bracketed so that a backend like NCCL sees them as one operation. NCCL enqueues a
    // group's work only at ncclGroupEnd, so the events (and trace stamps) that mark a
    // share's end are recorded after its group closes, not after its call.
    backend::CommunicatorGroup* open_group = nullptr;
    struct Ended {
      backend::Stream* stream;
      Share* share;
      size_t at;
    };
    std::vector<Ended> ended;
    auto markEnds = [&] {
      for (const Ended& e : ended) {
        if (options_.trace) traceEnd(*e.stream, e.at);
        if (e.share->done) e.stream->record(*e.share->done);
      }
      ended.clear();
    };
    // A group is closed on every path, errors included: an open one would leave NCCL's
    // group depth unbalanced (every later call of this thread queued, never launched) and
    // a same-GPU group waiting for a groupEnd that never comes.
    auto closeGroup = [&]() -> absl::Status {
      if (open_group == nullptr) return absl::OkStatus();
      absl::Status closed = std::exchange(open_group, nullptr)->groupEnd();
      if (!closed.ok())
        return absl::Status(closed.code(), absl::StrCat(n.describe(), ": ", closed.message()));
      return absl::OkStatus();
    };
    for (Share& s : ins->shares) {
      backend::Device& device = *loaded_->devices[s.device];
      backend::Stream& stream = ins->comm ? device.commStream() : device.computeStream();
      for (backend::Event* e : s.waits) stream.wait(*e);
      const size_t at = options_.trace ? traceStart(stream, {&n, s.device, ins->comm, 0, 0}) : 0;
      if (hook_) stream.hostCallback([this, &n, d = s.device] { hook_(n, d); });
      if (s.group != open_group) {
        RETURN_IF_ERROR(closeGroup());
        markEnds();
        if (s.group != nullptr) {
          absl::Status started = s.group->groupStart();
          if (!started.ok())
            return absl::Status(started.code(),
                                absl::StrCat(n.describe(), ": ", started.message()));
          open_group = s.group;
        }
      }
      absl::Status launched = ins->kernel == nullptr ? launchCollective(n, s, slot, device, stream)
                                                     : ins->kernel->launch(stream, s.in, s.out);
      if (!launched.ok()) {
        (void)closeGroup();  // the launch's error is the one to report
        return absl::Status(launched.code(), absl::StrCat(n.describe(), ": ", launched.message()));
      }
      ended.push_back({&stream, &s, at});
      if (open_group == nullptr) markEnds();
    }
    RETURN_IF_ERROR(closeGroup());
    markEnds();
  }
  for (OutputCopy& o : p.outputs) {
    backend::Device& device = *loaded_->devices[o.device];
    RETURN_IF_ERROR(device.copyToHost(o.src, o.host.view(o.src.type),
                                      o.comm ? device.commStream() : device.computeStream()));
  }
  return absl::OkStatus();
}

void Executor::stopRecording(const std::string& why) {
  options_.record_steps = false;
  for (auto& [name, program] : loaded_->programs)
    for (InputSlot& slot : program->slots) slot.recorded.reset();
  const std::string line = absl::StrCat(why, "; running plain steps from now on");
  if (options_.warn) {
    options_.warn(line);
  } else {
    // One write, so that two ranks' lines never interleave.
    const std::string out =
        absl::StrCat("tandem: ", backend::Processes::current().prefix(), "warning: ", line, "\n");
    std::fwrite(out.data(), 1, out.size(), stderr);
  }
}

absl::Status Executor::runStep(Program& p, int slot) {
  // Traces stamp every node of the step and hooks are host callbacks: they need plain
  // steps (a replay enqueues neither).
  const bool plain_only = !options_.record_steps || options_.trace || hook_;
  // A recording holds its slot's addresses (the split's sources): one per slot.
  std::unique_ptr<backend::StepRecorder>& recorded = p.slots[static_cast<size_t>(slot)].recorded;
  if (recorded && !plain_only) return recorded->replay();
  if (plain_only || ++p.runs <= kStepsBeforeRecording) return enqueueStep(p, slot);
  // One backend for all devices, or no recording (a step across kinds is not one graph).
  const auto& devices = loaded_->module->devices();
  for (const ir::Device& d : devices)
    if (d.kind != devices[0].kind) return enqueueStep(p, slot);
  ASSIGN_OR_RETURN(const backend::Backend* b, backend::backendFor(devices[0].kind));
  std::vector<backend::Device*> all;  // this process's
  for (auto& d : loaded_->devices)
    if (d != nullptr) all.push_back(d.get());
  absl::StatusOr<std::unique_ptr<backend::StepRecorder>> made = b->makeStepRecorder(all);
  if (made.ok() && *made == nullptr) {
    options_.record_steps = false;  // this backend never records: stop asking
    return enqueueStep(p, slot);
  }
  // Recording only saves the host's launch cost: where it cannot be had, the run goes on
  // with plain steps after one warning rather than ending. Nothing of a failed recording
  // ran, so the step then runs plainly (a real error of the step comes back from that).
  const std::string what = absl::StrCat("recording one step of @", p.graph->name());
  absl::Status recorded_here =
      made.ok() ? record(**made, p, slot)
                : absl::Status(made.status().code(),
                               absl::StrCat("not possible here: ", made.status().message()));
  // Whether a step's collectives are recorded must be the same on every rank (NCCL: a
  // captured collective's launch is collective), so the ranks agree before any replay.
  ASSIGN_OR_RETURN(bool failed_somewhere,
                   backend::Processes::current().anyRank(!recorded_here.ok(),
                                                         "agreeing whether a step was recorded"));
  if (failed_somewhere) {
    stopRecording(recorded_here.ok() ? absl::StrCat(what, ": another rank could not record it")
                                     : absl::StrCat(what, " failed: ", recorded_here.message()));
    return enqueueStep(p, slot);
  }
  recorded = *std::move(made);
  return recorded->replay();
}

absl::Status Executor::record(backend::StepRecorder& recorder, Program& p, int slot) {
  RETURN_IF_ERROR(recorder.begin());
  absl::Status enqueued = enqueueStep(p, slot);
  absl::Status ended = recorder.end();  // also after a failed enqueue
  RETURN_IF_ERROR(enqueued);
  return ended;
}

absl::StatusOr<std::vector<HostTensor>> Executor::run(
    absl::string_view name, absl::Span<const backend::TensorView> inputs) {
  RETURN_IF_ERROR(prefetch(name, inputs));
  RETURN_IF_ERROR(launch(name));
  return wait();
}

absl::Status Executor::prefetch(absl::string_view name,
                                absl::Span<const backend::TensorView> inputs) {
  ASSIGN_OR_RETURN(Program * p, program(name));
  if (inputs.size() != p->input_types.size())
    return absl::InvalidArgumentError(
        absl::StrCat("@", name, " takes ", p->input_types.size(), " inputs, got ", inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!(inputs[i].type == p->input_types[i]))
      return absl::InvalidArgumentError(absl::StrCat("@", name, " input ", i, " must be ",
                                                     ir::toString(p->input_types[i]), ", got ",
                                                     ir::toString(inputs[i].type)));
  for (const LabelCheck& check : p->label_checks)
    RETURN_IF_ERROR(checkLabels(check, *p->graph, inputs[check.input]));
  InputSlot& slot = p->slots[static_cast<size_t>(p->nextSlot())];
  // The step in flight reads the other slot, and the last step that read this one is
  // done (the host waited for it); only this slot's own copies may still read its
  // staging, when inputs are handed over twice before a launch.
  for (const auto& copied : slot.copied)
    if (copied != nullptr) copied->synchronize();
  // The caller's batch may be anywhere in host memory; the staging is what the devices
  // copy their slices from.
  for (size_t i = 0; i < inputs.size(); ++i)
    std::memcpy(slot.staging[i].data(), inputs[i].data, static_cast<size_t>(inputs[i].bytes()));
  absl::Status status;
  for (const PrefetchCopy& c : slot.copies) {
    backend::Device& device = *loaded_->devices[c.device];
    backend::Stream& stream = *device.prefetchStream();
    const size_t at = options_.trace
                          ? traceStart(stream, {c.split, c.device, false, 0, 0, /*prefetch=*/true})
                          : 0;
    if (hook_) stream.hostCallback([this, n = c.split, d = c.device] { hook_(*n, d); });
    absl::Status copied = device.copySliceFromHost(c.whole, c.slice, c.axis, c.offset, stream);
    if (options_.trace) traceEnd(stream, at);
    if (!copied.ok()) {
      status = absl::Status(copied.code(), absl::StrCat(c.split->describe(),
                                                        ": copying the next batch's slice in on ",
                                                        stream.name(), ": ", copied.message()));
      break;
    }
  }
  // Recorded even after a failure, so that the next prefetch into this slot waits for
  // what was enqueued.
  for (size_t d = 0; d < slot.copied.size(); ++d)
    if (slot.copied[d] != nullptr) loaded_->devices[d]->prefetchStream()->record(*slot.copied[d]);
  p->pending = status.ok();
  return status;
}

bool Executor::prefetched(absl::string_view name) const {
  absl::StatusOr<Program*> p = program(name);
  return p.ok() && (*p)->pending;
}

absl::Status Executor::launch(absl::string_view name) {
  if (in_flight_ != nullptr)
    return absl::FailedPreconditionError(absl::StrCat("a step of @", in_flight_->graph->name(),
                                                      " is in flight: wait for it before "
                                                      "launching @",
                                                      name));
  ASSIGN_OR_RETURN(Program * p, program(name));
  if (!p->pending && !p->input_types.empty())
    return absl::FailedPreconditionError(absl::StrCat(
        "@", name,
        " has no inputs handed over: prefetch them before launching it (run does both)"));
  const int t = p->nextSlot();
  p->pending = false;
  p->last_read = t;
  InputSlot& slot = p->slots[static_cast<size_t>(t)];
  // Each device's splits read what its prefetch stream copied: its comm stream waits for
  // that before the step, outside the step (a recorded step replays after it).
  for (size_t d = 0; d < slot.copied.size(); ++d)
    if (slot.copied[d] != nullptr) loaded_->devices[d]->commStream().wait(*slot.copied[d]);
  absl::Status status = runStep(*p, t);
  if (!status.ok()) return drain(status);  // nothing may still point at the step's buffers
  in_flight_ = p;
  return absl::OkStatus();
}

absl::Status Executor::drain(absl::Status status) {
  // Every stream is drained even after an error, so that no work still points at the
  // step's buffers.
  for (auto& d : loaded_->devices) {
    if (d == nullptr) continue;  // another process's
    absl::Status compute = d->computeStream().synchronize();
    absl::Status comm = d->commStream().synchronize();
    absl::Status prefetch =
        d->prefetchStream() != nullptr ? d->prefetchStream()->synchronize() : absl::OkStatus();
    for (absl::Status* s : {&compute, &comm, &prefetch})
      if (status.ok()) status = *s;
  }
  return status;
}

absl::StatusOr<std::vector<HostTensor>> Executor::wait() {
  if (in_flight_ == nullptr)
    return absl::FailedPreconditionError("no step in flight to wait for: launch one first");
  const Program& p = *std::exchange(in_flight_, nullptr);
  // The host's one wait per step; it also takes in the copies handed over meanwhile
  // (enqueued while the step ran, so the wait is for the later of the two).
  RETURN_IF_ERROR(drain(absl::OkStatus()));
  std::vector<HostTensor> out;
  for (const OutputCopy& o : p.outputs) {
    HostTensor& t = out.emplace_back(o.src.type);
    std::memcpy(t.buffer.data(), o.host.data(), static_cast<size_t>(o.src.bytes()));
  }
  return out;
}

namespace {

/// Variable `name` of the loaded module, after checking that `device` is one of its
/// devices (readVariable and writeVariable).
absl::StatusOr<const ir::Var*> variableOn(const LoadedModule& lm, absl::string_view name,
                                          size_t device) {
  const ir::Module& m = *lm.module;
  const ir::Var* var = m.findVar(name);
  if (var == nullptr)
    return absl::NotFoundError(absl::StrCat("module @", m.name(), " has no variable @", name));
  if (device >= lm.devices.size())
    return absl::OutOfRangeError(absl::StrCat("device index ", device, " out of range (",
                                              lm.devices.size(), " devices)"));
  if (lm.devices[device] == nullptr)
    return absl::FailedPreconditionError(
        absl::StrCat(ir::toString(m.devices()[device]), " is another process's device: its @",
                     name, " is there"));
  return var;
}

}  // namespace

absl::StatusOr<HostTensor> Executor::readVariable(absl::string_view name, size_t device) const {
  ASSIGN_OR_RETURN(const ir::Var* var, variableOn(*loaded_, name, device));
  backend::Device& d = *loaded_->devices[device];
  const ir::TensorType type = var->replicaType(device);  // a sharded one: the device's shard
  HostTensor t(type);
  backend::TensorView dst{t.buffer.data(), type, backend::MemoryLocation::host()};
  RETURN_IF_ERROR(
      d.copyToHost(loaded_->vars.at(var->name)[device].view(type), dst, d.computeStream()));
  RETURN_IF_ERROR(d.computeStream().synchronize());
  return t;
}

absl::Status Executor::writeVariable(absl::string_view name, size_t device,
                                     const HostTensor& value) {
  ASSIGN_OR_RETURN(const ir::Var* var, variableOn(*loaded_, name, device));
  const ir::TensorType type = var->replicaType(device);
  if (!(value.type == type))
    return absl::InvalidArgumentError(absl::StrCat("@", name, " is ", ir::toString(type),
                                                   var->sharded() ? " on this device" : "",
                                                   ", not ", ir::toString(value.type)));
  backend::Device& d = *loaded_->devices[device];
  RETURN_IF_ERROR(d.copyFromHost(value.view(), loaded_->vars.at(var->name)[device].view(type),
                                 d.computeStream()));
  return d.computeStream().synchronize();
}

std::vector<int64_t> Executor::arenaBytes(absl::string_view name) const {
  auto it = loaded_->programs.find(std::string(name));
  if (it == loaded_->programs.end()) return {};
  std::vector<int64_t> out;
  for (const backend::DeviceBuffer& a : it->second->arenas) out.push_back(a.bytes());
  return out;
}

void Executor::setBeforeNodeHook(std::function<void(const ir::Node&, size_t)> hook) {
  hook_ = std::move(hook);
}

std::vector<TraceEntry> Executor::takeTrace() {
  std::lock_guard<std::mutex> l(trace_mu_);
  return std::move(trace_);
}

}  // namespace tandem::runtime
