#include "tools/tandem/trace_file.h"

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ir/plan.h"
#include "ir/status_macros.h"
#include "runtime/chrome_trace.h"

namespace tandem::tools {

absl::StatusOr<TraceFile> TraceFile::open(const std::string& path, int64_t steps) {
  if (path == "-")
    return absl::InvalidArgumentError(
        "--trace: standard output carries the epoch table; name a file such as trace.json");
  // Replaced whole when written: a full disk leaves no truncated trace behind.
  ASSIGN_OR_RETURN(OutputFile file, OutputFile::openReplacing(path, "--trace"));
  ASSIGN_OR_RETURN(OutputFile lock, OutputFile::claim(path, "--trace"));
  return TraceFile(std::move(file), std::move(lock), path, steps);
}

bool TraceFile::wantsNextStep() const {
  const int64_t next = steps_done_ + 1;
  return !written_ && next > kWarmupSteps && next <= kWarmupSteps + steps_;
}

absl::Status TraceFile::afterStep(runtime::Executor& ex,
                                  std::vector<runtime::TraceEntry>* profile) {
  const bool in_window = wantsNextStep();  // the step that just ran
  ++steps_done_;
  if (in_window || profile != nullptr) {
    std::vector<runtime::TraceEntry> entries = ex.takeTrace();
    if (in_window) {
      ++steps_kept_;
      for (const runtime::TraceEntry& e : entries)
        if (e.node->graph()->name() == ir::kTrainGraph) kept_.push_back(e);
    }
    if (profile != nullptr) profile->insert(profile->end(), entries.begin(), entries.end());
  }
  if (in_window && steps_kept_ == steps_) RETURN_IF_ERROR(write(ex.module()));
  ex.setTrace(profile != nullptr || wantsNextStep());
  return absl::OkStatus();
}

absl::Status TraceFile::finish(const ir::Module& m) {
  if (written_) return absl::OkStatus();
  std::fprintf(stderr,
               "tandem: warning: --trace: the run ended after %lld training steps, so %s has %lld "
               "of the %lld steps asked (the first step is warm-up, not traced)\n",
               static_cast<long long>(steps_done_), path_.c_str(),
               static_cast<long long>(steps_kept_), static_cast<long long>(steps_));
  return write(m);
}

absl::Status TraceFile::write(const ir::Module& m) {
  written_ = true;
  RETURN_IF_ERROR(
      file_.write(runtime::chromeTrace(m, kept_, ir::streamWaits(m, *m.graph(ir::kTrainGraph)))));
  kept_.clear();
  kept_.shrink_to_fit();
  RETURN_IF_ERROR(file_.close());
  lock_.keep();  // the trace is in place
  return absl::OkStatus();
}

}  // namespace tandem::tools
