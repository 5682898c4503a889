#pragma once

// A backend that runs nothing and records what the executor asks of it: per stream, the
// waits, launches, collectives and copies in issue order (and all streams together in the
// order the host issued them). Registered for the cpu kind by
// a ScopedBackendOverride, it shows that the executor works through the seam alone: a
// module loads and steps on it with no CPU code involved.

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "tests/device_kinds.h"

namespace tandem::testing {

/// What happened, stream by stream.
class Recorder {
 public:
  /// Labels the next piece of work enqueued (the test's before-node hook sets it).
  void setLabel(std::string label) { label_ = std::move(label); }
  std::string takeLabel() {
    std::string label = std::move(label_);
    label_ = std::string(1, '?');  // not exchange(label_, "?"): GCC 12 warns (-Wrestrict)
    return label;
  }

  void log(const std::string& stream, std::string line) {
    std::lock_guard<std::mutex> l(mu_);
    sequence_.push_back(absl::StrCat(stream, ": ", line));
    lines_[stream].push_back(std::move(line));
  }
  std::map<std::string, std::vector<std::string>> lines() const {
    std::lock_guard<std::mutex> l(mu_);
    return lines_;
  }
  /// Every line of every stream, "stream: line", in the order the host issued them.
  std::vector<std::string> sequence() const {
    std::lock_guard<std::mutex> l(mu_);
    return sequence_;
  }
  void clear() {
    std::lock_guard<std::mutex> l(mu_);
    failing_calls_.clear();
    lines_.clear();
    sequence_.clear();
    counters_.clear();
    addresses_.clear();
  }
  /// Addresses a kind of copy touched, in order ("prefetch into cpu:0" -> the slices).
  void note(const std::string& what, const void* p) {
    std::lock_guard<std::mutex> l(mu_);
    addresses_[what].push_back(p);
  }
  std::vector<const void*> addresses(const std::string& what) const {
    std::lock_guard<std::mutex> l(mu_);
    auto it = addresses_.find(what);
    return it == addresses_.end() ? std::vector<const void*>{} : it->second;
  }
  /// Copies enqueued on `stream` from now on fail (a copy engine that reports an error).
  void failCopiesOn(std::string stream) { failing_stream_ = std::move(stream); }
  bool copiesFailOn(const std::string& stream) const { return stream == failing_stream_; }
  int counter(const std::string& what) const {
    std::lock_guard<std::mutex> l(mu_);
    auto it = counters_.find(what);
    return it == counters_.end() ? 0 : it->second;
  }
  void count(const std::string& what) {
    std::lock_guard<std::mutex> l(mu_);
    ++counters_[what];
  }

  /// Makes the named call fail from now on: "allReduce on rank 1", "record",
  /// "recorded", "replay" or "makeStepRecorder" (what a CUDA graph capture or NCCL may
  /// refuse).
  void fail(std::string call) {
    std::lock_guard<std::mutex> l(mu_);
    failing_calls_.push_back(std::move(call));
  }
  bool fails(const std::string& call) const {
    std::lock_guard<std::mutex> l(mu_);
    for (const std::string& f : failing_calls_)
      if (f == call) return true;
    return false;
  }

  /// Streams register while they exist, so that what outlives them can tell (a step
  /// recorder destroyed after its streams is the use after free a CUDA graph's teardown
  /// had: ASan sees the read, this sees the order).
  void born(const void* stream) {
    std::lock_guard<std::mutex> l(mu_);
    alive_.push_back(stream);
  }
  void died(const void* stream) {
    std::lock_guard<std::mutex> l(mu_);
    alive_.erase(std::remove(alive_.begin(), alive_.end(), stream), alive_.end());
  }
  bool alive(const void* stream) const {
    std::lock_guard<std::mutex> l(mu_);
    return std::find(alive_.begin(), alive_.end(), stream) != alive_.end();
  }
  /// What was destroyed after something it needed ("step recorder after cpu:0/compute").
  void outlived(std::string what) {
    std::lock_guard<std::mutex> l(mu_);
    outlived_.push_back(std::move(what));
  }
  std::vector<std::string> outlivedList() const {
    std::lock_guard<std::mutex> l(mu_);
    return outlived_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::vector<std::string>> lines_;
  std::vector<std::string> sequence_;
  std::map<std::string, int> counters_;
  std::map<std::string, std::vector<const void*>> addresses_;
  std::string failing_stream_;
  std::string label_ = "?";
  std::vector<std::string> failing_calls_;
  std::vector<const void*> alive_;
  std::vector<std::string> outlived_;
};

class RecordingBackend;

/// Remembers the stream that recorded it and the work that stream had last.
class RecordingEvent final : public backend::Event {
 public:
  void synchronize() override {}
  std::string stream, after;
};

class RecordingStream final : public backend::Stream {
 public:
  RecordingStream(const backend::Backend& b, std::string name, Recorder& r)
      : backend_(b), name_(std::move(name)), recorder_(r) {
    recorder_.born(this);
  }
  ~RecordingStream() override { recorder_.died(this); }
  const backend::Backend& backend() const override { return backend_; }
  const std::string& name() const override { return name_; }
  void record(backend::Event& e) override {
    auto& re = static_cast<RecordingEvent&>(e);
    re.stream = name_;
    re.after = last_;
  }
  void wait(backend::Event& e) override {
    auto& re = static_cast<RecordingEvent&>(e);
    recorder_.log(name_, absl::StrCat("    wait ", re.stream, " after ", re.after));
  }
  std::unique_ptr<backend::Event> createEvent() override {
    return std::make_unique<RecordingEvent>();
  }
  // Runs at once: nothing runs later on this stream.
  void hostCallback(absl::AnyInvocable<void() &&> fn) override {
    recorder_.count("hostCallback");
    std::move(fn)();
  }
  // A timestamp as a GPU stream takes it (an event, read after the step): no host
  // callback. The time is the host's now, at once.
  void stamp(absl::AnyInvocable<void(int64_t) &&> done) override {
    recorder_.count("stamp");
    std::move(done)(backend::steadyNowNs());
  }
  absl::Status synchronize() override { return absl::OkStatus(); }

  /// Work on this stream: logged under the label the hook set.
  void work(const std::string& what) {
    last_ = recorder_.takeLabel();
    recorder_.log(name_, absl::StrCat("  ", last_));
    recorder_.count(what);
  }

 private:
  const backend::Backend& backend_;
  std::string name_;
  Recorder& recorder_;
  std::string last_ = "?";
};

class RecordingKernel final : public backend::Kernel {
 public:
  explicit RecordingKernel(Recorder& r) : recorder_(r) {}
  absl::Status launch(backend::Stream& stream, absl::Span<const backend::TensorView>,
                      absl::Span<const backend::TensorView>) override {
    static_cast<RecordingStream&>(stream).work("launch");
    return absl::OkStatus();
  }
  /// Counted by its bytes ("bindWorkspace 1024"); its address noted under "workspace".
  absl::Status bindWorkspace(const backend::TensorView& workspace) override {
    recorder_.count(absl::StrCat("bindWorkspace ", workspace.bytes()));
    recorder_.note("workspace", workspace.data);
    return absl::OkStatus();
  }

 private:
  Recorder& recorder_;
};

class RecordingDevice final : public backend::Device {
 public:
  RecordingDevice(const backend::Backend& b, const ir::Device& id, int index, Recorder& r,
                  bool prefetches)
      : id_(id),
        index_(index),
        compute_(b, absl::StrCat(ir::toString(id), "/compute"), r),
        comm_(b, absl::StrCat(ir::toString(id), "/comm"), r),
        recorder_(r) {
    if (prefetches)
      prefetch_ =
          std::make_unique<RecordingStream>(b, absl::StrCat(ir::toString(id), "/prefetch"), r);
  }
  const ir::Device& id() const override { return id_; }
  backend::MemoryLocation location() const override {
    return backend::MemoryLocation::onDevice(index_);
  }
  backend::Stream& computeStream() override { return compute_; }
  backend::Stream& commStream() override { return comm_; }
  backend::Stream* prefetchStream() override { return prefetch_.get(); }
  absl::StatusOr<backend::DeviceBuffer> allocate(int64_t bytes) override {
    recorder_.count("allocate");
    return buffer(bytes, location());
  }
  absl::StatusOr<backend::DeviceBuffer> allocateHost(int64_t bytes) override {
    recorder_.count("allocateHost");
    return buffer(bytes, backend::MemoryLocation::pinnedHost());
  }
  absl::Status copySliceFromHost(const backend::TensorView& whole, const backend::TensorView& part,
                                 int, int64_t, backend::Stream& stream) override {
    if (!whole.where.isHost() || part.where != location())
      return absl::InternalError("split copies from the host into this device");
    if (recorder_.copiesFailOn(stream.name())) return absl::UnavailableError("copy engine lost");
    static_cast<RecordingStream&>(stream).work("copySliceFromHost");
    recorder_.note(absl::StrCat("from host on ", stream.name()), whole.data);
    recorder_.note(absl::StrCat("into ", stream.name()), part.data);
    return absl::OkStatus();
  }
  absl::Status copyIntoSlice(const backend::TensorView& part, const backend::TensorView& whole, int,
                             int64_t, backend::Stream& stream) override {
    if (whole.where != location()) return absl::InternalError("concat gathers into this device");
    static_cast<RecordingStream&>(stream).work("copyIntoSlice");
    recorder_.note(absl::StrCat("device copy on ", stream.name()), part.data);
    return absl::OkStatus();
  }
  absl::Status copyFromHost(const backend::TensorView& src, const backend::TensorView& dst,
                            backend::Stream&) override {
    if (!src.where.isHost() || dst.where != location())
      return absl::InternalError("copyFromHost copies from the host to this device");
    recorder_.count("copyFromHost");
    return absl::OkStatus();
  }
  absl::Status copyToHost(const backend::TensorView& src, const backend::TensorView& dst,
                          backend::Stream&) override {
    if (src.where != location() || !dst.where.isHost())
      return absl::InternalError("copyToHost copies from this device to the host");
    recorder_.count("copyToHost");
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<backend::Kernel>> makeKernel(const ir::Node&) override {
    recorder_.count("makeKernel");
    return std::make_unique<RecordingKernel>(recorder_);
  }

 private:
  static backend::DeviceBuffer buffer(int64_t bytes, backend::MemoryLocation where) {
    void* p = std::calloc(static_cast<size_t>(std::max<int64_t>(bytes, 1)), 1);
    return backend::DeviceBuffer(p, bytes, where, [](void* q) { std::free(q); });
  }
  ir::Device id_;
  int index_;
  RecordingStream compute_, comm_;
  std::unique_ptr<RecordingStream> prefetch_;
  Recorder& recorder_;
};

class RecordingCommunicator final : public backend::Communicator {
 public:
  RecordingCommunicator(int rank, int size, Recorder& r) : rank_(rank), size_(size), recorder_(r) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  absl::Status allReduce(absl::Span<const backend::TensorView>,
                         absl::Span<const backend::TensorView>, backend::ReduceOp,
                         backend::Stream& s) override {
    if (recorder_.fails(absl::StrCat("allReduce on rank ", rank_)))
      return absl::InternalError(absl::StrCat("rank ", rank_, " refused its all_reduce"));
    static_cast<RecordingStream&>(s).work("allReduce");
    return absl::OkStatus();
  }
  absl::Status reduceScatter(const backend::TensorView&, const backend::TensorView&,
                             absl::Span<const int64_t>, backend::ReduceOp,
                             backend::Stream& s) override {
    static_cast<RecordingStream&>(s).work("reduceScatter");
    return absl::OkStatus();
  }
  absl::Status allGather(const backend::TensorView&, const backend::TensorView&,
                         absl::Span<const int64_t>, backend::Stream& s) override {
    static_cast<RecordingStream&>(s).work("allGather");
    return absl::OkStatus();
  }
  absl::Status broadcast(int, const backend::TensorView&, const backend::TensorView&,
                         backend::Stream& s) override {
    static_cast<RecordingStream&>(s).work("broadcast");
    return absl::OkStatus();
  }

 private:
  int rank_, size_;
  Recorder& recorder_;
};

class RecordingGroup final : public backend::CommunicatorGroup {
 public:
  RecordingGroup(int size, Recorder& r) : recorder_(r) {
    for (int i = 0; i < size; ++i)
      ranks_.push_back(std::make_unique<RecordingCommunicator>(i, size, r));
  }
  int size() const override { return static_cast<int>(ranks_.size()); }
  backend::Communicator& rank(int r) override { return *ranks_[static_cast<size_t>(r)]; }
  absl::Status groupStart() override {
    recorder_.count("groupStart");
    return absl::OkStatus();
  }
  absl::Status groupEnd() override {
    recorder_.count("groupEnd");
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<RecordingCommunicator>> ranks_;
  Recorder& recorder_;
};

/// Counts what the executor asks of a step recorder: "record" when it begins, "recorded"
/// when it ends, "replay" per replay. Like a CUDA graph, it keeps its devices' streams
/// and touches them when it goes away.
class RecordingStepRecorder final : public backend::StepRecorder {
 public:
  RecordingStepRecorder(Recorder& r, std::vector<backend::Stream*> streams)
      : recorder_(r), streams_(std::move(streams)) {}
  ~RecordingStepRecorder() override {
    for (backend::Stream* s : streams_) {
      const bool alive = recorder_.alive(s);
      if (!alive) recorder_.outlived("a step recorder outlived a stream it recorded");
#ifdef __SANITIZE_ADDRESS__
      // Under AddressSanitizer the read itself is the check: a freed stream is a
      // heap-use-after-free report, as cudaSetDevice(origin()->gpu()) was.
      (void)s->name().size();
#endif
      if (alive) recorder_.count(absl::StrCat("released ", s->name()));
    }
  }
  absl::Status begin() override {
    recorder_.count("record");
    if (recorder_.fails("record")) return absl::UnavailableError("capture refused to begin");
    return absl::OkStatus();
  }
  absl::Status end() override {
    recorder_.count("recorded");
    if (recorder_.fails("recorded"))
      return absl::UnavailableError(
          "cudaStreamEndCapture: operation not permitted when stream "
          "is capturing");
    return absl::OkStatus();
  }
  absl::Status replay() override {
    recorder_.count("replay");
    if (recorder_.fails("replay")) return absl::UnavailableError("graph launch refused");
    return absl::OkStatus();
  }

 private:
  Recorder& recorder_;
  std::vector<backend::Stream*> streams_;
};

class RecordingBackend final : public backend::Backend {
 public:
  /// `records_steps`: offers a StepRecorder, as the CUDA backend does (CUDA graphs);
  /// `prefetches`: its devices have a prefetch stream, as CUDA devices do.
  explicit RecordingBackend(Recorder& r, bool records_steps = false, bool prefetches = false)
      : recorder_(r), records_steps_(records_steps), prefetches_(prefetches) {}
  // Stands in for the CPU kind, with its facts.
  const ir::TargetInfo& target() const override { return target_; }
  absl::StatusOr<std::unique_ptr<backend::Device>> createDevice(
      const ir::Device& d, const backend::DeviceOptions& o) const override {
    auto own = backend::cpu::cpuOptions().read(o.settings);
    if (!own.ok()) return own.status();
    if (own->conv_algorithm == backend::ConvAlgorithm::kDirect)
      recorder_.count("createDevice with direct convolutions");
    return std::make_unique<RecordingDevice>(*this, d, o.index, recorder_, prefetches_);
  }
  absl::StatusOr<std::unique_ptr<backend::CommunicatorGroup>> createCommunicators(
      absl::Span<backend::Device* const> group) const override {
    recorder_.count("createCommunicators");
    return std::make_unique<RecordingGroup>(static_cast<int>(group.size()), recorder_);
  }
  std::string describe() const override { return "recording"; }
  std::string version() const override { return "recording"; }
  // The CPU kind's facts (registered with the CPU backend), for the kind it stands in for.
  const ir::TargetInfo target_ = backend::cpu::targetInfo();
  absl::StatusOr<std::unique_ptr<backend::StepRecorder>> makeStepRecorder(
      absl::Span<backend::Device* const> devices) const override {
    if (!records_steps_) return nullptr;
    if (recorder_.fails("makeStepRecorder"))
      return absl::UnimplementedError("these devices' collectives cannot be recorded");
    std::vector<backend::Stream*> streams;
    for (backend::Device* d : devices) {
      streams.push_back(&d->computeStream());
      streams.push_back(&d->commStream());
    }
    return std::make_unique<RecordingStepRecorder>(recorder_, std::move(streams));
  }

 private:
  Recorder& recorder_;
  bool records_steps_;
  bool prefetches_;
};

}  // namespace tandem::testing
