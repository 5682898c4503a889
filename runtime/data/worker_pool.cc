#include "runtime/data/worker_pool.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace tandem::runtime::data {

void lowerThisThreadsPriority() {
#ifdef __linux__
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, tid);
  if (errno == 0) ::setpriority(PRIO_PROCESS, tid, std::min(nice + 10, 19));
#endif
}

WorkerPool::WorkerPool(int threads) {
  for (int i = 1; i < threads; ++i) helpers_.emplace_back([this] { help(); });
  // Each helper has lowered its priority before the pool is used.
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return started_ == static_cast<int>(helpers_.size()); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

void WorkerPool::run(int parts, const std::function<void(int)>& work) {
  if (parts <= 1 || helpers_.empty()) {
    for (int p = 0; p < parts; ++p) work(p);
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  work_ = &work;
  parts_ = parts;
  next_ = 0;
  wake_.notify_all();
  while (next_ < parts_) {  // the caller takes parts too
    const int p = next_++;
    ++running_;
    lock.unlock();
    work(p);
    lock.lock();
    --running_;
  }
  done_.wait(lock, [this] { return running_ == 0; });
  work_ = nullptr;
}

void WorkerPool::help() {
  lowerThisThreadsPriority();
  std::unique_lock<std::mutex> lock(mu_);
  ++started_;
  done_.notify_all();
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || (work_ != nullptr && next_ < parts_); });
    if (stop_) return;
    while (work_ != nullptr && next_ < parts_) {
      const int p = next_++;
      ++running_;
      const std::function<void(int)>& work = *work_;
      lock.unlock();
      work(p);
      lock.lock();
      --running_;
    }
    done_.notify_all();
  }
}

}  // namespace tandem::runtime::data
