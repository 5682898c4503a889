#include "runtime/data/batch_loader.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <random>

#include "ir/random.h"
#include "runtime/data/worker_pool.h"

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

// The threads that read a batch's rows: up to 4, no more than the machine's cores (a
// core each decodes about 84,000 small PNGs a second: docs/PERF.md).
int readingThreads() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
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

BatchLoader::BatchLoader(const ExampleSource& data, int64_t batch, bool shuffle, uint64_t seed,
                         bool drop_last, int prefetch)
    : data_(data),
      batch_(batch),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last),
      readers_(readingThreads()) {
  assert(batch > 0 && "BatchLoader needs a positive batch size");
  const std::vector<Field>& fields = data_.fields();
  for (size_t f = 0; f < fields.size(); ++f) {
    field_bytes_.push_back(fields[f].bytes());
    if (fields[f].name == data_.classLabels().first) label_field_ = static_cast<int>(f);
  }
  slots_.resize(static_cast<size_t>(std::max(prefetch, 1)) + 1);
  for (Slot& slot : slots_) {
    for (int64_t bytes : field_bytes_) {
      slot.fields.emplace_back(static_cast<size_t>(batch_ * bytes));
      slot.views.push_back(slot.fields.back().data());
    }
    padRows(slot, 0, batch_);
  }
  producer_ = std::thread([this] { produce(); });
}

BatchLoader::BatchLoader(const Dataset& data, int64_t batch, bool shuffle, uint64_t seed,
                         bool drop_last, int prefetch)
    : BatchLoader(std::make_unique<DatasetSource>(
                      // Not owned: the caller keeps `data` (an aliasing pointer to it).
                      std::shared_ptr<const Dataset>(std::shared_ptr<const Dataset>(), &data)),
                  batch, shuffle, seed, drop_last, prefetch) {}

BatchLoader::BatchLoader(std::unique_ptr<const ExampleSource> owned, int64_t batch, bool shuffle,
                         uint64_t seed, bool drop_last, int prefetch)
    : BatchLoader(*owned, batch, shuffle, seed, drop_last, prefetch) {
  owned_ = std::move(owned);
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
  const int64_t count = data_.size();
  return drop_last_ ? count / batch_ : (count + batch_ - 1) / batch_;
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
    status_ = absl::OkStatus();
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
  // The batches filled before an example failed are handed out first, then the end.
  ready_.wait(lock, [&] { return filled_ > 0 || !status_.ok(); });
  if (filled_ == 0) return std::nullopt;  // an example could not be read
  const Slot& slot = slots_[head_];
  head_ = (head_ + 1) % slots_.size();
  --filled_;
  held_ = true;
  ++consumed_;
  return Batch{slot.views, slot.valid, slot.index};
}

absl::Status BatchLoader::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void BatchLoader::produce() {
  lowerThisThreadsPriority();
  const int64_t total = batchesPerEpoch();
  std::vector<int64_t> order;  // empty when not shuffling: file order
  uint64_t order_generation = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    space_.wait(lock, [&] {
      return stop_ || (generation_ != 0 && status_.ok() && produced_ < total &&
                       filled_ + (held_ ? 1 : 0) < slots_.size());
    });
    if (stop_) return;
    const uint64_t generation = generation_;
    if (shuffle_ && order_generation != generation) {
      const int epoch = epoch_;
      lock.unlock();
      order = epochPermutation(data_.size(), seed_, epoch);
      lock.lock();
      order_generation = generation;
      continue;  // startEpoch may have come meanwhile: look again
    }
    // The slot after the filled ones is neither filled nor the consumer's (see the ring
    // invariant in the header), and only this thread writes slots, so it is filled unlocked.
    const int64_t index = produced_;
    const int epoch = epoch_;
    Slot& slot = slots_[(head_ + filled_) % slots_.size()];
    const int64_t row_first = row_first_, row_end = row_end_ < 0 ? batch_ : row_end_;
    lock.unlock();
    fill(slot, epoch, index, order, row_first, row_end);
    lock.lock();
    if (generation_ != generation) continue;  // a restarted epoch: this batch is stale
    if (!slot.status.ok()) {
      status_ = slot.status;
      ready_.notify_one();
      continue;
    }
    ++filled_;
    ++produced_;
    ready_.notify_one();
  }
}

void BatchLoader::padRows(Slot& slot, int64_t first, int64_t end) const {
  for (size_t f = 0; f < slot.fields.size(); ++f) {
    std::byte* rows = slot.fields[f].data();
    std::fill(rows + first * field_bytes_[f], rows + end * field_bytes_[f], std::byte{0});
  }
  if (label_field_ >= 0) {
    // -1 in every element of a label row: the loss and accuracy ignore negative labels.
    std::byte* labels = slot.fields[static_cast<size_t>(label_field_)].data();
    const int64_t bytes = field_bytes_[static_cast<size_t>(label_field_)];
    std::fill(labels + first * bytes, labels + end * bytes, std::byte{0xff});
  }
}

void BatchLoader::fill(Slot& slot, int epoch, int64_t index, const std::vector<int64_t>& order,
                       int64_t row_first, int64_t row_end) {
  const int64_t first = index * batch_;
  const int64_t valid = std::min(batch_, data_.size() - first);
  // One process's rows (row_first, row_end) are read; the others are never read by its
  // devices, and stay as the slot was made (padding).
  const int64_t real_end = std::min(row_end, valid);
  // The rows in contiguous shares, one per reading thread. Each share stops at its first
  // bad example, and the first share's error is the one kept: the first bad row, as one
  // thread reading them in order would find.
  const int64_t rows = std::max<int64_t>(real_end - row_first, 0);
  const int parts = static_cast<int>(std::min<int64_t>(readers_.threads(), rows));
  std::vector<absl::Status> statuses(static_cast<size_t>(parts));
  readers_.run(parts, [&](int part) {
    std::vector<void*> out(slot.fields.size());
    for (int64_t r = row_first + rows * part / parts; r < row_first + rows * (part + 1) / parts;
         ++r) {
      const int64_t position = first + r;
      const int64_t src = order.empty() ? position : order[static_cast<size_t>(position)];
      for (size_t f = 0; f < out.size(); ++f) out[f] = slot.fields[f].data() + r * field_bytes_[f];
      absl::Status s = data_.read(src, {.seed = seed_, .epoch = epoch, .position = position}, out);
      if (!s.ok()) {
        statuses[static_cast<size_t>(part)] = std::move(s);
        return;
      }
    }
  });
  slot.status = absl::OkStatus();
  for (absl::Status& s : statuses)
    if (!s.ok()) {
      slot.status = std::move(s);
      return;
    }
  padRows(slot, std::max(row_first, real_end), row_end);
  slot.valid = valid;
  slot.index = index;
}

}  // namespace tandem::runtime::data
