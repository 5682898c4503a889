#pragma once

// The batch loader's reading threads: a batch's rows are read by the loader's own thread
// and a few helpers, each a share of the rows (sources are read from several threads at
// once: example_source.h). Not a general thread pool (Debian's Abseil has none, and the
// CPU backend's workers are the devices'): one caller hands out the parts of one job at a
// time, and every thread runs below the devices' priority.

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem::runtime::data {

/// Lowers the calling thread's priority 10 nice values below the process's (Linux sets it
/// per thread): where the devices' workers keep every core busy, the loader reads in the
/// moments they wait (a collective, the step's end) instead of preempting one of them,
/// which would stall every device at the next collective. LeNet's first epoch from a PNG
/// folder on a 2-core machine: 0.88x of the IDX files' images/s at equal priority, 0.98x
/// at +10 (docs/PERF.md). A step waits for a batch that is late, so the loader still gets
/// its time. Where lowering it is refused, the priority stays as it was.
void lowerThisThreadsPriority();

class WorkerPool {
 public:
  /// `threads` >= 1 counts the caller of run(): threads - 1 helpers are started, each at
  /// lowerThisThreadsPriority's priority before the constructor returns.
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int threads() const { return static_cast<int>(helpers_.size()) + 1; }
  /// Runs work(0), ..., work(parts - 1), each once, on the helpers and the calling thread,
  /// and returns when every one has returned. One caller at a time.
  void run(int parts, const std::function<void(int)>& work);

 private:
  void help();

  std::mutex mu_;
  std::condition_variable wake_;                    // helpers wait for parts to take
  std::condition_variable done_;                    // the caller waits for the parts taken to end
  const std::function<void(int)>* work_ = nullptr;  // guarded by mu_, as the counts below
  int parts_ = 0, next_ = 0, running_ = 0;
  int started_ = 0;  // helpers running, their priority lowered
  bool stop_ = false;
  std::vector<std::thread> helpers_;
};

}  // namespace tandem::runtime::data
