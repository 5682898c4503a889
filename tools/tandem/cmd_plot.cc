// `tandem plot METRICS.csv -o FILE.svg|.png`: draws the learning curves of a run from the
// CSV `tandem train --metrics` wrote (the same picture `train --plot` keeps current).

#include <filesystem>

#include "ir/status_macros.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/plot.h"

namespace tandem::tools {

absl::Status runPlot(const PlotFlags& f) {
  if (f.metrics.empty())
    return absl::InvalidArgumentError(
        "missing the metrics CSV to draw (tandem plot METRICS.csv -o FILE.svg)");
  if (f.output.empty())
    return absl::InvalidArgumentError(
        "-o: missing; name the picture to write (FILE.svg or FILE.png)");
  // gnuplot and the output are checked before the CSV is read, as train checks them
  // before it trains.
  ASSIGN_OR_RETURN(PlotFile picture, PlotFile::open(f.output, "-o"));
  ASSIGN_OR_RETURN(std::vector<EpochPoint> points, readMetricsCsv(f.metrics));
  const std::string title =
      f.title ? *f.title
              : (f.metrics == "-" ? std::string("learning curves")
                                  : std::filesystem::path(f.metrics).filename().string());
  return picture.draw(points, points.back().epoch, title);
}

}  // namespace tandem::tools
