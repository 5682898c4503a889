#include "backend/processes.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "ir/fnv1a.h"
#include "ir/status_macros.h"

#ifdef TANDEM_HAVE_MPI
#include <mpi.h>
#endif

namespace tandem::backend {

#ifdef TANDEM_HAVE_MPI
struct TrackedComm;  // below: an MPI communicator with arrival markers
#endif

struct Processes::State {
  // Serializes every MPI call of the process (MPI_THREAD_SERIALIZED).
  std::mutex mpi;
  // The wait in progress, for the watchdog.
  std::mutex mu;
  std::condition_variable cv;
  int depth = 0;
  WaitLabel label;
  std::chrono::steady_clock::time_point since;
  // The ranks whose arrival markers the wait in progress lacks; unset before the
  // markers' exchange of the wait began (the local rendezvous).
  std::optional<std::vector<int>> missing;
  double timeout = 0;  // 0: no bound
  int (*signal)() = nullptr;
  bool stop = false;
  std::thread watchdog;
  bool mpi_started = false;
  std::vector<AsyncWaits*> async;  // polled by the watchdog
#ifdef TANDEM_HAVE_MPI
  // The world, with its markers, for the host thread's exchanges (TrackedComm below).
  std::unique_ptr<TrackedComm> world;
#endif
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
#endif

using ir::fnv1a;  // digests that ranks compare (settings, a collective's name)

}  // namespace

#ifdef TANDEM_HAVE_MPI
// A communicator whose every exchange begins with arrival markers: each member sends every
// other member {sequence number, digest of what it is, a value} without blocking, on a
// duplicate of the communicator (so that a marker never matches the collective's own
// messages), and polls for theirs. While they are missing the watchdog knows which ranks
// have not arrived; once all are in, every rank is at the same exchange (the digests
// agree, or the ranks are out of step and all stop). MPI's blocking collective itself
// cannot tell who is late, so this is the side channel; it costs one small message to
// and from each other process per collective (docs/DESIGN.md, "No silent hang").
struct TrackedComm {
  MPI_Comm comm = MPI_COMM_NULL, markers = MPI_COMM_NULL;
  int rank = 0, size = 1;
  std::vector<int> world;  // the world rank of each member
  uint64_t sequence = 0;

  struct Marker {
    uint64_t sequence, what, value;
  };
  static constexpr int kMarkerTag = 7002;

  TrackedComm(MPI_Comm c, const std::vector<int>& world_ranks) : comm(c), world(world_ranks) {
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Comm_dup(comm, &markers);
    MPI_Comm_set_errhandler(markers, MPI_ERRORS_RETURN);
  }
  void free(bool also_comm) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    MPI_Comm_free(&markers);
    if (also_comm) MPI_Comm_free(&comm);
  }

  // Every member's value (this rank's own at its index) once all have arrived at this
  // exchange; `label` names it. The caller holds the MPI mutex and is within a wait of
  // `procs` (beginWait), which this keeps told of who is missing. A failed call or ranks
  // out of step stop every rank (abortAll): no rank can go on alone.
  std::vector<uint64_t> arrive(Processes& procs, const WaitLabel& label, uint64_t value) {
    const Marker mine{++sequence, fnv1a(label.collective), value};
    std::vector<Marker> theirs(static_cast<size_t>(size));
    theirs[static_cast<size_t>(rank)] = mine;
    std::vector<MPI_Request> requests;
    std::vector<int> peer_of;  // the member each receive request waits for (-1: a send)
    requests.reserve(static_cast<size_t>(2 * size));
    int rc = MPI_SUCCESS;
    for (int p = 0; p < size && rc == MPI_SUCCESS; ++p) {
      if (p == rank) continue;
      requests.emplace_back();
      peer_of.push_back(p);
      rc = MPI_Irecv(&theirs[static_cast<size_t>(p)], 3, MPI_UINT64_T, p, kMarkerTag, markers,
                     &requests.back());
      if (rc != MPI_SUCCESS) break;
      requests.emplace_back();
      peer_of.push_back(-1);
      rc = MPI_Isend(&mine, 3, MPI_UINT64_T, p, kMarkerTag, markers, &requests.back());
    }
    std::vector<bool> arrived(static_cast<size_t>(size), false);
    arrived[static_cast<size_t>(rank)] = true;
    int receives_left = size - 1;
    bool told = false;  // whether the watchdog has been told who is missing
    std::vector<int> done(requests.size());
    int left = static_cast<int>(requests.size());
    while (rc == MPI_SUCCESS && left > 0) {
      int count = 0;
      rc = MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &count, done.data(),
                        MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS || count == MPI_UNDEFINED) break;
      left -= count;
      for (int i = 0; i < count; ++i)
        if (const int p = peer_of[static_cast<size_t>(done[static_cast<size_t>(i)])]; p >= 0) {
          arrived[static_cast<size_t>(p)] = true;
          --receives_left;
        }
      if (count > 0 || !told) {
        std::vector<int> missing;
        for (int p = 0; p < size; ++p)
          if (!arrived[static_cast<size_t>(p)]) missing.push_back(world[static_cast<size_t>(p)]);
        if (count > 0 && told && receives_left > 0) procs.setMissing(std::move(missing));
        if (!told) procs.setMissing(std::move(missing));
        told = true;
      }
      // Waiting is the common case (a peer still computes): give the core to it, as
      // OpenMPI's own progress loop does when ranks share cores.
      if (count == 0) sched_yield();
    }
    if (rc != MPI_SUCCESS)
      procs.abortAll(absl::StrCat(label.collective, " on ", label.device,
                                  ": exchanging arrival markers failed: ", mpiError(rc),
                                  " (a rank died?)"));
    procs.setMissing({});
    for (int p = 0; p < size; ++p) {
      const Marker& m = theirs[static_cast<size_t>(p)];
      if (m.sequence != mine.sequence || m.what != mine.what)
        procs.abortAll(absl::StrCat(
            label.collective, " on ", label.device, ": rank ", world[static_cast<size_t>(p)],
            " is at its exchange #", m.sequence,
            m.what != mine.what ? " of another collective" : "", ", this rank at #", mine.sequence,
            ": the ranks run different steps (another model, devices or build?)"));
    }
    std::vector<uint64_t> values;
    for (const Marker& m : theirs) values.push_back(m.value);
    return values;
  }
};

namespace {

class MpiComm final : public ProcessComm {
 public:
  MpiComm(Processes& procs, std::mutex& mpi, MPI_Comm comm, const std::vector<int>& world)
      : procs_(procs), mpi_(mpi), tracked_(comm, world) {}
  ~MpiComm() override {
    std::lock_guard<std::mutex> l(mpi_);
    tracked_.free(/*also_comm=*/true);
  }
  int rank() const override { return tracked_.rank; }
  int size() const override { return tracked_.size; }

  absl::Status allGather(const void* send, void* recv, const std::vector<int64_t>& counts,
                         const WaitLabel& label) override {
    std::vector<int> sizes, displacements;
    RETURN_IF_ERROR(intCounts(counts, label, sizes, displacements));
    std::lock_guard<std::mutex> l(mpi_);
    procs_.beginWait(label);
    tracked_.arrive(procs_, label, 0);
    const int rc = MPI_Allgatherv(send, sizes[static_cast<size_t>(tracked_.rank)], MPI_BYTE, recv,
                                  sizes.data(), displacements.data(), MPI_BYTE, tracked_.comm);
    procs_.endWait();
    if (rc != MPI_SUCCESS) fail(label, rc);
    return absl::OkStatus();
  }

  absl::Status allToAll(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                        const std::vector<int64_t>& recv_counts, const WaitLabel& label) override {
    std::vector<int> send_sizes, send_at, recv_sizes, recv_at;
    RETURN_IF_ERROR(intCounts(send_counts, label, send_sizes, send_at));
    RETURN_IF_ERROR(intCounts(recv_counts, label, recv_sizes, recv_at));
    std::lock_guard<std::mutex> l(mpi_);
    procs_.beginWait(label);
    tracked_.arrive(procs_, label, 0);
    const int rc = MPI_Alltoallv(send, send_sizes.data(), send_at.data(), MPI_BYTE, recv,
                                 recv_sizes.data(), recv_at.data(), MPI_BYTE, tracked_.comm);
    procs_.endWait();
    if (rc != MPI_SUCCESS) fail(label, rc);
    return absl::OkStatus();
  }

  absl::Status broadcast(void* data, int64_t bytes, int root, const WaitLabel& label) override {
    if (bytes > std::numeric_limits<int>::max())
      return absl::ResourceExhaustedError(
          absl::StrCat(label.collective, " on ", label.device, ": ", bytes,
                       " bytes are more than one MPI call carries (2 GiB)"));
    std::lock_guard<std::mutex> l(mpi_);
    procs_.beginWait(label);
    tracked_.arrive(procs_, label, 0);
    const int rc = MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, tracked_.comm);
    procs_.endWait();
    if (rc != MPI_SUCCESS) fail(label, rc);
    return absl::OkStatus();
  }

 private:
  // Byte counts and their displacements as MPI's ints: a bucket over 2 GiB per process is
  // refused, not wrapped.
  static absl::Status intCounts(const std::vector<int64_t>& counts, const WaitLabel& label,
                                std::vector<int>& sizes, std::vector<int>& displacements) {
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
    return absl::OkStatus();
  }

  // A failed collective leaves the ranks out of step: no rank can go on, so all stop.
  [[noreturn]] void fail(const WaitLabel& label, int rc) {
    procs_.abortAll(absl::StrCat(label.collective, " on ", label.device, " failed: ", mpiError(rc),
                                 " (a rank died?)"));
  }

  Processes& procs_;
  std::mutex& mpi_;
  TrackedComm tracked_;
};

}  // namespace
#endif

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
  std::vector<int> everyone(static_cast<size_t>(p.size_));
  for (int r = 0; r < p.size_; ++r) everyone[static_cast<size_t>(r)] = r;
  s->world = std::make_unique<TrackedComm>(MPI_COMM_WORLD, everyone);
  std::lock_guard<std::mutex> l(s->mu);
  if (!s->watchdog.joinable()) {
    try {
      s->watchdog = std::thread([&p] { p.watch(); });
    } catch (const std::system_error& e) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot start the watchdog thread of this rank: ", e.what()));
    }
  }
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
  if (s->world) s->world->free(/*also_comm=*/false);
  s->world.reset();
  MPI_Finalize();
#endif
  s->mpi_started = false;
}

std::string Processes::prefix() const {
  return several() ? absl::StrCat("rank ", rank_, ": ") : std::string();
}

absl::StatusOr<std::shared_ptr<ProcessComm>> Processes::communicator(
    const std::vector<int>& ranks) {
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
  return std::shared_ptr<ProcessComm>(std::make_shared<MpiComm>(*this, state_->mpi, comm, ranks));
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
  // The values ride on the arrival markers: one exchange, no MPI_Allreduce after it.
  std::lock_guard<std::mutex> l(state_->mpi);
  const WaitLabel label{std::string(what), "the host thread"};
  beginWait(label);
  const std::vector<uint64_t> all =
      state_->world->arrive(*this, label, static_cast<uint64_t>(static_cast<uint32_t>(mine)));
  endWait();
  for (uint64_t v : all) mine = std::max(mine, static_cast<int>(static_cast<uint32_t>(v)));
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
  state_->world->arrive(*this, label, 0);
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
      rc =
          MPI_Send(mine.data() + at, static_cast<int>(std::min<int64_t>(kMessagePiece, bytes - at)),
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
  return broadcastFrom(0, bytes, what);
}

absl::Status Processes::broadcastFrom(int root, std::string& bytes, absl::string_view what) {
  if (!several()) return absl::OkStatus();
#ifdef TANDEM_HAVE_MPI
  std::lock_guard<std::mutex> l(state_->mpi);
  const WaitLabel label{std::string(what), "the host thread"};
  beginWait(label);
  // The length rides on the arrival markers.
  const std::vector<uint64_t> sizes =
      state_->world->arrive(*this, label, static_cast<uint64_t>(bytes.size()));
  const int64_t size = static_cast<int64_t>(sizes[static_cast<size_t>(root)]);
  bytes.resize(static_cast<size_t>(size));
  int rc = MPI_SUCCESS;
  for (int64_t at = 0; at < size && rc == MPI_SUCCESS; at += kMessagePiece)
    rc = MPI_Bcast(bytes.data() + at, static_cast<int>(std::min<int64_t>(kMessagePiece, size - at)),
                   MPI_BYTE, root, MPI_COMM_WORLD);
  endWait();
  if (rc != MPI_SUCCESS)
    abortAll(absl::StrCat(what, " on the host thread failed: ", mpiError(rc), " (a rank died?)"));
  return absl::OkStatus();
#else
  (void)root;
  (void)bytes;
  (void)what;
  return absl::FailedPreconditionError("several processes, but this tandem was built without MPI");
#endif
}

absl::Status Processes::agree(const std::vector<std::pair<std::string, std::string>>& settings,
                              absl::string_view what) {
  using namespace std::string_literals;
  if (!several()) return absl::OkStatus();
  std::string text;  // name, value, name, value, ... each ended by a NUL
  for (const auto& [name, value] : settings) absl::StrAppend(&text, name, "\0"s, value, "\0"s);
  uint64_t digest = fnv1a(text);
#ifdef TANDEM_HAVE_MPI
  std::vector<uint64_t> digests;
  {
    std::lock_guard<std::mutex> l(state_->mpi);
    const WaitLabel label{std::string(what), "the host thread"};
    beginWait(label);
    digests = state_->world->arrive(*this, label, digest);
    endWait();
  }
  int odd = -1;  // the first rank that differs from rank 0
  for (int r = 1; r < size_ && odd < 0; ++r)
    if (digests[static_cast<size_t>(r)] != digests[0]) odd = r;
  if (odd < 0) return absl::OkStatus();
  // Rank 0's settings and the first odd rank's, to every rank: each then names the first
  // setting that differs, by the same rule.
  std::string first = text, other = text;
  RETURN_IF_ERROR(broadcastFrom(0, first, "rank 0's settings"));
  RETURN_IF_ERROR(broadcastFrom(odd, other, "the settings of a rank that differs"));
  const bool mine_differ = digests[static_cast<size_t>(rank_)] != digests[0];
  auto parse = [](const std::string& t) {
    std::vector<std::string> fields = absl::StrSplit(t, '\0');
    std::map<std::string, std::string> out;
    std::vector<std::string> order;
    for (size_t i = 0; i + 1 < fields.size(); i += 2) {
      out[fields[i]] = fields[i + 1];
      order.push_back(fields[i]);
    }
    return std::make_pair(order, out);
  };
  const auto [names, zero] = parse(first);
  const auto theirs = parse(mine_differ ? text : other).second;
  const std::string who = mine_differ ? "this rank" : absl::StrCat("rank ", odd);
  for (const std::string& name : names) {
    const auto it = theirs.find(name);
    const std::string value = it == theirs.end() ? "(none)" : it->second;
    if (value != zero.at(name))
      return absl::InvalidArgumentError(absl::StrCat(
          name, " is ", value, " on ", who, " but ", zero.at(name),
          " on rank 0: every rank must run with the same settings (mpirun gives each app "
          "context its own arguments)"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(who, " has other settings than rank 0 (", what,
                   "): every rank must run with the same settings and the same tandem build"));
#else
  (void)what;
  (void)digest;
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
  if (--state_->depth == 0) state_->missing.reset();
}

void Processes::setMissing(std::vector<int> world_ranks) {
  std::lock_guard<std::mutex> l(state_->mu);
  state_->missing = std::move(world_ranks);
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

namespace {

// "rank 1", "ranks 1 and 3", "ranks 1, 2 and 5".
std::string rankList(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    absl::StrAppend(&out, i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ", ranks[i]);
  return out;
}

// Who the wait in progress is for, from its arrival markers: the rank(s) that did not
// arrive (it died or stalls), or that every rank did and the transfer itself stalls.
std::string whoIsMissing(const std::optional<std::vector<int>>& missing, const char* dead) {
  if (!missing) return "; this process's own devices had not all reached it (one of them stalls)";
  if (missing->empty())
    return "; every rank had arrived, so one died or stalls inside the transfer";
  return absl::StrCat(" for ", rankList(*missing), ", which did not arrive (", dead, ")");
}

}  // namespace

void Processes::watch() {
  State& s = *state_;
  // A stop signal that comes while a collective waits: mpirun ends the job (a rank died
  // or exited) with SIGTERM and a SIGKILL one second later; a healthy collective finishes
  // well within the grace, so one still waiting after it will not.
  constexpr double kSignalGrace = 0.3;
  // A tick that comes this much later than its 20 ms means this process did not run (it
  // was stopped, SIGSTOP, or starved): that time is not counted as waiting for others, so
  // a rank that is woken does not blame the ranks it kept waiting.
  constexpr auto kTick = std::chrono::milliseconds(20);
  constexpr auto kNotRunning = std::chrono::seconds(1);
  std::unique_lock<std::mutex> l(s.mu);
  bool signalled = false;  // a signal came during the wait in progress, at signal_seen
  Clock::time_point signal_seen = Clock::now(), last_tick = Clock::now();
  // Every GPU collective stops waiting before the process ends (ncclCommAbort).
  auto abortSources = [&] {
    for (AsyncWaits* a : s.async) a->abort();
  };
  while (!s.stop) {
    s.cv.wait_for(l, kTick);
    if (s.stop) break;
    const Clock::time_point now = Clock::now();
    if (now - last_tick > kNotRunning && s.depth > 0) s.since += now - last_tick - kTick;
    last_tick = now;
    const int sig = s.signal != nullptr ? s.signal() : 0;
    // The longest wait in progress: a blocking call (MPI), or a collective on a GPU.
    bool waiting = false, on_gpu = false;
    WaitLabel label;
    double waited = 0;
    if (s.depth > 0) {
      waiting = true;
      label = s.label;
      waited = std::chrono::duration<double>(now - s.since).count();
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
        on_gpu = true;
        label = st.label;
        waited = st.seconds;
      }
    }
    if (!waiting) {
      signalled = false;
      continue;
    }
    // The arrival markers name the ranks an MPI exchange misses; NCCL cannot say.
    auto who = [&](const char* dead) {
      return on_gpu ? std::string(": a rank died or stalls (NCCL does not say which)")
                    : whoIsMissing(s.missing, dead);
    };
    if (sig != 0 && !signalled) {
      signalled = true;
      signal_seen = now;
    }
    if (signalled && std::chrono::duration<double>(now - signal_seen).count() >= kSignalGrace) {
      const std::string message = absl::StrFormat(
          "stopped by %s while waiting %.1f s in %s on %s%s, and mpirun ends the job",
          sig == SIGTERM  ? "SIGTERM"
          : sig == SIGINT ? "SIGINT"
                          : absl::StrCat("signal ", sig),
          waited, label.collective, label.device, who("it died or exited"));
      abortSources();
      l.unlock();
      const std::string line = absl::StrCat("tandem: ", prefix(), message, "\n");
      (void)!::write(STDERR_FILENO, line.data(), line.size());
      std::_Exit(128 + sig);
    }
    if (s.timeout > 0 && waited >= s.timeout) {
      const std::string message = absl::StrFormat(
          "waited %.1f s (--collective-timeout %g) in %s on %s%s; stopping every rank", waited,
          s.timeout, label.collective, label.device, who("it died or stalls"));
      abortSources();
      l.unlock();
      abortAll(message);
    }
  }
}

}  // namespace tandem::backend
