// `tandem plot METRICS.csv -o FILE.svg|.png`: draws the learning curves of a run from the
// CSV `tandem train --metrics` wrote (the same picture `train --plot` keeps current).

#include <cstdio>
#include <filesystem>

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
  // gnuplot and the output are checked before the CSV is read, as train checks them
  // before it trains.
  absl::Status status;
  absl::StatusOr<PlotFile> picture = PlotFile::open(f.output, "-o");
  if (picture.ok()) {
    ASSIGN_OR_RETURN(std::vector<EpochPoint> points, readMetricsCsv(f.metrics));
    const std::string title =
        f.title ? *f.title
                : (f.metrics == "-" ? std::string("learning curves")
                                    : std::filesystem::path(f.metrics).filename().string());
    status = picture->draw(points, points.back().epoch, title);
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
