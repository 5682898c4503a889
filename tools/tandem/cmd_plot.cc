// `tandem plot METRICS.csv... -o FILE.svg|.png`: draws the learning curves of a run from
// the CSV `tandem train --metrics` wrote (the same picture `train --plot` keeps current), or
// of several runs in one picture (`--label` names each): two splits, or Tandem beside a
// PyTorch run of the same recipe.

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/status_macros.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/plot.h"
#include "tools/tandem/stop_signal.h"

namespace tandem::tools {

absl::StatusOr<int> runPlot(const PlotFlags& f) {
  // Ctrl-C or SIGTERM ends gnuplot too (it runs in a process group of its own).
  StopSignals stop;
  if (f.metrics.empty())
    return absl::InvalidArgumentError(
        "missing the metrics CSV to draw (tandem plot METRICS.csv -o FILE.svg)");
  if (f.output.empty())
    return absl::InvalidArgumentError(
        "-o: missing; name the picture to write (FILE.svg or FILE.png)");
  if (!f.labels.empty() && f.labels.size() != f.metrics.size())
    return absl::InvalidArgumentError(absl::StrCat("--label: ", f.labels.size(),
                                                   " labels for ", f.metrics.size(),
                                                   " CSVs; give one a CSV, in their order"));
  if (std::count(f.metrics.begin(), f.metrics.end(), "-") > 1)
    return absl::InvalidArgumentError("'-' (standard input) names more than one CSV");
  // gnuplot and the output are checked before the CSV is read, as train checks them
  // before it trains.
  absl::Status status;
  absl::StatusOr<PlotFile> picture = PlotFile::open(f.output, "-o");
  if (picture.ok()) {
    std::vector<RunCurves> runs;
    std::vector<std::string> names;
    for (size_t i = 0; i < f.metrics.size(); ++i) {
      const std::string& path = f.metrics[i];
      ASSIGN_OR_RETURN(RunCurves run, readMetricsCsv(path));
      names.push_back(path == "-" ? std::string("standard input")
                                  : std::filesystem::path(path).filename().string());
      if (!runs.empty() && run.by_step != runs.front().by_step)
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": a run by ", run.by_step ? "steps" : "epochs", ", but ", f.metrics.front(),
            " is by ", run.by_step ? "epochs" : "steps", " (one picture has one x axis)"));
      if (f.metrics.size() > 1) run.label = f.labels.empty() ? names.back() : f.labels[i];
      runs.push_back(std::move(run));
    }
    const std::string title =
        f.title ? *f.title
                : (f.metrics.size() == 1 && f.metrics.front() == "-" ? std::string("learning curves")
                                                                     : absl::StrJoin(names, ", "));
    status = picture->draw(runs, 0, title);
  } else {
    status = picture.status();
  }
  if (absl::IsCancelled(status) && stop.requested()) {
    std::fprintf(stderr, "tandem: %s; nothing was written\n",
                 std::string(status.message()).c_str());
    return stop.exitCode();
  }
  if (!status.ok()) return status;
  return 0;
}

}  // namespace tandem::tools
