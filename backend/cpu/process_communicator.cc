#include "backend/cpu/process_communicator.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <numeric>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "backend/bf16.h"
#include "backend/cpu/cpu_stream.h"
#include "backend/reduction_tree.h"
#include "backend/shards.h"
#include "ir/status_macros.h"

namespace tandem::backend::cpu {
namespace {

// The local communicator's tree (reduction_tree.h) over two kinds of leaves: ranks'
// tensors (a process's own subtrees) and gathered subtree sums (the rest of the tree).
constexpr int64_t kChunk = kReduceChunk;

// A subtree of the group's tree whose ranks one process owns.
struct Block {
  size_t lo, hi;
  int owner;
};

void decompose(const std::vector<int>& owner, size_t lo, size_t hi, std::vector<Block>& out) {
  bool one = true;
  for (size_t p = lo + 1; p < hi && one; ++p) one = owner[p] == owner[lo];
  if (one) {
    out.push_back({lo, hi, owner[lo]});
    return;
  }
  const size_t mid = lo + treeSplit(hi - lo);
  decompose(owner, lo, mid, out);
  decompose(owner, mid, hi, out);
}

// out[0, n) = the tree over ranks [lo, hi) where the blocks' sums are given: `sum(b)` is
// block b's partial sums (at [first, first + n)), `block_at` finds the block starting at a
// rank. A block is a node of the tree, so the recursion meets each whole.
template <typename A, typename SumOf>
void treeOverBlocks(const std::vector<Block>& blocks, const std::vector<int>& block_at, size_t lo,
                    size_t hi, int64_t n, ReduceOp op, const SumOf& sum, A* out) {
  const int b = block_at[lo];
  if (b >= 0 && blocks[static_cast<size_t>(b)].hi == hi) {
    const A* s = sum(b);
    std::memcpy(out, s, static_cast<size_t>(n) * sizeof(A));
    return;
  }
  const size_t mid = lo + treeSplit(hi - lo);
  A right[kChunk];
  treeOverBlocks(blocks, block_at, lo, mid, n, op, sum, out);
  treeOverBlocks(blocks, block_at, mid, hi, n, op, sum, right);
  for (int64_t i = 0; i < n; ++i) out[i] = combine(out[i], right[i], op);
}

int64_t accumulatorBytes(ir::DType t) {
  switch (t) {
    case ir::DType::kF64:
    case ir::DType::kI64:
      return 8;
    case ir::DType::kI32:
    case ir::DType::kBF16:  // summed in f32
    case ir::DType::kF32:
      return 4;
  }
  return 8;
}

class Shared {
 public:
  Shared(std::vector<int> owner, std::vector<int> local, std::vector<std::string> names,
         std::shared_ptr<ProcessComm> comm)
      : owner_(std::move(owner)),
        local_(std::move(local)),
        names_(std::move(names)),
        comm_(std::move(comm)),
        posted_(local_.size()),
        local_of_(owner_.size(), -1),
        block_at_(owner_.size(), -1) {
    for (size_t i = 0; i < local_.size(); ++i)
      local_of_[static_cast<size_t>(local_[i])] = static_cast<int>(i);
    decompose(owner_, 0, owner_.size(), blocks_);
    blocks_of_.assign(static_cast<size_t>(comm_->size()), 0);
    for (size_t b = 0; b < blocks_.size(); ++b) {
      block_at_[blocks_[b].lo] = static_cast<int>(b);
      slot_.push_back(blocks_of_[static_cast<size_t>(blocks_[b].owner)]++);
      if (blocks_[b].owner == comm_->rank()) mine_.push_back(b);
    }
    first_slot_.assign(blocks_of_.size(), 0);
    for (size_t q = 1; q < blocks_of_.size(); ++q)
      first_slot_[q] = first_slot_[q - 1] + blocks_of_[q - 1];
  }

  int groupSize() const { return static_cast<int>(owner_.size()); }
  int localSize() const { return static_cast<int>(local_.size()); }
  int position(int i) const { return local_[static_cast<size_t>(i)]; }

  void allReduce(int me, absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                 ReduceOp op, const std::string& label) {
    int64_t total = 0;
    for (const TensorView& t : in) total += t.numElements();
    const int64_t lo = total * me / localSize(), hi = total * (me + 1) / localSize();
    reduce(
        me, in, out, op, label,
        [&](const WaitLabel& wait) {
          // Every process gets every block's sums.
          std::vector<int64_t> counts;
          for (int64_t k : blocks_of_) counts.push_back(k * block_bytes_);
          return comm_->allGather(send_.data(), recv_.data(), counts, wait);
        },
        [&] {
          // Every local member finishes a share of the index space for all of them.
          forRange(in, lo, hi, [&](size_t j, int64_t a, int64_t b) {
            std::vector<void*> outs;
            for (const Posted& p : posted_) outs.push_back(p.out[j].data);
            finish(j, a, b, op, outs, /*shift=*/0);
          });
        });
  }

  // A reduce_scatter reduces as the all_reduce does, but each process receives only the
  // block sums over its own devices' shards (MPI_Alltoallv: 1/P of what the all_reduce's
  // exchange brings in), and each local member finishes its shard from them: the same
  // tree over the same sums, so the all_reduce's bits for that slice.
  void reduceScatter(int me, const TensorView& in, const TensorView& out,
                     const std::vector<int64_t>& sizes, ReduceOp op, const std::string& label) {
    const int pos = position(me);
    const int64_t size = sizes[static_cast<size_t>(pos)];
    reduce(
        me, absl::MakeConstSpan(&in, 1), absl::MakeConstSpan(&out, 1), op, label,
        [&](const WaitLabel& wait) { return exchangeShards(sizes, wait); },
        [&] { finishShard(me, size, op, out.data); });
  }

  // Every process packs its members' shards (ascending positions), MPI_Allgatherv carries
  // them to all, and each local member copies the group's shards into its buffer in
  // position order.
  void allGather(int me, const TensorView& in, const TensorView& out,
                 const std::vector<int64_t>& sizes, const std::string& label) {
    posted_[static_cast<size_t>(me)] = {{}, {}, &in, &out};
    const WaitLabel wait{label, names_[0]};
    const int64_t element = ir::dtypeBytes(in.type.dtype);
    // Where each position's shard sits in the gathered bytes: by process, then position.
    std::vector<int64_t> counts(static_cast<size_t>(comm_->size()), 0), at(owner_.size(), 0);
    for (size_t p = 0; p < owner_.size(); ++p)
      counts[static_cast<size_t>(owner_[p])] += sizes[p] * element;
    std::vector<int64_t> start(counts.size(), 0);
    for (size_t q = 1; q < counts.size(); ++q) start[q] = start[q - 1] + counts[q - 1];
    for (size_t p = 0; p < owner_.size(); ++p) {
      int64_t& next = start[static_cast<size_t>(owner_[p])];
      at[p] = next;
      next += sizes[p] * element;
    }
    if (me == 0) Processes::current().beginWait(wait);
    arriveAndWait();
    if (me == 0) {
      const int64_t mine = counts[static_cast<size_t>(comm_->rank())];
      send_.resize(static_cast<size_t>(mine));
      int64_t put = 0;
      for (const Posted& p : posted_) {  // local members in ascending position order
        std::memcpy(send_.data() + put, p.one_in->data, static_cast<size_t>(p.one_in->bytes()));
        put += p.one_in->bytes();
      }
      recv_.resize(static_cast<size_t>(std::accumulate(counts.begin(), counts.end(), int64_t{0})));
      absl::Status s = comm_->allGather(send_.data(), recv_.data(), counts, wait);
      if (!s.ok()) Processes::current().abortAll(std::string(s.message()));
    }
    arriveAndWait();
    char* dst = static_cast<char*>(out.data);
    for (size_t p = 0; p < owner_.size(); ++p)
      std::memcpy(dst + shardOffset(sizes, static_cast<int>(p)) * element, recv_.data() + at[p],
                  static_cast<size_t>(sizes[p] * element));
    arriveAndWait();  // recv_ stays until every member has copied out of it
    if (me == 0) Processes::current().endWait();
  }

  void broadcast(int me, int root, const TensorView& in, const TensorView& out,
                 const std::string& label) {
    posted_[static_cast<size_t>(me)] = {{}, {}, &in, &out};
    const WaitLabel wait{label, names_[0]};
    if (me == 0) Processes::current().beginWait(wait);
    arriveAndWait();
    const int root_local = local_of_[static_cast<size_t>(root)];
    const void* src = root_local >= 0 ? posted_[static_cast<size_t>(root_local)].one_in->data
                                      : posted_[0].one_out->data;
    if (me == 0) {
      // MPI_Bcast sends from the root's buffer and writes only on the others.
      absl::Status s = comm_->broadcast(const_cast<void*>(src), out.bytes(),
                                        owner_[static_cast<size_t>(root)], wait);
      if (!s.ok()) Processes::current().abortAll(std::string(s.message()));
    }
    arriveAndWait();
    if (out.data != src) std::memcpy(out.data, src, static_cast<size_t>(out.bytes()));
    arriveAndWait();
    if (me == 0) Processes::current().endWait();
  }

 private:
  struct Posted {
    absl::Span<const TensorView> in, out;
    const TensorView *one_in, *one_out;
  };

  // The reduction both all_reduce and reduce_scatter make: the local members reduce this
  // process's subtrees over the k tensors (into send_), the first member's worker
  // exchanges the subtree sums with the other processes (`exchange`), and `finish_mine`
  // (every member) adds them up the tree for the part it writes.
  template <typename Exchange, typename FinishMine>
  void reduce(int me, absl::Span<const TensorView> in, absl::Span<const TensorView> out,
              ReduceOp op, const std::string& label, const Exchange& exchange,
              const FinishMine& finish_mine) {
    posted_[static_cast<size_t>(me)] = {in, out, nullptr, nullptr};
    const WaitLabel wait{label, names_[0]};
    if (me == 0) {
      // The whole collective is the wait the watchdog bounds, local rendezvous included.
      Processes::current().beginWait(wait);
      layout(in);
    }
    arriveAndWait();
    int64_t total = 0;
    for (const TensorView& t : in) total += t.numElements();
    const int64_t lo = total * me / localSize(), hi = total * (me + 1) / localSize();
    forRange(in, lo, hi, [&](size_t j, int64_t a, int64_t b) { partials(j, a, b, op); });
    arriveAndWait();
    if (me == 0) {
      absl::Status s = exchange(wait);
      if (!s.ok()) Processes::current().abortAll(std::string(s.message()));
    }
    arriveAndWait();
    finish_mine();
    arriveAndWait();
    if (me == 0) Processes::current().endWait();
  }

  void arriveAndWait() {
    std::unique_lock<std::mutex> l(mu_);
    const uint64_t gen = generation_;
    if (++waiting_ == localSize()) {
      waiting_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(l, [&] { return generation_ != gen; });
  }

  // Where each tensor's sums sit in a block's slot (8-byte aligned), and the buffers.
  void layout(absl::Span<const TensorView> in) {
    offsets_.clear();
    int64_t at = 0;
    for (const TensorView& t : in) {
      offsets_.push_back(at);
      at += (t.numElements() * accumulatorBytes(t.type.dtype) + 7) / 8 * 8;
    }
    block_bytes_ = at;
    send_.resize(static_cast<size_t>(block_bytes_) * mine_.size());
    recv_.resize(static_cast<size_t>(block_bytes_) * blocks_.size());
  }

  // Calls fn(j, a, b) for the part [a, b) of tensor j that the range [lo, hi) of the k
  // tensors' joint index space covers.
  template <typename Fn>
  static void forRange(absl::Span<const TensorView> in, int64_t lo, int64_t hi, const Fn& fn) {
    int64_t base = 0;
    for (size_t j = 0; j < in.size(); ++j) {
      const int64_t n = in[j].numElements();
      const int64_t a = std::max(lo, base) - base, b = std::min(hi, base + n) - base;
      base += n;
      if (a < b) fn(j, a, b);
    }
  }

  // This process's blocks' sums of tensor j over [a, b), into the send buffer.
  void partials(size_t j, int64_t a, int64_t b, ReduceOp op) {
    byElementType(posted_[0].in[j].type.dtype, [&](auto zero) {
      using T = decltype(zero);
      using A = Accumulator<T>;
      std::vector<const T*> srcs(owner_.size(), nullptr);
      for (size_t i = 0; i < posted_.size(); ++i)
        srcs[static_cast<size_t>(local_[i])] = static_cast<const T*>(posted_[i].in[j].data);
      for (size_t m = 0; m < mine_.size(); ++m) {
        const Block& blk = blocks_[mine_[m]];
        A* dst = reinterpret_cast<A*>(send_.data() + static_cast<int64_t>(m) * block_bytes_ +
                                      offsets_[j]);
        for (int64_t first = a; first < b; first += kChunk)
          treeReduceChunk<T, A>(srcs, blk.lo, blk.hi, first, std::min(kChunk, b - first), op,
                                dst + first);
      }
    });
  }

  // The group's result for tensor j over [a, b), from the gathered block sums, into `outs`
  // at [a - shift, b - shift).
  void finish(size_t j, int64_t a, int64_t b, ReduceOp op, const std::vector<void*>& outs,
              int64_t shift) {
    byElementType(posted_[0].in[j].type.dtype, [&](auto zero) {
      using T = decltype(zero);
      using A = Accumulator<T>;
      const int ranks = groupSize();
      A acc[kChunk];
      T result[kChunk];
      for (int64_t first = a; first < b; first += kChunk) {
        const int64_t n = std::min(kChunk, b - first);
        auto sum = [&](int blk) {
          const size_t q = static_cast<size_t>(blocks_[static_cast<size_t>(blk)].owner);
          const int64_t slot = first_slot_[q] + slot_[static_cast<size_t>(blk)];
          return reinterpret_cast<const A*>(recv_.data() + slot * block_bytes_ + offsets_[j]) +
                 first;
        };
        treeOverBlocks<A>(blocks_, block_at_, 0, owner_.size(), n, op, sum, acc);
        if (op == ReduceOp::kMean)
          for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<A>(acc[i] / static_cast<A>(ranks));
        for (int64_t i = 0; i < n; ++i) result[i] = static_cast<T>(acc[i]);
        for (void* o : outs)
          std::memcpy(static_cast<T*>(o) + (first - shift), result,
                      static_cast<size_t>(n) * sizeof(T));
      }
    });
  }

  // reduce_scatter's exchange (the first member's worker): to each process, this
  // process's block sums over that process's devices' shards, per block (in block order)
  // the shards in position order; from each, its block sums over this process's shards.
  absl::Status exchangeShards(const std::vector<int64_t>& sizes, const WaitLabel& wait) {
    const int64_t abytes = accumulatorBytes(posted_[0].in[0].type.dtype);
    const size_t processes = static_cast<size_t>(comm_->size());
    std::vector<std::vector<size_t>> positions_of(processes);
    for (size_t p = 0; p < owner_.size(); ++p)
      positions_of[static_cast<size_t>(owner_[p])].push_back(p);
    auto elements_of = [&](size_t q) {
      int64_t n = 0;
      for (size_t p : positions_of[q]) n += sizes[p];
      return n;
    };
    mine_elements_ = elements_of(static_cast<size_t>(comm_->rank()));
    std::vector<int64_t> send_counts, recv_counts;
    recv_at_.assign(processes, 0);
    for (size_t q = 0; q < processes; ++q) {
      send_counts.push_back(static_cast<int64_t>(mine_.size()) * elements_of(q) * abytes);
      recv_counts.push_back(blocks_of_[q] * mine_elements_ * abytes);
      if (q > 0) recv_at_[q] = recv_at_[q - 1] + recv_counts[q - 1];
    }
    pack_.resize(
        static_cast<size_t>(std::accumulate(send_counts.begin(), send_counts.end(), int64_t{0})));
    char* at = pack_.data();
    for (size_t q = 0; q < processes; ++q)
      for (size_t m = 0; m < mine_.size(); ++m)
        for (size_t p : positions_of[q]) {
          const int64_t bytes = sizes[p] * abytes;
          std::memcpy(at,
                      send_.data() + static_cast<int64_t>(m) * block_bytes_ +
                          shardOffset(sizes, static_cast<int>(p)) * abytes,
                      static_cast<size_t>(bytes));
          at += bytes;
        }
    recv_.resize(static_cast<size_t>(recv_at_.back() + recv_counts.back()));
    return comm_->allToAll(pack_.data(), send_counts, recv_.data(), recv_counts, wait);
  }

  // Local member `me`'s shard (`size` elements) from the exchanged block sums, up the rest
  // of the tree, into `out`.
  void finishShard(int me, int64_t size, ReduceOp op, void* out) {
    // Where this member's shard starts among this process's shards (ascending positions).
    int64_t within = 0;
    for (int i = 0; i < me; ++i) within += posted_[static_cast<size_t>(i)].out[0].numElements();
    byElementType(posted_[0].in[0].type.dtype, [&](auto zero) {
      using T = decltype(zero);
      using A = Accumulator<T>;
      const int ranks = groupSize();
      A acc[kChunk];
      T result[kChunk];
      for (int64_t first = 0; first < size; first += kChunk) {
        const int64_t n = std::min(kChunk, size - first);
        auto sum = [&](int blk) {
          const size_t q = static_cast<size_t>(blocks_[static_cast<size_t>(blk)].owner);
          return reinterpret_cast<const A*>(recv_.data() + recv_at_[q] +
                                            slot_[static_cast<size_t>(blk)] * mine_elements_ *
                                                static_cast<int64_t>(sizeof(A))) +
                 within + first;
        };
        treeOverBlocks<A>(blocks_, block_at_, 0, owner_.size(), n, op, sum, acc);
        if (op == ReduceOp::kMean)
          for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<A>(acc[i] / static_cast<A>(ranks));
        for (int64_t i = 0; i < n; ++i) result[i] = static_cast<T>(acc[i]);
        std::memcpy(static_cast<T*>(out) + first, result, static_cast<size_t>(n) * sizeof(T));
      }
    });
  }

  const std::vector<int> owner_, local_;
  const std::vector<std::string> names_;
  std::shared_ptr<ProcessComm> comm_;
  std::vector<Posted> posted_;
  std::vector<int> local_of_;  // position -> local member, or -1
  std::vector<Block> blocks_;
  std::vector<int> block_at_;       // position -> the block starting there, or -1
  std::vector<int64_t> slot_;       // block -> its index among its owner's blocks
  std::vector<int64_t> blocks_of_;  // process -> its block count
  std::vector<int64_t> first_slot_;
  std::vector<size_t> mine_;  // this process's blocks
  std::vector<int64_t> offsets_;
  int64_t block_bytes_ = 0;
  std::vector<char> send_, recv_;
  // reduce_scatter: the packed messages, where each process's message starts in recv_,
  // and how many elements this process's shards hold.
  std::vector<char> pack_;
  std::vector<int64_t> recv_at_;
  int64_t mine_elements_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  uint64_t generation_ = 0;
};

class ProcessCommunicator final : public Communicator {
 public:
  ProcessCommunicator(std::shared_ptr<Shared> shared, int me)
      : shared_(std::move(shared)), me_(me) {}
  int rank() const override { return shared_->position(me_); }
  int size() const override { return shared_->groupSize(); }
  void labelNext(std::string label) override { label_ = std::move(label); }

  absl::Status allReduce(absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                         ReduceOp op, Stream& stream) override {
    return CpuStream::enqueueOn(
        stream, [s = shared_, me = me_, in, out, op, label = std::move(label_)] {
          s->allReduce(me, in, out, op, label.empty() ? "all_reduce" : label);
          return absl::OkStatus();
        });
  }
  absl::Status reduceScatter(const TensorView& in, const TensorView& out,
                             absl::Span<const int64_t> sizes, ReduceOp op,
                             Stream& stream) override {
    RETURN_IF_ERROR(
        checkShards(in, out, sizes, rank(), size(), "process communicator", "reduce_scatter"));
    return CpuStream::enqueueOn(
        stream, [s = shared_, me = me_, in, out, op, label = std::move(label_),
                 sizes = std::vector<int64_t>(sizes.begin(), sizes.end())] {
          s->reduceScatter(me, in, out, sizes, op, label.empty() ? "reduce_scatter" : label);
          return absl::OkStatus();
        });
  }
  absl::Status allGather(const TensorView& in, const TensorView& out,
                         absl::Span<const int64_t> sizes, Stream& stream) override {
    RETURN_IF_ERROR(
        checkShards(out, in, sizes, rank(), size(), "process communicator", "all_gather"));
    return CpuStream::enqueueOn(stream, [s = shared_, me = me_, in, out, label = std::move(label_),
                                         sizes = std::vector<int64_t>(sizes.begin(), sizes.end())] {
      s->allGather(me, in, out, sizes, label.empty() ? "all_gather" : label);
      return absl::OkStatus();
    });
  }
  absl::Status broadcast(int root, const TensorView& in, const TensorView& out,
                         Stream& stream) override {
    return CpuStream::enqueueOn(stream, [s = shared_, me = me_, root, in, out, label = label_] {
      s->broadcast(me, root, in, out, label.empty() ? "broadcast" : label);
      return absl::OkStatus();
    });
  }

 private:
  std::shared_ptr<Shared> shared_;
  int me_;
  std::string label_;
};

class ProcessGroup final : public CommunicatorGroup {
 public:
  explicit ProcessGroup(std::shared_ptr<Shared> shared) {
    for (int i = 0; i < shared->localSize(); ++i)
      ranks_.push_back(std::make_unique<ProcessCommunicator>(shared, i));
  }
  int size() const override { return static_cast<int>(ranks_.size()); }
  Communicator& rank(int r) override { return *ranks_[static_cast<size_t>(r)]; }
  // Enqueueing never blocks the host: one thread issues every local member's share.
  absl::Status groupStart() override { return absl::OkStatus(); }
  absl::Status groupEnd() override { return absl::OkStatus(); }

 private:
  std::vector<std::unique_ptr<ProcessCommunicator>> ranks_;
};

}  // namespace

std::unique_ptr<CommunicatorGroup> makeProcessCommunicators(std::vector<int> owner,
                                                            std::vector<int> local,
                                                            std::vector<std::string> names,
                                                            std::shared_ptr<ProcessComm> comm) {
  return std::make_unique<ProcessGroup>(std::make_shared<Shared>(
      std::move(owner), std::move(local), std::move(names), std::move(comm)));
}

}  // namespace tandem::backend::cpu
