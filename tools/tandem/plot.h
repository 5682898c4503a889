#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Learning curves as a picture: train loss, train accuracy and test accuracy per epoch on
// one chart (loss on the left axis, accuracies on the right, one legend), like the d2l
// lessons' Animator; for a run by steps (a language model) train and validation loss per
// step. Drawn by gnuplot, run as a subprocess; `tandem train --plot` redraws after every
// epoch (evaluation) and `tandem plot` draws one or more --metrics CSVs, several runs in one
// picture to compare them.

namespace tandem::tools {

/// One evaluation's figures, as `tandem train --metrics` writes them: an epoch's, or for a
/// run by steps (a language model's) the evaluation after `step` steps with its validation
/// loss (its accuracies unused).
struct EpochPoint {
  int64_t epoch = 0;
  double train_loss = 0, train_acc = 0, test_acc = 0;
  int64_t step = 0;  // > 0: a run by steps
  double val_loss = 0;
};

/// The curves of one run. By epochs: train loss, train accuracy and test accuracy per epoch;
/// by steps: train and validation loss per step (the evaluations of `--steps N
/// --eval-every K`, or any CSV with columns step, train_loss and val_loss, such as a
/// PyTorch run's written to compare with).
struct RunCurves {
  std::string label;  // several runs in one picture: their legends' prefix ("PyTorch")
  bool by_step = false;
  std::vector<EpochPoint> points;
};

/// The colours of the three curves (loss, train accuracy, test accuracy) of a lone run:
/// matplotlib's first three, as in the d2l lessons. Public so that a test can find them in a
/// picture. Several runs in one picture take a colour each, kRunColours[run], their curves
/// told apart by the dash.
inline constexpr const char* kCurveColours[3] = {"#1f77b4", "#ff7f0e", "#2ca02c"};
inline constexpr const char* kRunColours[6] = {"#1f77b4", "#d62728", "#2ca02c",
                                               "#9467bd", "#8c564b", "#e377c2"};

/// A picture file that can be (re)drawn. Made by `open`, which checks everything that can
/// fail before the caller starts slow work: the file name ends in .svg or .png, gnuplot
/// runs and has the terminal for it, and the file's directory is writable.
class PlotFile {
 public:
  /// `flag` names the option that gave the path ("--plot", "-o"), for messages.
  static absl::StatusOr<PlotFile> open(const std::string& path, const std::string& flag);

  /// Draws `runs` (each with points in increasing order, at least one; all by epochs or all
  /// by steps) with the x axis up to max(`last_x`, the last point's epoch or step) and
  /// `title` on top. The picture replaces the file in one rename, so a viewer never sees
  /// half of it.
  absl::Status draw(const std::vector<RunCurves>& runs, int64_t last_x,
                    const std::string& title) const;

  /// The gnuplot script `draw` runs (data included, as datablocks), writing to `output`.
  std::string script(const std::vector<RunCurves>& runs, int64_t last_x,
                     const std::string& title, const std::string& output) const;

 private:
  PlotFile(std::string path, std::string flag, std::string terminal)
      : path_(std::move(path)), flag_(std::move(flag)), terminal_(std::move(terminal)) {}

  std::string path_, flag_;
  std::string terminal_;  // gnuplot's: "svg" or "pngcairo"
};

/// Reads the rows of a `tandem train --metrics` CSV ("-": standard input): by steps when
/// the header has a column `step` (then step, train_loss and val_loss are what it needs),
/// else by epochs (epoch, train_loss, train_acc, test_acc). Columns are found by the
/// header's names, so a file with more columns still reads; an error names the file and
/// line.
absl::StatusOr<RunCurves> readMetricsCsv(const std::string& path);

}  // namespace tandem::tools
