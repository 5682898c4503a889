#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Learning curves as a picture: train loss, train accuracy and test accuracy per epoch on
// one chart (loss on the left axis, accuracies on the right, one legend), like the d2l
// lessons' Animator. Drawn by gnuplot, run as a subprocess; `tandem train --plot` redraws
// after every epoch and `tandem plot` draws a --metrics CSV.

namespace tandem::tools {

/// One epoch's figures, as `tandem train --metrics` writes them.
struct EpochPoint {
  int64_t epoch = 0;
  double train_loss = 0, train_acc = 0, test_acc = 0;
};

/// The colours of the three curves (loss, train accuracy, test accuracy): matplotlib's
/// first three, as in the d2l lessons. Public so that a test can find them in a picture.
inline constexpr const char* kCurveColours[3] = {"#1f77b4", "#ff7f0e", "#2ca02c"};

/// A picture file that can be (re)drawn. Made by `open`, which checks everything that can
/// fail before the caller starts slow work: the file name ends in .svg or .png, gnuplot
/// runs and has the terminal for it, and the file's directory is writable.
class PlotFile {
 public:
  /// `flag` names the option that gave the path ("--plot", "-o"), for messages.
  static absl::StatusOr<PlotFile> open(const std::string& path, const std::string& flag);

  /// Draws `points` (epochs in increasing order, at least one) with the x axis from 1 to
  /// max(`last_epoch`, the last point's epoch) and `title` on top. The picture replaces
  /// the file in one rename, so a viewer never sees half of it.
  absl::Status draw(const std::vector<EpochPoint>& points, int64_t last_epoch,
                    const std::string& title) const;

  /// The gnuplot script `draw` runs (data included, as a datablock), writing to `output`.
  std::string script(const std::vector<EpochPoint>& points, int64_t last_epoch,
                     const std::string& title, const std::string& output) const;

 private:
  PlotFile(std::string path, std::string flag, std::string terminal)
      : path_(std::move(path)), flag_(std::move(flag)), terminal_(std::move(terminal)) {}

  std::string path_, flag_;
  std::string terminal_;  // gnuplot's: "svg" or "pngcairo"
};

/// Reads the per-epoch rows of a `tandem train --metrics` CSV ("-": standard input).
/// Columns are found by the header's names, so a file with more columns still reads;
/// an error names the file and line.
absl::StatusOr<std::vector<EpochPoint>> readMetricsCsv(const std::string& path);

}  // namespace tandem::tools
