#include "backend/cpu/local_communicator.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "backend/bf16.h"
#include "backend/cpu/cpu_stream.h"
#include "backend/reduction_tree.h"
#include "backend/shards.h"
#include "ir/status_macros.h"

namespace tandem::backend::cpu {
namespace {

// Elements [lo, hi) of the srcs reduced in the tree order, written to every dst at
// [lo - shift, hi - shift) (shift: where a reduce_scatter's shard starts; 0 for all_reduce).
template <typename T>
void reduceRange(const std::vector<const T*>& srcs, const std::vector<T*>& dsts, int64_t lo,
                 int64_t hi, ReduceOp op, int64_t shift = 0) {
  using A = Accumulator<T>;
  constexpr int64_t kChunk = kReduceChunk;
  A acc[kChunk];
  T result[kChunk];
  const int ranks = static_cast<int>(srcs.size());
  for (int64_t first = lo; first < hi; first += kChunk) {
    const int64_t n = std::min(kChunk, hi - first);
    treeReduceChunk(srcs, 0, srcs.size(), first, n, op, acc);
    if (op == ReduceOp::kMean)
      for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<A>(acc[i] / static_cast<A>(ranks));
    for (int64_t i = 0; i < n; ++i) result[i] = static_cast<T>(acc[i]);
    for (T* d : dsts) std::memcpy(d + (first - shift), result, static_cast<size_t>(n) * sizeof(T));
  }
}

// What every rank of a group shares: the posted buffers and a reusable barrier.
class Clique {
 public:
  explicit Clique(int size) : size_(size), posted_(static_cast<size_t>(size)) {}
  int size() const { return size_; }

  struct Posted {
    absl::Span<const TensorView> in, out;
    const TensorView* one = nullptr;
    const TensorView* one_out = nullptr;
  };
  Posted& posted(int rank) { return posted_[static_cast<size_t>(rank)]; }

  void arriveAndWait() {
    std::unique_lock<std::mutex> l(mu_);
    uint64_t gen = generation_;
    if (++waiting_ == size_) {
      waiting_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(l, [&] { return generation_ != gen; });
  }

  // This rank's share of an all_reduce, run on its comm stream's worker.
  void allReduce(int rank, absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                 ReduceOp op) {
    posted(rank) = {in, out, nullptr};
    arriveAndWait();
    // The k tensors form one index space; rank r reduces the r-th share of it for everyone.
    int64_t total = 0;
    for (const TensorView& t : in) total += t.numElements();
    const int64_t lo = total * rank / size_, hi = total * (rank + 1) / size_;
    int64_t base = 0;
    for (size_t j = 0; j < in.size(); ++j) {
      const int64_t n = in[j].numElements();
      const int64_t a = std::max(lo, base) - base, b = std::min(hi, base + n) - base;
      base += n;
      if (a >= b) continue;
      byElementType(in[j].type.dtype, [&](auto zero) {
        using T = decltype(zero);
        std::vector<const T*> srcs;
        std::vector<T*> dsts;
        for (const Posted& p : posted_) {
          srcs.push_back(static_cast<const T*>(p.in[j].data));
          dsts.push_back(static_cast<T*>(p.out[j].data));
        }
        reduceRange<T>(srcs, dsts, a, b, op);
      });
    }
    arriveAndWait();
  }

  // This rank's share of a reduce_scatter: it reduces its own shard, element by element
  // as allReduce does (the same tree, the same accumulator), so the shard is the bits of
  // that slice of the all_reduce.
  void reduceScatter(int rank, const TensorView& in, const TensorView& out,
                     const std::vector<int64_t>& sizes, ReduceOp op) {
    posted(rank) = {{}, {}, &in, &out};
    arriveAndWait();
    const int64_t lo = shardOffset(sizes, rank), hi = lo + sizes[static_cast<size_t>(rank)];
    byElementType(in.type.dtype, [&](auto zero) {
      using T = decltype(zero);
      std::vector<const T*> srcs;
      for (const Posted& p : posted_) srcs.push_back(static_cast<const T*>(p.one->data));
      reduceRange<T>(srcs, {static_cast<T*>(out.data)}, lo, hi, op, /*shift=*/lo);
    });
    arriveAndWait();  // the others may still read this rank's buffer until here
  }

  // This rank's share of an all_gather: it copies every rank's shard into its own buffer.
  void allGather(int rank, const TensorView& in, const TensorView& out,
                 const std::vector<int64_t>& sizes) {
    posted(rank) = {{}, {}, &in, &out};
    arriveAndWait();
    const int64_t element = ir::dtypeBytes(in.type.dtype);
    char* dst = static_cast<char*>(out.data);
    for (int q = 0; q < size_; ++q) {
      const void* src = posted(q).one->data;
      char* to = dst + shardOffset(sizes, q) * element;
      if (to != src)
        std::memcpy(to, src, static_cast<size_t>(sizes[static_cast<size_t>(q)] * element));
    }
    arriveAndWait();
  }

  void broadcast(int rank, int root, const TensorView& in, const TensorView& out) {
    posted(rank).one = &in;
    arriveAndWait();
    const TensorView& src = *posted(root).one;
    if (out.data != src.data) std::memcpy(out.data, src.data, static_cast<size_t>(out.bytes()));
    arriveAndWait();
  }

 private:
  int size_;
  std::vector<Posted> posted_;
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  uint64_t generation_ = 0;
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<Clique> clique, int rank)
      : clique_(std::move(clique)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return clique_->size(); }

  absl::Status allReduce(absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                         ReduceOp op, Stream& stream) override {
    return enqueue(stream, [c = clique_, r = rank_, in, out, op] { c->allReduce(r, in, out, op); });
  }
  absl::Status reduceScatter(const TensorView& in, const TensorView& out,
                             absl::Span<const int64_t> sizes, ReduceOp op,
                             Stream& stream) override {
    RETURN_IF_ERROR(
        checkShards(in, out, sizes, rank_, size(), "local communicator", "reduce_scatter"));
    return enqueue(stream, [c = clique_, r = rank_, in, out, op,
                            sizes = std::vector<int64_t>(sizes.begin(), sizes.end())] {
      c->reduceScatter(r, in, out, sizes, op);
    });
  }
  absl::Status allGather(const TensorView& in, const TensorView& out,
                         absl::Span<const int64_t> sizes, Stream& stream) override {
    RETURN_IF_ERROR(checkShards(out, in, sizes, rank_, size(), "local communicator", "all_gather"));
    return enqueue(stream, [c = clique_, r = rank_, in, out,
                            sizes = std::vector<int64_t>(sizes.begin(), sizes.end())] {
      c->allGather(r, in, out, sizes);
    });
  }
  absl::Status broadcast(int root, const TensorView& in, const TensorView& out,
                         Stream& stream) override {
    return enqueue(stream,
                   [c = clique_, r = rank_, root, in, out] { c->broadcast(r, root, in, out); });
  }

 private:
  template <typename Fn>
  absl::Status enqueue(Stream& stream, Fn fn) {
    return CpuStream::enqueueOn(stream, [fn = std::move(fn)] {
      fn();
      return absl::OkStatus();
    });
  }

  std::shared_ptr<Clique> clique_;
  int rank_;
};

class LocalGroup final : public CommunicatorGroup {
 public:
  explicit LocalGroup(int size) {
    auto clique = std::make_shared<Clique>(size);
    for (int r = 0; r < size; ++r) ranks_.push_back(std::make_unique<LocalCommunicator>(clique, r));
  }
  int size() const override { return static_cast<int>(ranks_.size()); }
  Communicator& rank(int r) override { return *ranks_[static_cast<size_t>(r)]; }
  // Enqueueing never blocks the host here: one thread can issue every rank's share.
  absl::Status groupStart() override { return absl::OkStatus(); }
  absl::Status groupEnd() override { return absl::OkStatus(); }

 private:
  std::vector<std::unique_ptr<LocalCommunicator>> ranks_;
};

}  // namespace

std::unique_ptr<CommunicatorGroup> makeLocalCommunicators(int size) {
  return std::make_unique<LocalGroup>(size);
}

double treeReduce(absl::Span<const double> ranks, ReduceOp op) {
  std::vector<const double*> srcs;
  for (const double& v : ranks) srcs.push_back(&v);
  double out = 0;
  treeReduceChunk<double>(srcs, 0, srcs.size(), 0, 1, op, &out);
  if (op == ReduceOp::kMean) out /= static_cast<double>(ranks.size());
  return out;
}

}  // namespace tandem::backend::cpu
