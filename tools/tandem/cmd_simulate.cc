// `tandem simulate`: what a model's data-parallel step would do on N GPUs. The real step is
// compiled (the same pipeline as dump and train: buckets, schedule, overlap), one device's
// two streams are replayed as an event simulation (sim/event_sim.h) with roofline compute
// costs of the named GPU, or costs measured here (--gpu cpu), and alpha-beta all_reduce
// costs over the device count, and the table says step time, exposed communication and
// efficiency per count.

#include <algorithm>
#include <iostream>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ir/interfaces.h"
#include "ir/placement.h"
#include "ir/plan.h"
#include "ir/status_macros.h"
#include "runtime/measure_step.h"
#include "sim/cost_model.h"
#include "sim/event_sim.h"
#include "sim/gpu_specs.h"
#include "sim/roofline.h"
#include "sim/step_replay.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/model_flags.h"
#include "tools/tandem/setting_flags.h"
#include "train/compile.h"

namespace tandem::tools {
namespace {

constexpr int64_t kMaxSimulatedDevices = 65536;
// --gpu cpu runs every count here, one worker thread per device.
constexpr int64_t kMaxCpuDevices = 64;
constexpr int kCpuWarmupSteps = 2;
constexpr int kDefaultMeasureSteps = 10;  // --measure-steps unset

// (Not model_flags.cc's flagError: the unity build joins the files.)
absl::Status badFlag(absl::string_view flag, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", message));
}

absl::StatusOr<std::vector<int64_t>> parseCounts(const std::string& text, bool cpu) {
  std::vector<int64_t> counts;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(item, &n) || n < 1 || n > kMaxSimulatedDevices)
      return badFlag("--devices", absl::StrCat("'", item, "' is not a device count from 1 to ",
                                               kMaxSimulatedDevices,
                                               " (simulate takes counts such as 8,64,512,1024)"));
    if (cpu && n > kMaxCpuDevices)
      return badFlag("--devices", absl::StrCat(n,
                                               " devices: --gpu cpu runs every count on this "
                                               "machine, at most ",
                                               kMaxCpuDevices));
    counts.push_back(n);
  }
  return counts;
}

struct Sweep {
  std::string name;  // "bucket-mb" or "first-bucket-mb"
  std::vector<double> values;
};

absl::StatusOr<Sweep> parseSweep(const std::string& text) {
  std::pair<std::string, std::string> kv = absl::StrSplit(text, absl::MaxSplits('=', 1));
  Sweep s{kv.first, {}};
  if (s.name != "bucket-mb" && s.name != "first-bucket-mb")
    return badFlag("--sweep", absl::StrCat("'", text,
                                           "' sweeps no known setting (expected "
                                           "bucket-mb=V1,V2,... or first-bucket-mb=V1,V2,...)"));
  for (absl::string_view item : absl::StrSplit(kv.second, ',')) {
    double v = 0;
    if (!absl::SimpleAtod(item, &v) || !(v > 0) || v > 1e9)
      return badFlag("--sweep",
                     absl::StrCat("'", item, "' is not a size in MiB (> 0) in '", text, "'"));
    s.values.push_back(v);
  }
  return s;
}

absl::StatusOr<sim::Topology> parseLinks(const std::string& text, const sim::GpuSpec& gpu,
                                         int64_t gpus_per_node) {
  std::vector<std::string> names = absl::StrSplit(text, ',');
  if (names.empty() || names.size() > 2)
    return badFlag("--link", absl::StrCat("'", text,
                                          "' is not one link or two (within a node, between "
                                          "nodes), such as nvlink,ib"));
  sim::Topology t{.gpus_per_node = gpus_per_node};
  auto intra = sim::linkByName(names[0], gpu);
  if (!intra.ok()) return badFlag("--link", intra.status().message());
  auto inter = sim::linkByName(names.back(), gpu);
  if (!inter.ok()) return badFlag("--link", inter.status().message());
  t.intra = *intra;
  t.inter = *inter;
  return t;
}

// One prediction: the replay of a compiled step at one device count.
struct Row {
  int64_t devices = 0;
  sim::SimResult result;
  std::optional<double> measured_s;  // --gpu cpu
  double variable_bytes = 0;         // per device: parameters, optimizer state, buffers
};

// The variables one of `p` devices holds: each replica whole, a sharded one (the state of
// --shard-updates) its 1/p (the shards of a flat variable differ by one element at most).
double variableBytesPerDevice(const ir::Module& m, int64_t p) {
  double bytes = 0;
  for (const ir::Var& v : m.vars())
    bytes += static_cast<double>(v.type.bytes()) / (v.sharded() ? static_cast<double>(p) : 1.0);
  return bytes;
}

// A one-device step has nothing to shard: it runs the replicated update.
ModelFlags atDeviceCount(ModelFlags mf, int64_t p) {
  if (p == 1) mf.shard_updates = false;
  return mf;
}

// The collective costs for p devices: all_reduce, reduce_scatter and all_gather by the
// alpha-beta models; the input split and the broadcasts cost nothing here (the split is
// the host-to-device copy of the batch, which data loaders prefetch during the previous
// step; broadcasts run only in @init).
// A step compiled at `compiled` devices: a sharded update (--shard-updates) steps 1/p of its
// bucket at p devices, so its cost is scaled by compiled / p; packing and unpacking the
// bucket stay whole.
sim::NodeCost modelCosts(const std::vector<double>& compute_s, int64_t p, int64_t compiled,
                         const sim::Topology& topo) {
  return [&compute_s, p, compiled, topo](const ir::Node& n) {
    if (ir::streamOf(n) == ir::StreamKind::kCompute) {
      const std::optional<ir::UpdateView> u = ir::UpdateView::of(n);
      const bool sharded = u && u->info().sharded_of.has_value();
      return compute_s[n.id()] *
             (sharded ? static_cast<double>(compiled) / static_cast<double>(p) : 1.0);
    }
    return sim::collectiveSeconds(n, p, topo);
  };
}

struct Setting {
  std::string gpu_text;
  sim::GpuSpec gpu;
  sim::Topology topo;
  std::optional<double> step_ms;
};

// A step whose activations and variables cannot fit one GPU's memory predicts nothing
// that could run: refused, naming what it needs (the memory plan of device 0's training
// step, and every variable's replica).
absl::Status checkFitsTheGpu(const ir::Module& m, const SimulateFlags& f, const sim::GpuSpec& gpu) {
  const ir::GraphPlan* plan = m.graph(ir::kTrainGraph)->plan();
  if (plan == nullptr || plan->arenas.empty()) return absl::OkStatus();
  const double variables = variableBytesPerDevice(m, static_cast<int64_t>(m.devices().size()));
  const double activations = static_cast<double>(plan->arenas[0].bytes);
  if (activations + variables <= gpu.memory_bytes) return absl::OkStatus();
  return badFlag(
      "--batch-per-device",
      absl::StrFormat("%d images of %s need %.1f GB per device (%.1f GB of "
                      "activations, %.2f GB of variables), more than an %s's %.0f GB; "
                      "lower --batch-per-device",
                      f.batch_per_device, f.model.model, (activations + variables) / 1e9,
                      activations / 1e9, variables / 1e9, gpu.name, gpu.memory_bytes / 1e9));
}

// Roofline mode: the per-device graph is the same at every device count (an even split
// of a per-device batch; only the collectives' device lists grow), so the step is compiled
// once, at 2 devices, and each count changes only the all_reduce costs.
absl::StatusOr<std::vector<Row>> predictRoofline(const SimulateFlags& f, ModelFlags mf,
                                                 const std::vector<int64_t>& counts,
                                                 const Setting& s) {
  // (A std::string, not a literal: GCC 12's -Wrestrict misfires on a literal assigned
  // here, its bug 105329.)
  mf.written.devices = std::string("2");
  mf.batch = 2 * f.batch_per_device;
  ASSIGN_OR_RETURN(ModelChoice choice, resolveModelFlags(mf, /*for_training=*/false));
  ASSIGN_OR_RETURN(std::unique_ptr<ir::Module> m,
                   training::compileModel(choice.spec, choice.compile, nullptr, FlagNames()));
  const ir::Graph& g = *m->graph(ir::kTrainGraph);
  RETURN_IF_ERROR(checkFitsTheGpu(*m, f, s.gpu));
  std::vector<double> compute_s(g.idBound(), 0.0);
  double total = 0;
  for (const auto& n : g.nodes())
    if (ir::streamOf(*n) == ir::StreamKind::kCompute && n->device() == m->devices()[0]) {
      compute_s[n->id()] = sim::rooflineSeconds(sim::nodeWork(*n), s.gpu);
      total += compute_s[n->id()];
    }
  if (s.step_ms && total > 0)
    for (double& c : compute_s) c *= *s.step_ms * 1e-3 / total;
  std::vector<Row> rows;
  for (int64_t p : counts)
    rows.push_back({.devices = p,
                    .result = sim::simulateStreams(
                        sim::deviceSchedule(*m, g, 0, modelCosts(compute_s, p, 2, s.topo))),
                    .variable_bytes = variableBytesPerDevice(*m, p)});
  return rows;
}

// CPU mode: every count is compiled for cpu:0..p-1 and run here; the replay uses the
// measured per-node times of device 0 (collectives included: the local communicator is
// no alpha-beta link), and the measured step stands beside it.
absl::StatusOr<std::vector<Row>> predictCpu(const SimulateFlags& f, ModelFlags mf,
                                            const std::vector<int64_t>& counts) {
  std::vector<Row> rows;
  for (int64_t p : counts) {
    mf.written.devices = absl::StrCat(p);
    mf.batch = p * f.batch_per_device;
    ASSIGN_OR_RETURN(ModelChoice choice,
                     resolveModelFlags(atDeviceCount(mf, p), /*for_training=*/false));
    ASSIGN_OR_RETURN(std::unique_ptr<ir::Module> m,
                     training::compileModel(choice.spec, choice.compile, nullptr, FlagNames()));
    ASSIGN_OR_RETURN(runtime::StepMeasurement measured,
                     runtime::measureStep(std::move(m), kCpuWarmupSteps,
                                          f.measure_steps.value_or(kDefaultMeasureSteps)));
    const ir::Module& module = measured.executor->module();
    const std::vector<double>& times = measured.node_seconds;
    auto cost = [&times](const ir::Node& n) { return times[n.id()]; };
    rows.push_back(
        {p,
         sim::simulateStreams(sim::deviceSchedule(module, *module.graph(ir::kTrainGraph), 0, cost)),
         measured.step_s, variableBytesPerDevice(module, p)});
  }
  return rows;
}

absl::StatusOr<std::vector<Row>> predict(const SimulateFlags& f, const ModelFlags& mf,
                                         const std::vector<int64_t>& counts, const Setting& s) {
  if (s.gpu_text == "cpu") return predictCpu(f, mf, counts);
  // One device runs the replicated update (nothing to shard), predicted on its own.
  const bool one = std::find(counts.begin(), counts.end(), 1) != counts.end();
  if (!mf.shard_updates || !one) return predictRoofline(f, mf, counts, s);
  std::vector<int64_t> more;
  for (int64_t p : counts)
    if (p != 1) more.push_back(p);
  ASSIGN_OR_RETURN(std::vector<Row> rows, predictRoofline(f, atDeviceCount(mf, 1), {1}, s));
  if (more.empty()) return rows;
  ASSIGN_OR_RETURN(std::vector<Row> sharded, predictRoofline(f, mf, more, s));
  for (Row& r : sharded) rows.push_back(std::move(r));
  std::sort(rows.begin(), rows.end(),
            [](const Row& a, const Row& b) { return a.devices < b.devices; });
  return rows;
}

// The 1-device step time efficiency is measured against; predicted with the same costs.
absl::StatusOr<double> oneDeviceStep(const SimulateFlags& f, const ModelFlags& mf,
                                     const std::vector<Row>& rows, const Setting& s) {
  for (const Row& r : rows)
    if (r.devices == 1) return r.result.step_s;
  ASSIGN_OR_RETURN(std::vector<Row> one, predict(f, atDeviceCount(mf, 1), {1}, s));
  return one[0].result.step_s;
}

std::string ms(double seconds) { return absl::StrFormat("%.2f", seconds * 1e3); }

void printTable(const std::vector<Row>& rows, double one_step_s, int64_t batch, bool cpu) {
  std::cout << absl::StrFormat("%8s %10s %11s %9s %16s %13s %12s %13s", "devices", "step ms",
                               "compute ms", "comm ms", "exposed comm ms", "efficiency %",
                               "images/s", "variables MB");
  if (cpu) std::cout << absl::StrFormat(" %12s %8s", "measured ms", "error %");
  std::cout << "\n";
  for (const Row& r : rows) {
    const sim::SimResult& x = r.result;
    std::cout << absl::StrFormat(
        "%8d %10s %11s %9s %16s %13.1f %12.0f %13.2f", r.devices, ms(x.step_s), ms(x.compute_s),
        ms(x.comm_s), ms(x.exposed_comm_s), 100 * one_step_s / x.step_s,
        static_cast<double>(r.devices * batch) / x.step_s, r.variable_bytes / 1e6);
    if (r.measured_s)
      std::cout << absl::StrFormat(" %12s %+8.1f", ms(*r.measured_s),
                                   100 * (x.step_s - *r.measured_s) / *r.measured_s);
    std::cout << "\n";
  }
}

}  // namespace

absl::Status runSimulate(const SimulateFlags& f) {
  Setting s{.gpu_text = f.gpu, .step_ms = f.step_ms};
  const bool cpu = f.gpu == "cpu";
  if (cpu && f.step_ms)
    return badFlag("--step-ms", "scales modelled GPU costs; --gpu cpu measures them instead");
  if (cpu && f.link)
    return badFlag("--link", "models GPU links; --gpu cpu measures the local communicator instead");
  if (!cpu && f.measure_steps)
    return badFlag("--measure-steps",
                   absl::StrCat("times steps on this CPU (--gpu cpu); --gpu ", f.gpu,
                                " predicts from the GPU's datasheet without running any"));
  ASSIGN_OR_RETURN(std::vector<int64_t> counts,
                   parseCounts(f.devices.value_or(cpu ? "1,2" : "1,8,64,512,1024"), cpu));
  if (!cpu) {
    auto gpu = sim::gpuByName(f.gpu);
    if (!gpu.ok())
      return badFlag("--gpu", absl::StrCat(gpu.status().message(), ", or cpu to measure here"));
    s.gpu = *gpu;
    ASSIGN_OR_RETURN(s.topo, parseLinks(f.link.value_or("nvlink,ib"), s.gpu, f.gpus_per_node));
  }
  std::optional<Sweep> sweep;
  if (f.sweep) {
    ASSIGN_OR_RETURN(sweep, parseSweep(*f.sweep));
  }
  // The model and its settings are checked once, before any work.
  ModelFlags mf = f.model;
  mf.written.devices = std::string(mf.shard_updates ? "2" : "1");  // a sharded update needs two
  mf.batch = f.batch_per_device * (mf.shard_updates ? 2 : 1);
  RETURN_IF_ERROR(resolveModelFlags(mf, /*for_training=*/false).status());

  // Printed once the predictions are made: a step that cannot be predicted (it does not
  // fit the GPU) is one line on standard error and nothing on standard output.
  const std::string heading = absl::StrCat(
      f.model.model, ", ", f.batch_per_device, " per device, ",
      cpu ? absl::StrCat("per-node times measured on this machine's CPU devices "
                         "(median of ",
                         f.measure_steps.value_or(kDefaultMeasureSteps), " steps)\n")
          : absl::StrCat(s.gpu.name, " roofline (", s.gpu.source, ")",
                         f.step_ms
                             ? absl::StrCat(", compute scaled to ", *f.step_ms, " ms per step")
                             : std::string(),
                         "; all_reduce over ", s.topo.intra.name, " within ", f.gpus_per_node,
                         " devices, ", s.topo.inter.name, " between nodes\n"));
  if (!sweep) {
    ASSIGN_OR_RETURN(std::vector<Row> rows, predict(f, mf, counts, s));
    ASSIGN_OR_RETURN(double one, oneDeviceStep(f, mf, rows, s));
    std::cout << heading;
    printTable(rows, one, f.batch_per_device, cpu);
    return absl::OkStatus();
  }
  // Per value of the swept setting a table's worth of steps; per count the fastest.
  std::vector<std::vector<Row>> tables;
  std::vector<double> ones;
  for (double v : sweep->values) {
    ModelFlags swept = mf;
    (sweep->name == "bucket-mb" ? swept.bucket_mb : swept.first_bucket_mb) = v;
    ASSIGN_OR_RETURN(std::vector<Row> rows, predict(f, swept, counts, s));
    ASSIGN_OR_RETURN(double one, oneDeviceStep(f, swept, rows, s));
    tables.push_back(std::move(rows));
    ones.push_back(one);
  }
  std::cout << heading << absl::StrFormat("%8s", "devices");
  for (double v : sweep->values)
    std::cout << absl::StrFormat(" %14s", absl::StrCat(sweep->name, "=", v));
  std::cout << absl::StrFormat(" %14s %13s\n", absl::StrCat("best ", sweep->name), "efficiency %");
  for (size_t i = 0; i < counts.size(); ++i) {
    std::cout << absl::StrFormat("%8d", counts[i]);
    size_t best = 0;
    for (size_t k = 0; k < tables.size(); ++k) {
      std::cout << absl::StrFormat(" %11s ms", ms(tables[k][i].result.step_s));
      if (tables[k][i].result.step_s < tables[best][i].result.step_s) best = k;
    }
    std::cout << absl::StrFormat(" %14g %13.1f\n", sweep->values[best],
                                 100 * ones[best] / tables[best][i].result.step_s);
  }
  return absl::OkStatus();
}

}  // namespace tandem::tools
