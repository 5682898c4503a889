// One gradient bucket's all_reduce through the two CPU paths, on the backend seam alone:
//
//   mpi_allreduce_bench [MIB] [REPS]                          in-process: 2 devices, the
//                                                             local communicator
//   mpirun --allow-run-as-root -np 2 mpi_allreduce_bench ...  2 processes of 1 device, the
//                                                             communicator across processes
//
// Each rank's bucket is MIB MiB of f32 (default 25, DDP's bucket cap); prints the median
// and the fastest of REPS (default 20) all_reduces after 3 warm-up ones, from the enqueue
// to the end of every rank's comm stream (rank 0's figures under mpirun, after a barrier
// of one all_reduce so that both start together). Under mpirun it also times the per-step
// stop agreement that `train` makes (Processes::anyRank).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/backend.h"
#include "backend/backends.h"
#include "backend/processes.h"

namespace {

using tandem::backend::Device;

[[noreturn]] void die(const absl::Status& s) {
  std::fprintf(stderr, "mpi_allreduce_bench: %s\n", std::string(s.message()).c_str());
  std::exit(1);
}
template <typename T>
T orDie(absl::StatusOr<T> v) {
  if (!v.ok()) die(v.status());
  return *std::move(v);
}

}  // namespace

int main(int argc, char** argv) {
  namespace be = tandem::backend;
  namespace ir = tandem::ir;
  const double mib = argc > 1 ? std::atof(argv[1]) : 25;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  if (!(mib > 0) || reps < 1) {
    std::fprintf(stderr, "usage: mpi_allreduce_bench [MIB > 0] [REPS >= 1]\n");
    return 2;
  }
  be::Processes* procs = orDie(be::Processes::start());
  be::registerBackends();
  const ir::DeviceKind cpu_kind = orDie(ir::DeviceKind::named("cpu"));
  const be::Backend* cpu = orDie(be::backendFor(cpu_kind));
  const int local = procs->several() ? 1 : 2;
  const int64_t elements = static_cast<int64_t>(mib * (1 << 20) / 4);
  const ir::TensorType type{ir::DType::kF32, {elements}};

  std::vector<std::unique_ptr<Device>> devices;
  std::vector<Device*> raw;
  std::vector<ir::Device> members;
  for (int r = 0; r < procs->size(); ++r)
    for (int d = 0; d < local; ++d) members.push_back({cpu_kind, d, r});
  for (int d = 0; d < local; ++d) {
    devices.push_back(orDie(cpu->createDevice({cpu_kind, d, procs->rank()}, {.index = d})));
    raw.push_back(devices.back().get());
  }
  std::unique_ptr<be::CommunicatorGroup> group =
      procs->several()
          ? orDie(cpu->createProcessCommunicators(
                raw, members, orDie(procs->communicator(std::vector<int>{0, 1}))))
          : orDie(cpu->createCommunicators(raw));
  std::vector<be::DeviceBuffer> buffers;
  for (Device* d : raw) {
    buffers.push_back(orDie(d->allocate(type.bytes())));
    std::fill_n(static_cast<float*>(buffers.back().data()), elements, 1.0f);
  }
  auto once = [&] {
    for (int d = 0; d < local; ++d) {
      const be::TensorView v = buffers[static_cast<size_t>(d)].view(type);
      if (absl::Status s = group->rank(d).allReduce({&v, 1}, {&v, 1}, be::ReduceOp::kMean,
                                                    raw[static_cast<size_t>(d)]->commStream());
          !s.ok())
        die(s);
    }
    for (Device* d : raw)
      if (absl::Status s = d->commStream().synchronize(); !s.ok()) die(s);
  };
  for (int i = 0; i < 3; ++i) once();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    once();  // the ranks leave it together: the timed one starts at the same moment
    const auto start = std::chrono::steady_clock::now();
    once();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  if (procs->rank() == 0)
    std::printf("%s: all_reduce of %.1f MiB f32 per rank, 2 ranks: median %.2f ms, fastest %.2f ms "
                "(%d runs)\n",
                procs->several() ? "2 processes x 1 device (MPI)" : "1 process x 2 devices (local)",
                mib, ms[ms.size() / 2], ms.front(), reps);
  if (procs->several()) {
    // What `train` adds to every step under mpirun: the ranks agree whether any of them
    // was asked to stop (Processes::anyRank, one MPI_Allreduce of an int).
    constexpr int kAgreements = 2000;
    std::vector<double> us;
    for (int i = 0; i < kAgreements; ++i) {
      const auto start = std::chrono::steady_clock::now();
      if (absl::StatusOr<bool> any = procs->anyRank(false, "stop agreement"); !any.ok())
        die(any.status());
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() -
                                                             start)
                       .count());
    }
    std::sort(us.begin(), us.end());
    if (procs->rank() == 0)
      std::printf("2 processes: the per-step stop agreement (anyRank): median %.1f us, 99th "
                  "percentile %.1f us (%d runs)\n",
                  us[us.size() / 2], us[us.size() * 99 / 100], kAgreements);
  }
  group.reset();
  devices.clear();
  be::Processes::finish();
  return 0;
}
