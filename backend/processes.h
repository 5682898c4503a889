#pragma once

// The processes of a run (docs/DESIGN.md section 5, "Processes"). Without a launcher a run
// is one process and MPI is never initialized: everything behaves as before processes
// existed. Started by mpirun, each process is one MPI rank driving its own devices, and
// the collectives that span processes go through MPI's C API (OpenMPI), never a network
// layer of ours. MPI is initialized with MPI_THREAD_SERIALIZED: its calls are made on a
// comm-stream worker (a collective's share) or on the host thread between steps, never at
// once (a process-wide mutex serializes them), and during a step all of a process's
// cross-process collectives run on one thread, its first device's comm-stream worker, in
// the same order on every process (the loader checks that), so blocking calls cannot
// deadlock. A watchdog thread bounds every wait: see Processes::setTimeout. Every
// collective and host-thread exchange starts with arrival markers (each process sends the
// others the collective's sequence number, non-blocking, on a duplicate communicator),
// so that a wait that lasts knows which ranks have not arrived, and names them.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::backend {

/// Exit code of a rank that stops the job because a collective waited too long or failed
/// (a rank died or stalls): tools/tandem/commands.h lists it with the others.
inline constexpr int kExitCollectiveTimeout = 4;

/// What a wait is, for the one line a timeout prints: the collective (node name and
/// bucket) and the device whose comm stream waits.
struct WaitLabel {
  std::string collective;  // "all_reduce %fc1.w.grad.sum.0, ... (bucket 2)"
  std::string device;      // "cpu:0@1"
};

/// Waits that no host thread blocks in: a GPU collective's kernels wait on the GPU (NCCL)
/// while the host goes on enqueueing, and only a later synchronize would hang. The
/// watchdog polls every registered source as it checks the blocking waits, and bounds
/// them by the same --collective-timeout.
class AsyncWaits {
 public:
  virtual ~AsyncWaits() = default;
  struct State {
    /// The longest wait in progress (label and seconds so far); seconds 0: none.
    WaitLabel label;
    double seconds = 0;
    /// A failure the source saw (NCCL's asynchronous error), one line naming the rank,
    /// the collective and the device; "" when none.
    std::string error;
  };
  /// Called every 20 ms on the watchdog thread.
  virtual State poll() = 0;
  /// Stops every wait of the source (ncclCommAbort), on the watchdog thread, just before
  /// the process ends: what waits on the GPU for a rank that will not come stops waiting.
  virtual void abort() = 0;
};

/// A set of processes that run collectives together (an MPI communicator).
class ProcessComm {
 public:
  virtual ~ProcessComm() = default;
  /// This process's rank among them, and their count.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Every process contributes `send` (counts[rank()] bytes); `recv` receives all of them
  /// back to back in rank order (sum of counts bytes).
  virtual absl::Status allGather(const void* send, void* recv, const std::vector<int64_t>& counts,
                                 const WaitLabel& label) = 0;
  /// Every process sends every process its own message: `send` holds this process's
  /// messages to each process back to back in rank order (send_counts[q] bytes to q),
  /// `recv` receives each process's message to this one back to back in rank order
  /// (recv_counts[p] bytes from p).
  virtual absl::Status allToAll(const void* send, const std::vector<int64_t>& send_counts,
                                void* recv, const std::vector<int64_t>& recv_counts,
                                const WaitLabel& label) = 0;
  /// `root`'s `bytes` at `data` to every process's `data`.
  virtual absl::Status broadcast(void* data, int64_t bytes, int root, const WaitLabel& label) = 0;
};

/// This run's processes.
class Processes {
 public:
  /// Finds out how the process was started: under mpirun (OMPI_COMM_WORLD_SIZE or a PMIx
  /// rank in the environment) MPI is initialized and the world's rank and size taken; else
  /// one process, and MPI is left alone. Idempotent. The error says what MPI lacks.
  static absl::StatusOr<Processes*> start();
  /// The processes as known now: one (rank 0 of 1) until start() found a launcher.
  static Processes& current();
  /// Ends MPI cleanly after a run that every rank finished (MPI_Finalize); nothing in a
  /// one-process run.
  static void finish();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool several() const { return size_ > 1; }
  /// "rank 1: " in a multi-process run, "" otherwise: what every line a rank prints on
  /// standard error starts with.
  std::string prefix() const;

  /// A communicator over world ranks `ranks` (ascending), made by every listed process
  /// in the same order (MPI_Comm_create_group; the world's own for all of them).
  absl::StatusOr<std::shared_ptr<ProcessComm>> communicator(const std::vector<int>& ranks);

  /// Whether any rank passes true (an all_reduce of one flag over the world), on the host
  /// thread between steps: ranks stop at the same step whichever got the signal.
  absl::StatusOr<bool> anyRank(bool mine, absl::string_view what);
  /// The largest of every rank's `mine` (an all_reduce over the world), on the host thread
  /// between steps: which stop signal the ranks agree on (0: none), whoever got it.
  absl::StatusOr<int> maxOverRanks(int mine, absl::string_view what);

  /// Every rank's `mine`, in rank order, on rank 0; an empty list on the others. Host
  /// thread only (a checkpoint's variables): point-to-point messages of at most 1 GiB, so
  /// no size overflows MPI's int counts. One process: {mine}.
  absl::StatusOr<std::vector<std::string>> gatherOnFirst(std::string mine, absl::string_view what);
  /// Rank 0's `bytes` into every rank's `bytes` (its length first), host thread only.
  absl::Status broadcastFromFirst(std::string& bytes, absl::string_view what);
  /// The same from rank `root`.
  absl::Status broadcastFrom(int root, std::string& bytes, absl::string_view what);

  /// Start-up agreement (host thread, every rank at the same point): OK when every rank
  /// has the same `settings` (name, value) as rank 0, compared as one digest exchanged
  /// with the arrival markers; else an error naming the first setting that differs and
  /// its values, on this rank's line ("--lr is 0.2 on this rank but 0.1 on rank 0") or, on
  /// a rank that agrees with rank 0, the first rank that does not ("--lr is 0.2 on rank 1
  /// but 0.1 on rank 0"). Every rank returns the error, so all stop before a collective
  /// that different settings would corrupt. One process: always OK.
  absl::Status agree(const std::vector<std::pair<std::string, std::string>>& settings,
                     absl::string_view what);

  /// Bounds every wait of a collective (and of anyRank): one that lasts `seconds` makes
  /// the watchdog print "tandem: rank R: waited S s in COLLECTIVE on DEVICE ..." and stop
  /// every rank (MPI_Abort, exit kExitCollectiveTimeout). `signal` returns the stop
  /// signal this process got (0: none): mpirun sends SIGTERM to every rank once one died,
  /// and SIGKILL a second later, so a rank that gets it while waiting says where at once.
  void setTimeout(double seconds, int (*signal)() = nullptr);

  /// Called with what a wait is and when it starts and ends (ProcessComm calls these; a
  /// communicator may call them around a whole collective too). Nested waits keep the
  /// outermost.
  void beginWait(const WaitLabel& label);
  void endWait();
  /// Within a wait: the world ranks whose arrival markers have not come yet (empty: every
  /// rank arrived), for the watchdog's line. A wait without it (the local rendezvous of
  /// this process's devices) says so instead.
  void setMissing(std::vector<int> world_ranks);
  /// Prints `message` as this rank's one line and stops every rank (MPI_Abort).
  [[noreturn]] void abortAll(const std::string& message, int code = kExitCollectiveTimeout);

  /// Puts `waits` under the watchdog until unwatchAsync (starting the watchdog if this
  /// process has none yet: a one-process run with NCCL between its GPUs). A failure it
  /// reports, or a wait that lasts the timeout, aborts every source and stops every rank
  /// with the line the blocking waits print (exit kExitCollectiveTimeout).
  void watchAsync(AsyncWaits* waits);
  void unwatchAsync(AsyncWaits* waits);

 private:
  Processes() = default;
  void watch();

  int rank_ = 0, size_ = 1;
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace tandem::backend
