#include "runtime/data/batch_loader.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <random>

#include "ir/random.h"

namespace tandem::runtime::data {
namespace {

using ir::splitmix64;

// Uniform in [0, bound): reject the lowest 2^64 mod bound outputs so that what is left is
// a whole number of copies of [0, bound).
uint64_t uniformBelow(std::mt19937_64& gen, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // == 2^64 mod bound
  for (;;) {
    const uint64_t r = gen();
    if (r >= threshold) return r % bound;
  }
}

}  // namespace

std::vector<int64_t> epochPermutation(int64_t n, uint64_t seed, int epoch) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 gen(splitmix64(seed ^ splitmix64(static_cast<uint64_t>(epoch))));
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(uniformBelow(gen, static_cast<uint64_t>(i) + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

BatchLoader::BatchLoader(const Dataset& data, int64_t batch, bool shuffle, uint64_t seed,
                         bool drop_last, int prefetch)
    : data_(data), batch_(batch), shuffle_(shuffle), seed_(seed), drop_last_(drop_last) {
  assert(batch > 0 && "BatchLoader needs a positive batch size");
  slots_.resize(static_cast<size_t>(std::max(prefetch, 1)) + 1);
  for (Slot& slot : slots_) {
    slot.images.assign(static_cast<size_t>(batch_ * data_.exampleSize()), 0.0f);
    slot.labels.assign(static_cast<size_t>(batch_), -1);
  }
  producer_ = std::thread([this] { produce(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  space_.notify_all();
  producer_.join();
}

int64_t BatchLoader::batchesPerEpoch() const {
  return drop_last_ ? data_.count / batch_ : (data_.count + batch_ - 1) / batch_;
}

void BatchLoader::startEpoch(int epoch, int64_t first_batch) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++generation_;
    epoch_ = epoch;
    head_ = 0;
    filled_ = 0;
    held_ = false;
    // Batch i of an epoch depends only on (seed, epoch, i), so skipping is counting.
    produced_ = std::clamp<int64_t>(first_batch, 0, batchesPerEpoch());
    consumed_ = produced_;
  }
  space_.notify_one();
}

void BatchLoader::setRows(int64_t first, int64_t end) {
  std::lock_guard<std::mutex> lock(mu_);
  row_first_ = std::clamp<int64_t>(first, 0, batch_);
  row_end_ = std::clamp<int64_t>(end, row_first_, batch_);
}

std::optional<Batch> BatchLoader::next() {
  std::unique_lock<std::mutex> lock(mu_);
  if (held_) {
    held_ = false;
    space_.notify_one();
  }
  if (generation_ == 0 || consumed_ >= batchesPerEpoch()) return std::nullopt;
  ready_.wait(lock, [&] { return filled_ > 0; });
  const Slot& slot = slots_[head_];
  head_ = (head_ + 1) % slots_.size();
  --filled_;
  held_ = true;
  ++consumed_;
  return Batch{slot.images.data(), slot.labels.data(), slot.valid, slot.index};
}

void BatchLoader::produce() {
  const int64_t total = batchesPerEpoch();
  std::vector<int64_t> order;  // empty when not shuffling: file order
  uint64_t order_generation = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    space_.wait(lock, [&] {
      return stop_ ||
             (generation_ != 0 && produced_ < total && filled_ + (held_ ? 1 : 0) < slots_.size());
    });
    if (stop_) return;
    const uint64_t generation = generation_;
    if (shuffle_ && order_generation != generation) {
      const int epoch = epoch_;
      lock.unlock();
      order = epochPermutation(data_.count, seed_, epoch);
      lock.lock();
      order_generation = generation;
      continue;  // startEpoch may have come meanwhile: look again
    }
    // The slot after the filled ones is neither filled nor the consumer's (see the ring
    // invariant in the header), and only this thread writes slots, so it is filled unlocked.
    const int64_t index = produced_;
    Slot& slot = slots_[(head_ + filled_) % slots_.size()];
    const int64_t row_first = row_first_, row_end = row_end_ < 0 ? batch_ : row_end_;
    lock.unlock();
    fill(slot, index, order, row_first, row_end);
    lock.lock();
    if (generation_ != generation) continue;  // a restarted epoch: this batch is stale
    ++filled_;
    ++produced_;
    ready_.notify_one();
  }
}

void BatchLoader::fill(Slot& slot, int64_t index, const std::vector<int64_t>& order,
                       int64_t row_first, int64_t row_end) {
  const int64_t size = data_.exampleSize();
  const int64_t first = index * batch_;
  const int64_t valid = std::min(batch_, data_.count - first);
  if (row_first > 0 || row_end < batch_) {  // one process's rows: the rest are never read
    for (int64_t r = row_first; r < row_end; ++r) {
      if (r < valid) {
        const int64_t src = order.empty() ? first + r : order[first + r];
        std::memcpy(slot.images.data() + r * size, data_.images.data() + src * size,
                    sizeof(float) * size);
        slot.labels[r] = data_.labels[src];
      } else {
        std::fill(slot.images.begin() + r * size, slot.images.begin() + (r + 1) * size, 0.0f);
        slot.labels[r] = -1;
      }
    }
    slot.valid = valid;
    slot.index = index;
    return;
  }
  for (int64_t r = 0; r < valid; ++r) {
    const int64_t src = order.empty() ? first + r : order[first + r];
    std::memcpy(slot.images.data() + r * size, data_.images.data() + src * size,
                sizeof(float) * size);
    slot.labels[r] = data_.labels[src];
  }
  std::fill(slot.images.begin() + valid * size, slot.images.end(), 0.0f);
  std::fill(slot.labels.begin() + valid, slot.labels.end(), -1);
  slot.valid = valid;
  slot.index = index;
}

}  // namespace tandem::runtime::data
