// Collectives between CUDA devices of this process, enqueued on the ranks' comm streams.
//
// Every device on a GPU of its own: NCCL, one communicator per rank from ncclCommInitAll,
// each call grouped (ncclGroupStart/End) so that the k tensors of one all_reduce are one
// fused launch, and the executor's groupStart/groupEnd bracket all ranks' shares. A group
// that spans processes is one NCCL communicator too: rank 0 makes its unique id, MPI
// carries it to the other processes, and each initializes its own GPUs' ranks
// (ncclCommInitRank in one NCCL group), rank i being the group's device i. reduce_scatter
// and all_gather with even shards are ncclReduceScatter and ncclAllGather; uneven shards
// are one NCCL group of ncclReduce (ncclBroadcast) per rank.
//
// Logical devices sharing a GPU (cuda:0,cuda:0), which NCCL refuses: a same-process
// group. Each rank's call is queued; a collective runs once every rank has called it and
// no group is open (at groupEnd, or at the last rank's call). Then every rank's stream
// records an event, the first rank's stream waits for all of them, reduces with an own
// kernel in the CPU local communicator's fixed tree order (bit-identical runs, the same
// bits as the CPU backend) and writes every rank's out, and the other ranks' streams wait
// on an event recorded after that (a reduce_scatter: one kernel per rank's shard; an
// all_gather: copies). Ranks on other GPUs than the first rank's are read and written
// through peer access.

#include "backend/cuda/cuda_communicator.h"

#include <algorithm>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/cuda/communicator_launch.h"
#include "backend/cuda/communicator_plan.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_status.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/nccl_watch.h"
#include "backend/cuda/target_info.h"
#include "backend/shards.h"

namespace tandem::backend::cuda {
namespace {

const char* opName(ReduceOp op) {
  return op == ReduceOp::kMax ? "max" : op == ReduceOp::kMean ? "mean" : "sum";
}

absl::StatusOr<CudaStream*> cudaStreamOf(Stream& stream, int gpu, const std::string& where) {
  CudaStream* s = asCudaStream(stream);
  if (s == nullptr)
    return absl::InternalError(absl::StrCat(where, ": ", stream.name(), " is not a CUDA stream"));
  if (s->gpu() != gpu)
    return absl::InternalError(absl::StrCat(where, ": ", s->name(), " is on GPU ", s->gpu(),
                                            ", this rank's device on GPU ", gpu));
  return s;
}

absl::Status checkPairs(absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                        const std::string& where) {
  if (in.size() != out.size())
    return absl::InternalError(
        absl::StrCat(where, ": all_reduce of ", in.size(), " tensors into ", out.size()));
  for (size_t j = 0; j < in.size(); ++j)
    if (!(in[j].type == out[j].type))
      return absl::InternalError(absl::StrCat(where, ": all_reduce of ", ir::toString(in[j].type),
                                              " into ", ir::toString(out[j].type)));
  return absl::OkStatus();
}

// ---- NCCL: every device on its own GPU ---------------------------------------------------

ncclDataType_t ncclType(ir::DType t) {
  switch (t) {
    case ir::DType::kBF16:
      return ncclBfloat16;
    case ir::DType::kF64:
      return ncclFloat64;
    case ir::DType::kI32:
      return ncclInt32;
    case ir::DType::kI64:
      return ncclInt64;
    case ir::DType::kF32:
      break;
  }
  return ncclFloat32;
}

ncclRedOp_t ncclOp(ReduceOp op) {
  return op == ReduceOp::kMax ? ncclMax : op == ReduceOp::kMean ? ncclAvg : ncclSum;
}

class NcclGroup;

class NcclRank final : public Communicator {
 public:
  NcclRank(NcclGroup& group, size_t local, ncclComm_t comm, int rank, int size, int gpu,
           std::string what)
      : group_(group),
        local_(local),
        comm_(comm),
        rank_(rank),
        size_(size),
        gpu_(gpu),
        what_(std::move(what)) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void labelNext(std::string label) override { next_label_ = std::move(label); }

  absl::Status allReduce(absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                         ReduceOp op, Stream& stream) override;
  absl::Status reduceScatter(const TensorView& in, const TensorView& out,
                             absl::Span<const int64_t> sizes, ReduceOp op, Stream& stream) override;
  absl::Status allGather(const TensorView& in, const TensorView& out,
                         absl::Span<const int64_t> sizes, Stream& stream) override;
  absl::Status broadcast(int root, const TensorView& in, const TensorView& out,
                         Stream& stream) override;

 private:
  /// Enqueues `calls` (NCCL calls) on this rank's stream as one watched collective in one
  /// NCCL group; `kind` names it for the watchdog.
  template <typename Calls>
  absl::Status enqueueGrouped(absl::string_view kind, Stream& stream, const Calls& calls);

  /// What the watchdog calls the collective this rank enqueues now.
  std::string label(absl::string_view kind) {
    std::string l = std::exchange(next_label_, std::string());
    return l.empty() ? absl::StrCat(kind, " of ", what_) : l;
  }

  NcclGroup& group_;
  size_t local_;  // this process's rank number within the group
  ncclComm_t comm_;
  int rank_, size_, gpu_;
  std::string what_;
  std::string next_label_;
};

class NcclGroup final : public CommunicatorGroup {
 public:
  // One process, every rank: ncclCommInitAll.
  static absl::StatusOr<std::unique_ptr<CommunicatorGroup>> create(std::vector<int> gpus,
                                                                   std::vector<std::string> devices,
                                                                   const std::string& what) {
    const int n = static_cast<int>(gpus.size());
    std::vector<int> ranks(gpus.size());
    for (int r = 0; r < n; ++r) ranks[static_cast<size_t>(r)] = r;
    std::unique_ptr<NcclGroup> g(new NcclGroup(what));
    g->comms_.assign(gpus.size(), nullptr);
    absl::Status s =
        check(ncclCommInitAll(g->comms_.data(), n, gpus.data()), "ncclCommInitAll", what);
    if (!s.ok()) {
      g->comms_.clear();  // nothing was made
      return s;
    }
    g->makeRanks(gpus, devices, ranks, n);
    return std::unique_ptr<CommunicatorGroup>(std::move(g));
  }

  // This process's ranks `ranks` (on `gpus`) of an `n`-rank communicator whose unique id
  // the processes share over MPI. One thread initializes several GPUs, so the inits are
  // one NCCL group (NCCL's documented way; nccl-tests' initComms does the same).
  static absl::StatusOr<std::unique_ptr<CommunicatorGroup>> createAcrossProcesses(
      std::vector<int> gpus, std::vector<std::string> devices, std::vector<int> ranks, int n,
      ProcessComm& processes, const std::string& what) {
    ASSIGN_OR_RETURN(ncclUniqueId id, shareUniqueId(processes, what));
    std::unique_ptr<NcclGroup> g(new NcclGroup(what));
    g->comms_.assign(gpus.size(), nullptr);
    absl::Status s = check(ncclGroupStart(), "ncclGroupStart", what);
    for (size_t i = 0; i < gpus.size() && s.ok(); ++i) {
      s = check(cudaSetDevice(gpus[i]), absl::StrCat("cudaSetDevice(", gpus[i], ")"), what);
      if (s.ok())
        s = check(ncclCommInitRank(&g->comms_[i], n, id, ranks[i]),
                  absl::StrCat("ncclCommInitRank(rank ", ranks[i], " of ", n, ")"), what);
    }
    // Closed even after a failure, so the thread's group depth stays balanced.
    absl::Status ended = check(ncclGroupEnd(), "ncclGroupEnd (ncclCommInitRank)", what);
    if (s.ok()) s = ended;
    if (!s.ok()) return s;  // the destructor frees whichever were made
    g->makeRanks(gpus, devices, ranks, n);
    return std::unique_ptr<CommunicatorGroup>(std::move(g));
  }

  ~NcclGroup() override {
    // Out of the watchdog's sight before the communicators go.
    if (watch_ != nullptr) Processes::current().unwatchAsync(watch_.get());
    watch_.reset();
    // ncclCommDestroy alone, rank by rank, as nccl-tests does: the streams are drained by
    // now, and ncclCommFinalize waits for every rank's finalize, which one thread calling
    // it rank by rank would never see.
    for (ncclComm_t c : comms_)
      if (c != nullptr) ncclCommDestroy(c);
  }

  int size() const override { return static_cast<int>(ranks_.size()); }
  Communicator& rank(int r) override { return *ranks_[static_cast<size_t>(r)]; }
  absl::Status groupStart() override {
    CUDA_TRY(what_, ncclGroupStart());
    ++depth_;
    return absl::OkStatus();
  }
  absl::Status groupEnd() override {
    --depth_;
    CUDA_TRY(what_, ncclGroupEnd());
    return endCollectives();
  }

  /// Around one rank's collective: the watchdog's start event before it, and its end
  /// event once NCCL has enqueued it (at the outermost ncclGroupEnd).
  absl::StatusOr<size_t> beginCollective(size_t local, const std::string& label,
                                         cudaStream_t stream) {
    return watch_->begin(local, label, stream);
  }
  absl::Status collectiveEnqueued(size_t collective, cudaStream_t stream) {
    ended_.push_back({collective, stream});
    return depth_ == 0 ? endCollectives() : absl::OkStatus();
  }

 private:
  explicit NcclGroup(std::string what) : what_(std::move(what)) {}

  void makeRanks(const std::vector<int>& gpus, const std::vector<std::string>& devices,
                 const std::vector<int>& ranks, int n) {
    std::vector<NcclWatch::Rank> watched;
    for (size_t i = 0; i < gpus.size(); ++i) {
      ranks_.push_back(std::make_unique<NcclRank>(*this, i, comms_[i], ranks[i], n, gpus[i],
                                                  absl::StrCat(what_, " rank ", ranks[i])));
      watched.push_back({comms_[i], gpus[i], devices[i], ranks[i]});
    }
    watch_ = std::make_unique<NcclWatch>(what_, std::move(watched), realNcclProbe());
    Processes::current().watchAsync(watch_.get());
  }

  absl::Status endCollectives() {
    absl::Status s = absl::OkStatus();
    for (auto [collective, stream] : ended_) {
      absl::Status e = watch_->end(collective, stream);
      if (s.ok()) s = e;
    }
    ended_.clear();
    return s;
  }

  std::string what_;
  std::vector<ncclComm_t> comms_;
  std::vector<std::unique_ptr<NcclRank>> ranks_;
  std::unique_ptr<NcclWatch> watch_;
  int depth_ = 0;                                       // the executor's groups open now
  std::vector<std::pair<size_t, cudaStream_t>> ended_;  // collectives whose end waits
};

template <typename Calls>
absl::Status NcclRank::enqueueGrouped(absl::string_view kind, Stream& stream, const Calls& calls) {
  ASSIGN_OR_RETURN(CudaStream * s, cudaStreamOf(stream, gpu_, what_));
  CUDA_TRY(what_, cudaSetDevice(gpu_));
  ASSIGN_OR_RETURN(size_t watched, group_.beginCollective(local_, label(kind), s->handle()));
  CUDA_TRY(what_, ncclGroupStart());
  absl::Status enqueued = calls(s->handle());
  // Closed even after a failure, so the thread's group depth stays balanced.
  absl::Status ended = check(ncclGroupEnd(), "ncclGroupEnd()", what_);
  RETURN_IF_ERROR(enqueued);
  RETURN_IF_ERROR(ended);
  return group_.collectiveEnqueued(watched, s->handle());
}

absl::Status NcclRank::allReduce(absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                                 ReduceOp op, Stream& stream) {
  RETURN_IF_ERROR(checkPairs(in, out, what_));
  // The k tensors as one group: one fused launch (and a nested group when the executor
  // brackets the ranks' shares).
  return enqueueGrouped("all_reduce", stream, [&](cudaStream_t s) -> absl::Status {
    for (size_t j = 0; j < in.size(); ++j)
      RETURN_IF_ERROR(check(
          ncclAllReduce(in[j].data, out[j].data, static_cast<size_t>(in[j].numElements()),
                        ncclType(in[j].type.dtype), ncclOp(op), comm_, s),
          absl::StrCat("ncclAllReduce(", opName(op), ", ", ir::toString(in[j].type), ")"), what_));
    return absl::OkStatus();
  });
}

// ncclReduceScatter and ncclAllGather take one count for every rank. Uneven shards go as
// PyTorch's ProcessGroupNCCL sends them (NVIDIA/nccl#773): one ncclReduce to each rank of
// its shard, or one ncclBroadcast from each rank of its shard, in one NCCL group, which
// needs no padded copy of the buffer and no scratch memory. Neither promises the bits of
// ncclAllReduce (NCCL picks its order per algorithm; with two ranks any order adds the
// same bits): a GPU check in docs/GPU.md measures it.
absl::Status NcclRank::reduceScatter(const TensorView& in, const TensorView& out,
                                     absl::Span<const int64_t> sizes, ReduceOp op, Stream& stream) {
  RETURN_IF_ERROR(checkShards(in, out, sizes, rank_, size_, what_, "reduce_scatter"));
  const ncclDataType_t type = ncclType(in.type.dtype);
  const int64_t element = ir::dtypeBytes(in.type.dtype);
  return enqueueGrouped("reduce_scatter", stream, [&](cudaStream_t s) -> absl::Status {
    if (evenShards(sizes))
      return check(ncclReduceScatter(in.data, out.data, static_cast<size_t>(sizes[0]), type,
                                     ncclOp(op), comm_, s),
                   absl::StrCat("ncclReduceScatter(", opName(op), ", ", ir::toString(in.type), ")"),
                   what_);
    for (int r = 0; r < size_; ++r) {
      const char* from = static_cast<const char*>(in.data) + shardOffset(sizes, r) * element;
      // recvbuff is read on the root only; every rank passes its own shard's buffer.
      RETURN_IF_ERROR(
          check(ncclReduce(from, out.data, static_cast<size_t>(sizes[static_cast<size_t>(r)]), type,
                           ncclOp(op), r, comm_, s),
                absl::StrCat("ncclReduce(", opName(op), ", shard of rank ", r, " of ",
                             ir::toString(in.type), ")"),
                what_));
    }
    return absl::OkStatus();
  });
}

absl::Status NcclRank::allGather(const TensorView& in, const TensorView& out,
                                 absl::Span<const int64_t> sizes, Stream& stream) {
  RETURN_IF_ERROR(checkShards(out, in, sizes, rank_, size_, what_, "all_gather"));
  const ncclDataType_t type = ncclType(in.type.dtype);
  const int64_t element = ir::dtypeBytes(in.type.dtype);
  return enqueueGrouped("all_gather", stream, [&](cudaStream_t s) -> absl::Status {
    if (evenShards(sizes))
      return check(ncclAllGather(in.data, out.data, static_cast<size_t>(sizes[0]), type, comm_, s),
                   absl::StrCat("ncclAllGather(", ir::toString(out.type), ")"), what_);
    for (int r = 0; r < size_; ++r) {
      char* to = static_cast<char*>(out.data) + shardOffset(sizes, r) * element;
      // sendbuff is read on the root only.
      RETURN_IF_ERROR(check(
          ncclBroadcast(in.data, to, static_cast<size_t>(sizes[static_cast<size_t>(r)]), type, r,
                        comm_, s),
          absl::StrCat("ncclBroadcast(shard of rank ", r, " of ", ir::toString(out.type), ")"),
          what_));
    }
    return absl::OkStatus();
  });
}

absl::Status NcclRank::broadcast(int root, const TensorView& in, const TensorView& out,
                                 Stream& stream) {
  if (root < 0 || root >= size_)
    return absl::InternalError(absl::StrCat(what_, ": broadcast from rank ", root));
  ASSIGN_OR_RETURN(CudaStream * s, cudaStreamOf(stream, gpu_, what_));
  CUDA_TRY(what_, cudaSetDevice(gpu_));
  ASSIGN_OR_RETURN(size_t watched, group_.beginCollective(local_, label("broadcast"), s->handle()));
  // As bytes: any dtype, and `in` is read on the root only.
  CUDA_TRY(what_, ncclBroadcast(in.data, out.data, static_cast<size_t>(out.bytes()), ncclUint8,
                                root, comm_, s->handle()));
  return group_.collectiveEnqueued(watched, s->handle());
}

// ---- Same process, devices sharing GPUs ------------------------------------------------

ReduceKind reduceKind(ReduceOp op) {
  return op == ReduceOp::kMax    ? ReduceKind::kMax
         : op == ReduceOp::kMean ? ReduceKind::kMean
                                 : ReduceKind::kSum;
}

ElementKind elementKind(ir::DType t) {
  switch (t) {
    case ir::DType::kBF16:
      return ElementKind::kBF16;
    case ir::DType::kF64:
      return ElementKind::kF64;
    case ir::DType::kI32:
      return ElementKind::kI32;
    case ir::DType::kI64:
      return ElementKind::kI64;
    case ir::DType::kF32:
      break;
  }
  return ElementKind::kF32;
}

/// One rank's call of a collective, kept until every rank has made it.
struct Posted {
  enum class Kind : uint8_t { kAllReduce, kBroadcast, kReduceScatter, kAllGather } kind;
  std::vector<TensorView> in, out;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  CudaStream* stream = nullptr;
  std::vector<int64_t> sizes;  // reduce_scatter, all_gather: each rank's shard
};

class SharedGroup;

class SharedRank final : public Communicator {
 public:
  SharedRank(SharedGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override;
  absl::Status allReduce(absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                         ReduceOp op, Stream& stream) override;
  absl::Status reduceScatter(const TensorView& in, const TensorView& out,
                             absl::Span<const int64_t> sizes, ReduceOp op, Stream& stream) override;
  absl::Status allGather(const TensorView& in, const TensorView& out,
                         absl::Span<const int64_t> sizes, Stream& stream) override;
  absl::Status broadcast(int root, const TensorView& in, const TensorView& out,
                         Stream& stream) override;

 private:
  SharedGroup& group_;
  int rank_;
};

class SharedGroup final : public CommunicatorGroup {
 public:
  static absl::StatusOr<std::unique_ptr<CommunicatorGroup>> create(std::vector<int> gpus,
                                                                   const std::string& what) {
    ASSIGN_OR_RETURN(TreePlan plan, treePlan(static_cast<int>(gpus.size())));
    std::unique_ptr<SharedGroup> g(new SharedGroup(std::move(gpus), plan, what));
    RETURN_IF_ERROR(g->init());
    return std::unique_ptr<CommunicatorGroup>(std::move(g));
  }

  ~SharedGroup() override {
    for (size_t r = 0; r < events_.size(); ++r) {
      if (events_[r] == nullptr) continue;
      cudaSetDevice(gpus_[r]);
      cudaEventDestroy(events_[r]);
    }
  }

  int size() const override { return static_cast<int>(gpus_.size()); }
  Communicator& rank(int r) override { return *ranks_[static_cast<size_t>(r)]; }
  absl::Status groupStart() override {
    ++depth_;
    return absl::OkStatus();
  }
  absl::Status groupEnd() override {
    if (depth_ == 0)
      return absl::InternalError(absl::StrCat(what_, ": groupEnd without groupStart"));
    --depth_;
    RETURN_IF_ERROR(flush());
    if (depth_ > 0) return absl::OkStatus();
    // A group brackets every rank's share of its collectives (the executor's): a share
    // still queued now had a partner whose enqueue failed. It is dropped, so that the next
    // step's collectives pair up again rather than with it.
    size_t left = 0;
    for (auto& q : queued_) left += std::exchange(q, {}).size();
    if (left == 0) return absl::OkStatus();
    return absl::InternalError(absl::StrCat(what_, ": ", left,
                                            " share(s) of a collective whose other ranks never "
                                            "came were dropped at the end of their group"));
  }

  absl::Status post(int rank, Posted p, Stream& stream) {
    const std::string where = absl::StrCat(what_, " rank ", rank);
    ASSIGN_OR_RETURN(p.stream, cudaStreamOf(stream, gpus_[static_cast<size_t>(rank)], where));
    queued_[static_cast<size_t>(rank)].push_back(std::move(p));
    return flush();
  }

 private:
  SharedGroup(std::vector<int> gpus, const TreePlan& plan, std::string what)
      : gpus_(std::move(gpus)), plan_(plan), what_(std::move(what)), queued_(gpus_.size()) {
    for (int r = 0; r < size(); ++r) ranks_.push_back(std::make_unique<SharedRank>(*this, r));
  }

  // Events (events_[0]: the first rank's "done", the others' "ready"), and peer access from
  // the first rank's GPU to every other GPU of the group.
  absl::Status init() {
    events_.assign(gpus_.size(), nullptr);
    for (size_t r = 0; r < gpus_.size(); ++r) {
      CUDA_TRY(what_, cudaSetDevice(gpus_[r]));
      CUDA_TRY(what_, cudaEventCreateWithFlags(&events_[r], cudaEventDisableTiming));
    }
    const int lead = gpus_[0];
    std::vector<int> peers;
    for (int g : gpus_)
      if (g != lead && std::find(peers.begin(), peers.end(), g) == peers.end()) peers.push_back(g);
    for (int g : peers) {
      int can = 0;
      CUDA_TRY(what_, cudaDeviceCanAccessPeer(&can, lead, g));
      if (can == 0)
        return absl::FailedPreconditionError(absl::StrCat(
            what_, ": GPU ", lead, " cannot access GPU ", g,
            "'s memory (no peer access), which devices that share GPUs reduce through; give "
            "every device a GPU of its own (NCCL) or put them all on one GPU"));
      CUDA_TRY(what_, cudaSetDevice(lead));
      const cudaError_t e = cudaDeviceEnablePeerAccess(g, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();  // not an error here; clear it for later checks
      else
        RETURN_IF_ERROR(check(e, "cudaDeviceEnablePeerAccess", what_));
    }
    return absl::OkStatus();
  }

  /// Runs every collective that all ranks have called, unless a group is open.
  absl::Status flush() {
    while (depth_ == 0) {
      size_t ready = queued_[0].size();
      for (const auto& q : queued_) ready = std::min(ready, q.size());
      if (ready == 0) return absl::OkStatus();
      // One fan-in and fan-out for the collectives whose ranks keep their streams.
      size_t batch = 1;
      while (batch < ready && std::all_of(queued_.begin(), queued_.end(), [&](const auto& q) {
               return q[batch].stream == q[0].stream;
             }))
        ++batch;
      std::vector<std::vector<Posted>> calls(queued_.size());
      for (size_t r = 0; r < queued_.size(); ++r)
        for (size_t c = 0; c < batch; ++c) {
          calls[r].push_back(std::move(queued_[r].front()));
          queued_[r].pop_front();
        }
      RETURN_IF_ERROR(run(calls, batch));
    }
    return absl::OkStatus();
  }

  /// The c-th collective of `calls` agrees across the ranks (else the executor and the
  /// graph disagree: an internal error naming both calls).
  absl::Status validate(const std::vector<std::vector<Posted>>& calls, size_t c) const {
    const Posted& first = calls[0][c];
    for (size_t r = 1; r < calls.size(); ++r) {
      const Posted& p = calls[r][c];
      bool same = p.kind == first.kind && p.in.size() == first.in.size() &&
                  p.out.size() == first.out.size();
      if (same && first.kind == Posted::Kind::kAllReduce) {
        same = p.op == first.op;
        for (size_t j = 0; same && j < p.in.size(); ++j)
          same = p.in[j].type == first.in[j].type && p.out[j].type == first.in[j].type;
      } else if (same && (first.kind == Posted::Kind::kReduceScatter ||
                          first.kind == Posted::Kind::kAllGather)) {
        // Each rank's call was checked against its sizes when it was posted.
        same = p.op == first.op && p.sizes == first.sizes &&
               p.in[0].type.dtype == first.in[0].type.dtype;
      } else if (same) {
        same = p.root == first.root && p.out[0].bytes() == first.out[0].bytes();
      }
      if (!same)
        return absl::InternalError(
            absl::StrCat(what_, ": rank ", r, "'s collective does not match rank 0's"));
    }
    if (first.kind == Posted::Kind::kReduceScatter || first.kind == Posted::Kind::kAllGather) {
      if (static_cast<int>(first.sizes.size()) != size())
        return absl::InternalError(
            absl::StrCat(what_, ": ", first.sizes.size(), " shard sizes for ", size(), " ranks"));
    } else if (first.kind == Posted::Kind::kAllReduce) {
      for (size_t j = 0; j < first.in.size(); ++j)
        if (!(first.out[j].type == first.in[j].type))
          return absl::InternalError(absl::StrCat(what_, ": all_reduce of ",
                                                  ir::toString(first.in[j].type), " into ",
                                                  ir::toString(first.out[j].type)));
    } else if (first.root < 0 || first.root >= size() ||
               calls[static_cast<size_t>(first.root)][c].in[0].bytes() != first.out[0].bytes()) {
      return absl::InternalError(
          absl::StrCat(what_, ": broadcast from rank ", first.root, " does not fit its outputs"));
    }
    return absl::OkStatus();
  }

  absl::Status run(const std::vector<std::vector<Posted>>& calls, size_t batch) {
    for (size_t c = 0; c < batch; ++c) RETURN_IF_ERROR(validate(calls, c));
    const size_t n = calls.size();
    cudaStream_t lead = calls[0][0].stream->handle();
    // Fan in: the first rank's stream waits until every rank's earlier work is done.
    for (size_t r = 1; r < n; ++r) {
      CUDA_TRY(what_, cudaSetDevice(gpus_[r]));
      CUDA_TRY(what_, cudaEventRecord(events_[r], calls[r][0].stream->handle()));
      CUDA_TRY(what_, cudaSetDevice(gpus_[0]));
      CUDA_TRY(what_, cudaStreamWaitEvent(lead, events_[r], 0));
    }
    CUDA_TRY(what_, cudaSetDevice(gpus_[0]));
    for (size_t c = 0; c < batch; ++c) {
      const Posted& first = calls[0][c];
      if (first.kind == Posted::Kind::kAllReduce) {
        for (size_t j = 0; j < first.in.size(); ++j) {
          const void* srcs[kMaxSharedRanks];
          void* dsts[kMaxSharedRanks];
          for (size_t r = 0; r < n; ++r) {
            srcs[r] = calls[r][c].in[j].data;
            dsts[r] = calls[r][c].out[j].data;
          }
          launchSharedAllReduce(plan_, reduceKind(first.op), elementKind(first.in[j].type.dtype),
                                srcs, dsts, first.in[j].numElements(), lead);
          CUDA_TRY(what_, cudaGetLastError());
        }
      } else if (first.kind == Posted::Kind::kReduceScatter) {
        // Each rank's shard: its slice of every rank's buffer, reduced in the tree order.
        const void* srcs[kMaxSharedRanks];
        for (size_t r = 0; r < n; ++r) srcs[r] = calls[r][c].in[0].data;
        for (size_t r = 0; r < n; ++r) {
          launchSharedReduceScatter(plan_, reduceKind(first.op),
                                    elementKind(first.in[0].type.dtype), srcs,
                                    shardOffset(first.sizes, static_cast<int>(r)),
                                    calls[r][c].out[0].data, first.sizes[r], lead);
          CUDA_TRY(what_, cudaGetLastError());
        }
      } else if (first.kind == Posted::Kind::kAllGather) {
        // Every rank's shard into every rank's buffer at the shard's offset.
        const int64_t element = ir::dtypeBytes(first.in[0].type.dtype);
        for (size_t r = 0; r < n; ++r)
          for (size_t q = 0; q < n; ++q) {
            const TensorView& shard = calls[q][c].in[0];
            char* to = static_cast<char*>(calls[r][c].out[0].data) +
                       shardOffset(first.sizes, static_cast<int>(q)) * element;
            if (to == shard.data) continue;
            CUDA_TRY(what_, cudaMemcpyAsync(to, shard.data, static_cast<size_t>(shard.bytes()),
                                            cudaMemcpyDefault, lead));
          }
      } else {
        const TensorView& src = calls[static_cast<size_t>(first.root)][c].in[0];
        for (size_t r = 0; r < n; ++r) {
          const TensorView& dst = calls[r][c].out[0];
          if (dst.data == src.data || dst.bytes() == 0) continue;
          CUDA_TRY(what_, cudaMemcpyAsync(dst.data, src.data, static_cast<size_t>(dst.bytes()),
                                          cudaMemcpyDefault, lead));
        }
      }
    }
    // Fan out: every other rank's stream waits for the results.
    if (n > 1) CUDA_TRY(what_, cudaEventRecord(events_[0], lead));
    for (size_t r = 1; r < n; ++r) {
      CUDA_TRY(what_, cudaSetDevice(gpus_[r]));
      CUDA_TRY(what_, cudaStreamWaitEvent(calls[r][0].stream->handle(), events_[0], 0));
    }
    return absl::OkStatus();
  }

  std::vector<int> gpus_;
  TreePlan plan_;
  std::string what_;
  std::vector<std::deque<Posted>> queued_;  // per rank, in call order
  std::vector<std::unique_ptr<SharedRank>> ranks_;
  std::vector<cudaEvent_t> events_;
  int depth_ = 0;
};

int SharedRank::size() const { return group_.size(); }

absl::Status SharedRank::allReduce(absl::Span<const TensorView> in,
                                   absl::Span<const TensorView> out, ReduceOp op, Stream& stream) {
  Posted p{
      Posted::Kind::kAllReduce, {in.begin(), in.end()}, {out.begin(), out.end()}, op, 0, nullptr};
  return group_.post(rank_, std::move(p), stream);
}

absl::Status SharedRank::reduceScatter(const TensorView& in, const TensorView& out,
                                       absl::Span<const int64_t> sizes, ReduceOp op,
                                       Stream& stream) {
  RETURN_IF_ERROR(checkShards(in, out, sizes, rank_, size(), "same-GPU group", "reduce_scatter"));
  Posted p{Posted::Kind::kReduceScatter, {in}, {out}, op, 0, nullptr, {sizes.begin(), sizes.end()}};
  return group_.post(rank_, std::move(p), stream);
}

absl::Status SharedRank::allGather(const TensorView& in, const TensorView& out,
                                   absl::Span<const int64_t> sizes, Stream& stream) {
  RETURN_IF_ERROR(checkShards(out, in, sizes, rank_, size(), "same-GPU group", "all_gather"));
  Posted p{Posted::Kind::kAllGather,    {in}, {out}, ReduceOp::kSum, 0, nullptr,
           {sizes.begin(), sizes.end()}};
  return group_.post(rank_, std::move(p), stream);
}

absl::Status SharedRank::broadcast(int root, const TensorView& in, const TensorView& out,
                                   Stream& stream) {
  Posted p{Posted::Kind::kBroadcast, {in}, {out}, ReduceOp::kSum, root, nullptr};
  return group_.post(rank_, std::move(p), stream);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CommunicatorGroup>> makeCommunicators(
    absl::Span<Device* const> group) {
  std::vector<int> gpus;
  std::vector<std::string> names;
  for (Device* d : group) {
    auto* cd = dynamic_cast<CudaDevice*>(d);
    if (cd == nullptr)
      return absl::InvalidArgumentError(absl::StrCat(
          ir::toString(d->id()), " is not a CUDA device: CUDA collectives join CUDA devices only"));
    gpus.push_back(cd->gpu());
    names.push_back(ir::toString(cd->id()));
  }
  if (gpus.empty()) return absl::InvalidArgumentError("a collective group without devices");
  std::vector<int> sorted = gpus;
  std::sort(sorted.begin(), sorted.end());
  const bool own_gpus = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
  const std::string what = absl::StrCat(own_gpus ? "NCCL group" : "same-GPU group", " (",
                                        absl::StrJoin(names, ", "), ")");
  if (own_gpus) return NcclGroup::create(std::move(gpus), std::move(names), what);
  return SharedGroup::create(std::move(gpus), what);
}

absl::StatusOr<ncclUniqueId> shareUniqueId(ProcessComm& processes, const std::string& what) {
  ncclUniqueId id{};
  if (processes.rank() == 0) CUDA_TRY(what, ncclGetUniqueId(&id));
  RETURN_IF_ERROR(processes.broadcast(&id, sizeof id, /*root=*/0,
                                      {absl::StrCat("the NCCL unique id of ", what),
                                       "the host thread"}));
  return id;
}

absl::StatusOr<std::unique_ptr<CommunicatorGroup>> makeProcessCommunicators(
    absl::Span<Device* const> local, absl::Span<const ir::Device> members,
    std::shared_ptr<ProcessComm> processes) {
  std::vector<int> gpus, ranks;
  std::vector<std::string> names;
  for (const ir::Device& m : members)
    if (m.kind != targetInfo().kind)
      return absl::InvalidArgumentError(absl::StrCat(
          ir::toString(m), " is not a CUDA device: NCCL joins CUDA devices only"));
  for (Device* d : local) {
    auto* cd = dynamic_cast<CudaDevice*>(d);
    if (cd == nullptr)
      return absl::InvalidArgumentError(absl::StrCat(
          ir::toString(d->id()), " is not a CUDA device: NCCL joins CUDA devices only"));
    const auto at = std::find(members.begin(), members.end(), cd->id());
    if (at == members.end())
      return absl::InternalError(
          absl::StrCat(ir::toString(cd->id()), " is not a member of its collective group"));
    gpus.push_back(cd->gpu());
    ranks.push_back(static_cast<int>(at - members.begin()));
    names.push_back(ir::toString(cd->id()));
  }
  if (gpus.empty()) return absl::InvalidArgumentError("a collective group without devices here");
  // NCCL takes one rank per GPU, across processes too; this process can check its own.
  std::vector<int> sorted = gpus;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    return absl::InvalidArgumentError(absl::StrCat(
        absl::StrJoin(names, ", "), " share a GPU: across processes NCCL takes one rank per GPU "
        "(give each process's devices GPUs of their own)"));
  std::vector<std::string> all;
  for (const ir::Device& m : members) all.push_back(ir::toString(m));
  const std::string what = absl::StrCat("NCCL group (", absl::StrJoin(all, ", "), ")");
  return NcclGroup::createAcrossProcesses(std::move(gpus), std::move(names), std::move(ranks),
                                          static_cast<int>(members.size()), *processes, what);
}

}  // namespace tandem::backend::cuda
