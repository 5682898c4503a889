#include "backend/processes.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/status_macros.h"

#ifdef TANDEM_HAVE_MPI
#include <mpi.h>
#endif

namespace tandem::backend {

struct Processes::State {
  // Serializes every MPI call of the process (MPI_THREAD_SERIALIZED).
  std::mutex mpi;
  // The wait in progress, for the watchdog.
  std::mutex mu;
  std::condition_variable cv;
  int depth = 0;
  WaitLabel label;
  std::chrono::steady_clock::time_point since;
  double timeout = 0;  // 0: no bound
  int (*signal)() = nullptr;
  bool stop = false;
  std::thread watchdog;
  bool mpi_started = false;
  std::vector<AsyncWaits*> async;  // polled by the watchdog
};

namespace {

using Clock = std::chrono::steady_clock;

bool launchedByMpirun() {
  // OpenMPI's mpirun sets OMPI_COMM_WORLD_SIZE; a PMIx launcher (srun, prterun) PMIX_RANK.
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

Processes*& instance() {
  static Processes* p = nullptr;
  return p;
}

#ifdef TANDEM_HAVE_MPI
std::string mpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return absl::StrCat("MPI error ", code);
  return std::string(text, static_cast<size_t>(length));
}

class MpiComm final : public ProcessComm {
 public:
  MpiComm(Processes& procs, std::mutex& mpi, MPI_Comm comm) : procs_(procs), mpi_(mpi), comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiComm() override {
    // After MPI_Finalize (a communicator kept past the run) there is nothing to free.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      std::lock_guard<std::mutex> l(mpi_);
      MPI_Comm_free(&comm_);
    }
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status allGather(const void* send, void* recv, const std::vector<int64_t>& counts,
                         const WaitLabel& label) override {
    // MPI counts are ints: a bucket over 2 GiB per process is refused, not wrapped.
    std::vector<int> sizes, displacements;
    int64_t at = 0;
    for (int64_t c : counts) {
      if (c > std::numeric_limits<int>::max() || at > std::numeric_limits<int>::max())
        return absl::ResourceExhaustedError(
            absl::StrCat(label.collective, " on ", label.device, ": ", at + c,
                         " bytes are more than one MPI call carries (2 GiB); lower --bucket-mb"));
      sizes.push_back(static_cast<int>(c));
      displacements.push_back(static_cast<int>(at));
      at += c;
    }
    std::lock_guard<std::mutex> l(mpi_);
    procs_.beginWait(label);
    const int rc = MPI_Allgatherv(send, sizes[static_cast<size_t>(rank_)], MPI_BYTE, recv,
                                  sizes.data(), displacements.data(), MPI_BYTE, comm_);
    procs_.endWait();
    if (rc != MPI_SUCCESS) fail(label, rc);
    return absl::OkStatus();
  }

  absl::Status broadcast(void* data, int64_t bytes, int root, const WaitLabel& label) override {
    if (bytes > std::numeric_limits<int>::max())
      return absl::ResourceExhaustedError(absl::StrCat(
          label.collective, " on ", label.device, ": ", bytes,
          " bytes are more than one MPI call carries (2 GiB)"));
    std::lock_guard<std::mutex> l(mpi_);
    procs_.beginWait(label);
    const int rc = MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, comm_);
    procs_.endWait();
    if (rc != MPI_SUCCESS) fail(label, rc);
    return absl::OkStatus();
  }

 private:
  // A failed collective leaves the ranks out of step: no rank can go on, so all stop.
  [[noreturn]] void fail(const WaitLabel& label, int rc) {
    procs_.abortAll(absl::StrCat(label.collective, " on ", label.device,
                                 " failed: ", mpiError(rc), " (a rank died?)"));
  }

  Processes& procs_;
  std::mutex& mpi_;
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};
#endif

}  // namespace

absl::StatusOr<Processes*> Processes::start() {
  Processes& p = current();
  if (p.state_->mpi_started || !launchedByMpirun()) return &p;
#ifdef TANDEM_HAVE_MPI
  int provided = 0;
  if (int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      rc != MPI_SUCCESS)
    return absl::UnavailableError(absl::StrCat("MPI_Init_thread failed: ", mpiError(rc)));
  p.state_->mpi_started = true;
  // Collectives run on comm-stream workers, not on the thread that initialized MPI:
  // MPI_THREAD_FUNNELED would not allow that, MPI_THREAD_SERIALIZED does.
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    return absl::UnavailableError(absl::StrCat(
        "this MPI provides thread level ", provided,
        "; Tandem needs MPI_THREAD_SERIALIZED (collectives run on a comm-stream worker)"));
  }
  // Errors come back as codes: a failed collective says which one before the job stops.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &p.rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &p.size_);
  State* s = p.state_.get();
  std::lock_guard<std::mutex> l(s->mu);
  if (!s->watchdog.joinable()) s->watchdog = std::thread([&p] { p.watch(); });
  return &p;
#else
  return absl::UnavailableError(
      "started by mpirun, but this tandem was built without MPI (install libopenmpi-dev, "
      "scripts/setup does, and build again)");
#endif
}

Processes& Processes::current() {
  Processes*& p = instance();
  if (p == nullptr) {
    p = new Processes();  // lives as long as the process: the watchdog may outlive main
    p->state_ = std::make_shared<State>();
  }
  return *p;
}

void Processes::finish() {
  Processes& p = current();
  State* s = p.state_.get();
  if (s->watchdog.joinable()) {
    {
      std::lock_guard<std::mutex> l(s->mu);
      s->stop = true;
    }
    s->cv.notify_all();
    s->watchdog.join();
    std::lock_guard<std::mutex> l(s->mu);
    s->stop = false;  // a later watchAsync may start it again
  }
  if (!s->mpi_started) return;
#ifdef TANDEM_HAVE_MPI
  std::lock_guard<std::mutex> l(s->mpi);
  MPI_Finalize();
#endif
  s->mpi_started = false;
}

std::string Processes::prefix() const {
  return several() ? absl::StrCat("rank ", rank_, ": ") : std::string();
}

absl::StatusOr<std::shared_ptr<ProcessComm>> Processes::communicator(const std::vector<int>& ranks) {
#ifdef TANDEM_HAVE_MPI
  if (!state_->mpi_started)
    return absl::FailedPreconditionError(
        "a collective spans processes, but this run is one process (start it with mpirun)");
  for (int r : ranks)
    if (r < 0 || r >= size_)
      return absl::FailedPreconditionError(absl::StrCat(
          "a collective spans rank ", r, ", but mpirun started ", size_, " processes"));
  std::lock_guard<std::mutex> l(state_->mpi);
  MPI_Comm comm = MPI_COMM_NULL;
  int rc = MPI_SUCCESS;
  if (static_cast<int>(ranks.size()) == size_) {
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  } else {
    MPI_Group world, group;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, static_cast<int>(ranks.size()), ranks.data(), &group);
    rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, /*tag=*/0, &comm);
    MPI_Group_free(&group);
    MPI_Group_free(&world);
  }
  if (rc != MPI_SUCCESS)
    return absl::UnavailableError(absl::StrCat("making an MPI communicator: ", mpiError(rc)));
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return std::shared_ptr<ProcessComm>(std::make_shared<MpiComm>(*this, state_->mpi, comm));
#else
  (void)ranks;
  return absl::FailedPreconditionError(
      "a collective spans processes, but this tandem was built without MPI");
#endif
}

absl::StatusOr<bool> Processes::anyRank(bool mine, absl::string_view what) {
  ASSIGN_OR_RETURN(int any, maxOverRanks(mine ? 1 : 0, what));
  return any != 0;
}

absl::StatusOr<int> Processes::maxOverRanks(int mine, absl::string_view what) {
  if (!several()) return mine;
#ifdef TANDEM_HAVE_MPI
  std::lock_guard<std::mutex> l(state_->mpi);
  const WaitLabel label{std::string(what), "the host thread"};
  beginWait(label);
  const int rc = MPI_Allreduce(MPI_IN_PLACE, &mine, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  endWait();
  if (rc != MPI_SUCCESS)
    abortAll(absl::StrCat(what, " on the host thread failed: ", mpiError(rc), " (a rank died?)"));
  return mine;
#else
  (void)what;
  return mine;
#endif
}

#ifdef TANDEM_HAVE_MPI
namespace {
// Host-thread messages of a checkpoint's size go in pieces MPI's int count can hold.
constexpr int64_t kMessagePiece = int64_t{1} << 30;
constexpr int kGatherTag = 7001;
}  // namespace
#endif

absl::StatusOr<std::vector<std::string>> Processes::gatherOnFirst(std::string mine,
                                                                  absl::string_view what) {
  std::vector<std::string> all;
  if (!several()) {
    all.push_back(std::move(mine));
    return all;
  }
#ifdef TANDEM_HAVE_MPI
  std::lock_guard<std::mutex> l(state_->mpi);
  const WaitLabel label{std::string(what), "the host thread"};
  beginWait(label);
  int rc = MPI_SUCCESS;
  // Point to point rather than MPI_Gatherv: its displacements are ints, and a model's
  // variables on all ranks together may pass 2 GiB.
  if (rank_ == 0) {
    all.resize(static_cast<size_t>(size_));
    all[0] = std::move(mine);
    for (int r = 1; r < size_ && rc == MPI_SUCCESS; ++r) {
      int64_t bytes = 0;
      rc = MPI_Recv(&bytes, 1, MPI_INT64_T, r, kGatherTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      std::string& into = all[static_cast<size_t>(r)];
      into.resize(static_cast<size_t>(rc == MPI_SUCCESS ? bytes : 0));
      for (int64_t at = 0; at < static_cast<int64_t>(into.size()) && rc == MPI_SUCCESS;
           at += kMessagePiece)
        rc = MPI_Recv(into.data() + at,
                      static_cast<int>(std::min<int64_t>(kMessagePiece, bytes - at)), MPI_BYTE, r,
                      kGatherTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  } else {
    const int64_t bytes = static_cast<int64_t>(mine.size());
    rc = MPI_Send(&bytes, 1, MPI_INT64_T, 0, kGatherTag, MPI_COMM_WORLD);
    for (int64_t at = 0; at < bytes && rc == MPI_SUCCESS; at += kMessagePiece)
      rc = MPI_Send(mine.data() + at, static_cast<int>(std::min<int64_t>(kMessagePiece, bytes - at)),
                    MPI_BYTE, 0, kGatherTag, MPI_COMM_WORLD);
  }
  endWait();
  if (rc != MPI_SUCCESS)
    abortAll(absl::StrCat(what, " on the host thread failed: ", mpiError(rc), " (a rank died?)"));
  return all;
#else
  (void)what;
  return absl::FailedPreconditionError("several processes, but this tandem was built without MPI");
#endif
}

absl::Status Processes::broadcastFromFirst(std::string& bytes, absl::string_view what) {
  if (!several()) return absl::OkStatus();
#ifdef TANDEM_HAVE_MPI
  std::lock_guard<std::mutex> l(state_->mpi);
  const WaitLabel label{std::string(what), "the host thread"};
  beginWait(label);
  int64_t size = static_cast<int64_t>(bytes.size());
  int rc = MPI_Bcast(&size, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  if (rc == MPI_SUCCESS) bytes.resize(static_cast<size_t>(size));
  for (int64_t at = 0; at < size && rc == MPI_SUCCESS; at += kMessagePiece)
    rc = MPI_Bcast(bytes.data() + at, static_cast<int>(std::min<int64_t>(kMessagePiece, size - at)),
                   MPI_BYTE, 0, MPI_COMM_WORLD);
  endWait();
  if (rc != MPI_SUCCESS)
    abortAll(absl::StrCat(what, " on the host thread failed: ", mpiError(rc), " (a rank died?)"));
  return absl::OkStatus();
#else
  (void)what;
  return absl::FailedPreconditionError("several processes, but this tandem was built without MPI");
#endif
}

void Processes::setTimeout(double seconds, int (*signal)()) {
  std::lock_guard<std::mutex> l(state_->mu);
  state_->timeout = seconds;
  state_->signal = signal;
}

void Processes::beginWait(const WaitLabel& label) {
  std::lock_guard<std::mutex> l(state_->mu);
  if (state_->depth++ > 0) return;
  state_->label = label;
  state_->since = Clock::now();
}

void Processes::endWait() {
  std::lock_guard<std::mutex> l(state_->mu);
  --state_->depth;
}

void Processes::watchAsync(AsyncWaits* waits) {
  std::lock_guard<std::mutex> l(state_->mu);
  state_->async.push_back(waits);
  if (!state_->watchdog.joinable()) state_->watchdog = std::thread([this] { watch(); });
}

void Processes::unwatchAsync(AsyncWaits* waits) {
  std::lock_guard<std::mutex> l(state_->mu);
  auto& a = state_->async;
  a.erase(std::remove(a.begin(), a.end(), waits), a.end());
}

void Processes::abortAll(const std::string& message, int code) {
  // One write, so that the line is not interleaved with another rank's.
  const std::string line = absl::StrCat("tandem: ", prefix(), message, "\n");
  (void)!::write(STDERR_FILENO, line.data(), line.size());
  std::fflush(stdout);
#ifdef TANDEM_HAVE_MPI
  // From the watchdog thread while another thread is inside MPI: outside what SERIALIZED
  // promises, but MPI_Abort exists to end a job that can no longer make progress.
  if (state_->mpi_started) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::_Exit(code);
}

void Processes::watch() {
  State& s = *state_;
  // A stop signal that comes while a collective waits: mpirun ends the job (a rank died
  // or exited) with SIGTERM and a SIGKILL one second later; a healthy collective finishes
  // well within the grace, so one still waiting after it will not.
  constexpr double kSignalGrace = 0.3;
  std::unique_lock<std::mutex> l(s.mu);
  bool signalled = false;  // a signal came during the wait in progress, at signal_seen
  Clock::time_point signal_seen = Clock::now();
  // Every GPU collective stops waiting before the process ends (ncclCommAbort).
  auto abortSources = [&] {
    for (AsyncWaits* a : s.async) a->abort();
  };
  while (!s.stop) {
    s.cv.wait_for(l, std::chrono::milliseconds(20));
    if (s.stop) break;
    const int sig = s.signal != nullptr ? s.signal() : 0;
    // The longest wait in progress: a blocking call (MPI), or a collective on a GPU.
    bool waiting = false;
    WaitLabel label;
    double waited = 0;
    if (s.depth > 0) {
      waiting = true;
      label = s.label;
      waited = std::chrono::duration<double>(Clock::now() - s.since).count();
    }
    for (AsyncWaits* a : s.async) {
      AsyncWaits::State st = a->poll();
      if (!st.error.empty()) {
        abortSources();
        l.unlock();
        abortAll(absl::StrCat(st.error, "; stopping every rank"));
      }
      if (st.seconds > 0 && (!waiting || st.seconds > waited)) {
        waiting = true;
        label = st.label;
        waited = st.seconds;
      }
    }
    if (!waiting) {
      signalled = false;
      continue;
    }
    if (sig != 0 && !signalled) {
      signalled = true;
      signal_seen = Clock::now();
    }
    if (signalled &&
        std::chrono::duration<double>(Clock::now() - signal_seen).count() >= kSignalGrace) {
      const std::string message = absl::StrFormat(
          "stopped by %s while waiting %.1f s in %s on %s: another rank died or exited, and "
          "mpirun ends the job",
          sig == SIGTERM  ? "SIGTERM"
          : sig == SIGINT ? "SIGINT"
                          : absl::StrCat("signal ", sig),
          waited, label.collective, label.device);
      abortSources();
      l.unlock();
      const std::string line = absl::StrCat("tandem: ", prefix(), message, "\n");
      (void)!::write(STDERR_FILENO, line.data(), line.size());
      std::_Exit(128 + sig);
    }
    if (s.timeout > 0 && waited >= s.timeout) {
      const std::string message = absl::StrFormat(
          "waited %.1f s (--collective-timeout %g) in %s on %s: a rank died or stalls; "
          "stopping every rank",
          waited, s.timeout, label.collective, label.device);
      abortSources();
      l.unlock();
      abortAll(message);
    }
  }
}

}  // namespace tandem::backend
