#include "runtime/local_communicator.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace tandem::runtime {
namespace {

template <typename T>
void reduceRange(const std::vector<const TensorView*>& ins, const std::vector<T*>& outs, int64_t lo,
                 int64_t hi, ReduceOp op, int ranks) {
  for (int64_t e = lo; e < hi; ++e) {
    T acc = static_cast<const T*>(ins[0]->data)[e];
    for (int r = 1; r < ranks; ++r) {
      T v = static_cast<const T*>(ins[static_cast<size_t>(r)]->data)[e];
      acc = op == ReduceOp::kMax ? std::max(acc, v) : acc + v;
    }
    if (op == ReduceOp::kMean) acc = static_cast<T>(acc / static_cast<T>(ranks));
    for (int r = 0; r < ranks; ++r) outs[static_cast<size_t>(r)][e] = acc;
  }
}

}  // namespace

void copySlice(const TensorView& whole, const TensorView& part, int axis, int64_t offset,
               bool into_whole) {
  const auto& ws = whole.type.shape;
  int64_t outer = 1, inner = ir::dtypeBytes(whole.type.dtype);
  for (int i = 0; i < axis; ++i) outer *= ws[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(axis) + 1; i < ws.size(); ++i) inner *= ws[i];
  const int64_t whole_rows = ws[static_cast<size_t>(axis)], part_rows = part.dim(axis);
  auto* w = static_cast<char*>(whole.data);
  auto* p = static_cast<char*>(part.data);
  for (int64_t o = 0; o < outer; ++o) {
    char* wrow = w + (o * whole_rows + offset) * inner;
    char* prow = p + o * part_rows * inner;
    size_t bytes = static_cast<size_t>(part_rows * inner);
    if (into_whole) {
      std::memcpy(wrow, prow, bytes);
    } else {
      std::memcpy(prow, wrow, bytes);
    }
  }
}

LocalCommunicator::LocalCommunicator(int size) : size_(size), posted_(static_cast<size_t>(size)) {}

void LocalCommunicator::arriveAndWait() {
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

void LocalCommunicator::allReduce(int rank, absl::Span<const TensorView> in,
                                  absl::Span<const TensorView> out, ReduceOp op) {
  posted_[static_cast<size_t>(rank)] = {in, out};
  arriveAndWait();
  // The k tensors form one index space; rank r reduces the r-th share of it for everyone.
  int64_t total = 0;
  for (const TensorView& t : in) total += t.numElements();
  const int64_t lo = total * rank / size_, hi = total * (rank + 1) / size_;
  int64_t base = 0;
  std::vector<const TensorView*> ins(static_cast<size_t>(size_));
  for (size_t j = 0; j < in.size(); ++j) {
    const int64_t n = in[j].numElements();
    const int64_t a = std::max(lo, base) - base, b = std::min(hi, base + n) - base;
    base += n;
    if (a >= b) continue;
    for (int r = 0; r < size_; ++r)
      ins[static_cast<size_t>(r)] = &posted_[static_cast<size_t>(r)].in[j];
    if (in[j].type.dtype == ir::DType::kI32) {
      std::vector<int32_t*> outs;
      for (int r = 0; r < size_; ++r) outs.push_back(posted_[static_cast<size_t>(r)].out[j].i32());
      reduceRange<int32_t>(ins, outs, a, b, op, size_);
    } else {
      assert(in[j].type.dtype == ir::DType::kF32);
      std::vector<float*> outs;
      for (int r = 0; r < size_; ++r) outs.push_back(posted_[static_cast<size_t>(r)].out[j].f32());
      reduceRange<float>(ins, outs, a, b, op, size_);
    }
  }
  arriveAndWait();
}

void LocalCommunicator::broadcast(int rank, int root, const TensorView& in, const TensorView& out) {
  posted_[static_cast<size_t>(rank)].one_in = &in;
  arriveAndWait();
  const TensorView& src = *posted_[static_cast<size_t>(root)].one_in;
  if (out.data != src.data) std::memcpy(out.data, src.data, static_cast<size_t>(out.bytes()));
  arriveAndWait();
}

void LocalCommunicator::gather(int rank, int root, const TensorView& in, const TensorView& out,
                               int axis) {
  posted_[static_cast<size_t>(rank)].one_in = &in;
  arriveAndWait();
  if (rank == root) {
    int64_t offset = 0;
    for (int r = 0; r < size_; ++r) {
      const TensorView& part = *posted_[static_cast<size_t>(r)].one_in;
      copySlice(out, part, axis, offset, /*into_whole=*/true);
      offset += part.dim(axis);
    }
  }
  arriveAndWait();
}

}  // namespace tandem::runtime
