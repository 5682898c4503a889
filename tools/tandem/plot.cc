// Learning curves drawn by gnuplot (Debian's gnuplot-nox: no X, and both terminals we
// need built in: svg, and pngcairo for anti-aliased PNG, so PNG needs no converter).
// Drawing is gnuplot's job, not ours: Tandem writes a script with the data inline (a
// datablock) and runs gnuplot on it as a subprocess, checking its exit code and passing on
// what it said.

#include "tools/tandem/plot.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"
#include "ir/file_input.h"
#include "ir/status_macros.h"
#include "tools/tandem/output_file.h"
#include "tools/tandem/stop_signal.h"
#include "tools/tandem/train_hooks.h"

extern char** environ;

namespace tandem::tools {
namespace {

constexpr char kInstallHint[] = "install it with: apt-get install gnuplot-nox";

// What a finished gnuplot run did: its exit status and everything it printed.
struct RunResult {
  int exit_code = 0;
  std::string output;
};

std::string said(const std::string& output);

// How long one gnuplot run may take: a redraw takes about 0.1 s, so a minute means it
// hangs (a broken terminal driver, a font server). The test build's hooks shorten it for
// the tests of a gnuplot that never returns.
double childDeadlineSeconds() {
  constexpr double kDeadline = 60;
  if (TrainHooks* hooks = trainHooks())
    if (std::optional<double> s = hooks->childDeadlineSeconds(); s && *s > 0) return *s;
  return kDeadline;
}

// Ends gnuplot's process group: SIGTERM, then SIGKILL if it is still there after a grace;
// waits for it either way (no zombie is left behind).
void endChild(pid_t pid, bool at_once) {
  if (!at_once) {
    ::kill(-pid, SIGTERM);
    for (int i = 0; i < 20; ++i) {  // 1 s
      if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
      ::usleep(50000);
    }
  }
  ::kill(-pid, SIGKILL);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

// Runs gnuplot with `args` (found on PATH), standard input from /dev/null and standard
// output and error captured together. An error when it could not be started, when it ran
// past the deadline (it is killed), and a Cancelled error when SIGINT or SIGTERM came
// meanwhile (it is ended too: its own process group does not see the terminal's Ctrl-C).
absl::StatusOr<RunResult> runGnuplot(const std::vector<std::string>& args,
                                     const std::string& flag) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return absl::InternalError(absl::StrCat(flag, ": cannot start gnuplot: ", strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  std::vector<std::string> argv_strings = {"gnuplot"};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  // A process group of its own: Ctrl-C at the terminal stops training cleanly after the
  // epoch (StopSignals) instead of killing a redraw half-way and failing the run; the
  // signal is passed on to the group below.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t pid;
  // glibc's posix_spawnp reports a failed exec (gnuplot not on PATH) as its result.
  int err = posix_spawnp(&pid, "gnuplot", &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(fds[1]);
  if (err != 0) {
    close(fds[0]);
    if (err == ENOENT)
      return absl::FailedPreconditionError(
          absl::StrCat(flag, ": gnuplot is not installed (not found on PATH); ", kInstallHint));
    return absl::FailedPreconditionError(
        absl::StrCat(flag, ": cannot run gnuplot: ", strerror(err), "; ", kInstallHint));
  }
  // Output and exit are waited for in slices of 50 ms, between which the deadline and
  // the stop signals are looked at.
  // Non-blocking: a process gnuplot started may keep the pipe open after gnuplot exits.
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  const double deadline = childDeadlineSeconds();
  const auto start = std::chrono::steady_clock::now();
  RunResult result;
  bool reading = true, exited = false;
  int status = 0;
  while (!exited) {
    if (reading) {
      pollfd p{fds[0], POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) {
        char buffer[4096];
        const ssize_t n = read(fds[0], buffer, sizeof buffer);
        if (n > 0) result.output.append(buffer, static_cast<size_t>(n));
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) reading = false;
      }
    } else {
      ::usleep(20000);
    }
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    exited = done == pid;
    if (exited && reading) {  // what it printed last is still in the pipe
      char buffer[4096];
      ssize_t n;
      while ((n = read(fds[0], buffer, sizeof buffer)) > 0)
        result.output.append(buffer, static_cast<size_t>(n));
    }
    if (exited) break;
    if (const int sig = StopSignals::pending(); sig != 0) {
      endChild(pid, /*at_once=*/false);
      close(fds[0]);
      return absl::CancelledError(absl::StrCat(flag, ": stopped by ", StopSignals::nameOf(sig),
                                               " while gnuplot drew (gnuplot ended)"));
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited >= deadline) {
      endChild(pid, /*at_once=*/true);
      close(fds[0]);
      return absl::DeadlineExceededError(absl::StrFormat(
          "%s: gnuplot did not finish within %g s (killed; %s)", flag, deadline,
          result.output.empty() ? "it printed nothing"
                                : absl::StrCat("it printed: ", said(result.output))));
    }
  }
  close(fds[0]);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// gnuplot's output as part of a one-line message: lines joined, the caret lines that
// point into the script dropped, the end kept when long.
std::string said(const std::string& output) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty() && line != "^") lines.push_back(std::string(line));
  }
  std::string text = absl::StrJoin(lines, " ");
  if (text.size() > 600) text = "..." + text.substr(text.size() - 600);
  return text.empty() ? "it printed nothing" : text;
}

// A gnuplot string literal: single quotes, where only a doubled quote is special.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "''";
    else if (c == '\n' || c == '\r')
      out += ' ';
    else
      out += c;
  }
  return out + "'";
}

// A value in the datablock; '?' (declared missing) for NaN and infinities, which leave
// a gap in the curve rather than stretching the axis to infinity.
std::string cell(double v) { return std::isfinite(v) ? absl::StrFormat("%.9g", v) : "?"; }

// A file in `dir` that nobody else uses, closed, for gnuplot to write into.
absl::StatusOr<std::string> tempFileIn(const std::filesystem::path& dir, const std::string& stem,
                                       const std::string& suffix) {
  std::string name = (dir / absl::StrCat(stem, ".XXXXXX", suffix)).string();
  int fd = mkstemps(name.data(), static_cast<int>(suffix.size()));
  if (fd < 0) return absl::InvalidArgumentError(strerror(errno));
  close(fd);
  return name;
}

std::filesystem::path directoryOf(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return dir.empty() ? std::filesystem::path(".") : dir;
}

// Removes a file when it goes out of scope (a temporary gnuplot wrote or read).
struct RemoveOnExit {
  std::string path;
  ~RemoveOnExit() {
    if (!path.empty()) unlink(path.c_str());
  }
};

}  // namespace

absl::StatusOr<PlotFile> PlotFile::open(const std::string& path, const std::string& flag) {
  std::string lower = absl::AsciiStrToLower(path);
  std::string terminal;
  if (absl::EndsWith(lower, ".svg")) {
    terminal = "svg";
  } else if (absl::EndsWith(lower, ".png")) {
    terminal = "pngcairo";
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": '", path,
                     "' ends in neither .svg nor .png (the picture's format follows the name)"));
  }
  // The picture is renamed over the path: a FIFO or a device there would be replaced.
  if (absl::Status s = OutputFile::checkReplaceable(path, flag); !s.ok()) return s;
  // gnuplot runs and has the terminal: its exit code says so.
  auto run = runGnuplot({"-e", absl::StrCat("set terminal ", terminal)}, flag);
  if (!run.ok()) return run.status();
  if (run->exit_code != 0)
    return absl::FailedPreconditionError(
        absl::StrCat(flag, ": this gnuplot cannot write ", terminal == "svg" ? "SVG" : "PNG", " (",
                     said(run->output), "); install gnuplot-nox, or name a .",
                     terminal == "svg" ? "png" : "svg", " file"));
  // The directory is writable: a temporary file can be made there (and the picture is
  // written as one, then renamed over the path). The path itself is not touched yet.
  auto probe = tempFileIn(directoryOf(path), ".tandem-plot", "");
  if (!probe.ok())
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": cannot write '", path, "': ", probe.status().message()));
  unlink(probe->c_str());
  return PlotFile(path, flag, terminal);
}

namespace {

// A curve of a run: the metrics CSV's column it is read from, the point's value it draws
// and how. A run's datablock is x, then one column per curve in this order, so the table
// alone says what is read, written and drawn.
struct CurveKind {
  const char* csv_column;
  const char* title;
  double EpochPoint::*value;
  bool accuracy;  // on the right axis, from 0 to 1
  int dash;       // gnuplot's dash type
};
constexpr CurveKind kEpochCurves[] = {
    {"train_loss", "train loss", &EpochPoint::train_loss, false, 1},
    {"train_acc", "train acc", &EpochPoint::train_acc, true, 2},
    {"test_acc", "test acc", &EpochPoint::test_acc, true, 4}};
constexpr CurveKind kStepCurves[] = {
    {"train_loss", "train loss", &EpochPoint::train_loss, false, 1},
    {"val_loss", "val loss", &EpochPoint::val_loss, false, 2}};

absl::Span<const CurveKind> curvesOf(bool by_step) {
  if (by_step) return kStepCurves;
  return kEpochCurves;
}

int64_t xOf(const RunCurves& run, const EpochPoint& p) { return run.by_step ? p.step : p.epoch; }

}  // namespace

std::string PlotFile::script(const std::vector<RunCurves>& runs, int64_t last_x,
                             const std::string& title, const std::string& output) const {
  const bool by_step = !runs.empty() && runs.front().by_step;
  int64_t x_max = std::max<int64_t>(last_x, 1);
  size_t most_points = 0;
  for (const RunCurves& run : runs) {
    if (!run.points.empty()) x_max = std::max(x_max, xOf(run, run.points.back()));
    most_points = std::max(most_points, run.points.size());
  }
  std::string s;
  absl::StrAppend(&s, "set terminal ", terminal_,
                  " size 800,500 font 'sans,11' noenhanced background rgb 'white'\n");
  absl::StrAppend(&s, "set output ", quoted(output), "\n");
  absl::StrAppend(&s, "set title ", quoted(title), "\n");
  s += "set datafile missing '?'\n";
  absl::StrAppend(&s, "set xlabel '", by_step ? "step" : "epoch", "'\nset ylabel 'loss'\n");
  if (by_step) {
    absl::StrAppend(&s, "set xrange [0:", x_max, "]\n");
  } else if (x_max > 1) {  // one epoch still gets an x range around it; up to 20, a tic each
    absl::StrAppend(&s, "set xrange [1:", x_max, "]\n");
  } else {
    s += "set xrange [0.5:1.5]\n";
  }
  if (!by_step && x_max <= 20) s += "set xtics 1\n";
  s += "set yrange [0:*]\nset ytics nomirror\n";
  if (!by_step) s += "set y2label 'accuracy'\nset y2range [0:1]\nset y2tics 0.1\n";
  s += "set grid\nset key outside top center horizontal\n";
  const absl::Span<const CurveKind> kinds = curvesOf(by_step);
  for (size_t r = 0; r < runs.size(); ++r) {
    absl::StrAppend(&s, "$run", r, " << EOD\n");
    for (const EpochPoint& p : runs[r].points) {
      absl::StrAppend(&s, xOf(runs[r], p));
      for (const CurveKind& kind : kinds) absl::StrAppend(&s, " ", cell(p.*kind.value));
      s += "\n";
    }
    s += "EOD\n";
  }
  // A point per evaluation while they are few enough to tell apart, like the Animator's marks.
  const char* style = most_points <= 30 ? "with linespoints lw 2 pt 7 ps 0.6" : "with lines lw 2";
  std::vector<std::string> plots;
  for (size_t r = 0; r < runs.size(); ++r) {
    for (size_t k = 0; k < kinds.size(); ++k) {
      // A lone run's curves each have a colour; several runs' curves the run's colour.
      const char* colour = runs.size() == 1 ? kCurveColours[k] : kRunColours[r % std::size(kRunColours)];
      const std::string name =
          runs[r].label.empty() ? kinds[k].title : absl::StrCat(runs[r].label, " ", kinds[k].title);
      plots.push_back(absl::StrCat("$run", r, " using 1:", k + 2, " axes x1y",
                                   kinds[k].accuracy ? 2 : 1, " ", style, " dt ", kinds[k].dash,
                                   " lc rgb '", colour, "' title ", quoted(name)));
    }
  }
  absl::StrAppend(&s, "plot ", absl::StrJoin(plots, ", \\\n     "), "\n");
  s += "unset output\n";
  return s;
}

absl::Status PlotFile::draw(const std::vector<RunCurves>& runs, int64_t last_x,
                            const std::string& title) const {
  if (runs.empty()) return absl::InvalidArgumentError(absl::StrCat(flag_, ": no runs to draw"));
  for (const RunCurves& run : runs) {
    if (run.points.empty())
      return absl::InvalidArgumentError(absl::StrCat(flag_, ": no epochs to draw"));
    if (run.by_step != runs.front().by_step)
      return absl::InvalidArgumentError(
          absl::StrCat(flag_, ": runs by steps and by epochs do not share an x axis"));
  }
  // gnuplot creates the picture (so it gets the mode the umask gives, as the file itself
  // would) beside the path, and it is renamed over the path once complete.
  const std::string picture =
      (directoryOf(path_) /
       absl::StrCat(".", std::filesystem::path(path_).filename().string(), ".", getpid(), ".tmp"))
          .string();
  RemoveOnExit picture_guard{picture};
  auto script_path = tempFileIn(std::filesystem::temp_directory_path(), "tandem-plot", ".gp");
  if (!script_path.ok())
    return absl::InternalError(absl::StrCat(flag_, ": cannot write gnuplot's script in ",
                                            std::filesystem::temp_directory_path().string(), ": ",
                                            script_path.status().message()));
  RemoveOnExit script_guard{*script_path};
  {
    std::ofstream file(*script_path, std::ios::binary);
    file << script(runs, last_x, title, picture);
    file.close();
    if (!file)
      return absl::InternalError(
          absl::StrCat(flag_, ": cannot write gnuplot's script '", *script_path, "'"));
  }
  auto run = runGnuplot({*script_path}, flag_);
  if (!run.ok()) return run.status();
  if (run->exit_code != 0)
    return absl::InternalError(absl::StrCat(flag_, ": gnuplot failed drawing '", path_,
                                            "' (exit code ", run->exit_code,
                                            "): ", said(run->output)));
  if (rename(picture.c_str(), path_.c_str()) != 0)
    return absl::InvalidArgumentError(
        absl::StrCat(flag_, ": cannot write '", path_, "': ", strerror(errno)));
  picture_guard.path.clear();
  return absl::OkStatus();
}

absl::StatusOr<RunCurves> readMetricsCsv(const std::string& path) {
  const std::string name = path == "-" ? "standard input" : path;
  // Regular files (or standard input) of a bounded size only: a directory, a FIFO or
  // /dev/zero named as the CSV is refused rather than read forever (ir/file_input.h).
  constexpr int64_t kMaxCsvBytes = int64_t{256} << 20;
  ASSIGN_OR_RETURN(std::string text,
                   ir::readInputFile(path,
                                     {path == "-" ? name : absl::StrCat("'", path, "'"),
                                      "a metrics CSV (tandem train --metrics writes one)"},
                                     kMaxCsvBytes));
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  for (std::string& line : lines) absl::StripTrailingAsciiWhitespace(&line);  // CRLF files
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  const std::string expected = "(expected the CSV that tandem train --metrics writes)";
  if (lines.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": empty ", expected));

  const std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  RunCurves run;
  run.by_step = std::find(header.begin(), header.end(), "step") != header.end();
  // The x column first (an integer >= 1 that increases row by row), then the curves'.
  const absl::Span<const CurveKind> kinds = curvesOf(run.by_step);
  std::vector<const char*> wanted = {run.by_step ? "step" : "epoch"};
  for (const CurveKind& kind : kinds) wanted.push_back(kind.csv_column);
  std::vector<size_t> column;
  for (const char* want : wanted) {
    auto it = std::find(header.begin(), header.end(), want);
    if (it == header.end())
      return absl::InvalidArgumentError(
          absl::StrCat(name, ":1: the header has no column '", want, "' ", expected));
    column.push_back(static_cast<size_t>(it - header.begin()));
  }
  const char* x_name = wanted[0];
  const char* x_plural = run.by_step ? "steps" : "epochs";

  std::vector<EpochPoint>& points = run.points;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string where = absl::StrCat(name, ":", i + 1, ": ");
    if (lines[i].empty()) return absl::InvalidArgumentError(where + "empty line");
    const std::vector<std::string> fields = absl::StrSplit(lines[i], ',');
    if (fields.size() != header.size())
      return absl::InvalidArgumentError(
          absl::StrCat(where, fields.size(), " fields, the header has ", header.size()));
    EpochPoint p;
    int64_t& x = run.by_step ? p.step : p.epoch;
    if (!absl::SimpleAtoi(fields[column[0]], &x) || x < 1)
      return absl::InvalidArgumentError(
          absl::StrCat(where, x_name, " '", fields[column[0]], "' is not an integer >= 1"));
    if (!points.empty() && x <= xOf(run, points.back()))
      return absl::InvalidArgumentError(
          absl::StrCat(where, x_name, " ", x, " after ", x_name, " ", xOf(run, points.back()),
                       " (", x_plural, " must increase: one run per file)"));
    if (run.by_step) p.epoch = static_cast<int64_t>(points.size()) + 1;
    for (size_t k = 0; k < kinds.size(); ++k)
      if (!absl::SimpleAtod(fields[column[k + 1]], &(p.*kinds[k].value)))  // "nan", "inf" too
        return absl::InvalidArgumentError(
            absl::StrCat(where, wanted[k + 1], " '", fields[column[k + 1]], "' is not a number"));
    points.push_back(p);
  }
  if (points.empty())
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": no ", x_plural, " to plot (a header and no rows)"));
  return run;
}

}  // namespace tandem::tools
