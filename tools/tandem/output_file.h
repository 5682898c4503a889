#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::tools {

/// Where Tandem writes a result (a file, or standard output), with every write checked
/// and flushed: a row that cannot be written is an error naming the file and the reason
/// (the errno text), never a result lost in silence, and a run stopped later keeps every
/// row written so far. Every output of every command is opened here (a picture, renamed
/// over its path, is checked by checkReplaceable), so one check holds for them all: a
/// FIFO that no process reads is refused in one line instead of blocking the open forever.
class OutputFile {
 public:
  /// Opens `path` for writing, truncating it; "-" is standard output. `flag` is the option
  /// that named the file ("--metrics"), for messages. A FIFO is opened only when a process
  /// reads it (else refused, as inputs on a FIFO are: ir/file_input.h).
  static absl::StatusOr<OutputFile> open(const std::string& path, const std::string& flag);
  /// Opens `path` to be written whole and replaced at once: the bytes go to a temporary
  /// file beside it, which close() renames over `path`; a failed write (a full disk) or a
  /// file destroyed before close() removes the temporary, so `path` holds its old content
  /// or nothing, never half a file. A path that is not a regular file (/dev/null, a FIFO)
  /// is written in place, as open() does.
  static absl::StatusOr<OutputFile> openReplacing(const std::string& path, const std::string& flag);
  /// Opens `path` to be written from start() on, keeping what it holds until then: a run
  /// refused between the two (bad data, a checkpoint of another model) leaves the file as
  /// it was, and removes it again if it made it. A regular file is locked (flock) while
  /// the OutputFile lives, so that a second run given the same file is refused naming it
  /// rather than both writing their rows into one. "-" is standard output.
  static absl::StatusOr<OutputFile> claim(const std::string& path, const std::string& flag);
  /// Empties a claimed file for its first write (once every check of the run passed).
  absl::Status start();
  /// Keeps a claimed file that another writer has put in place (a trace or picture renamed
  /// over its path): it is no longer removed as made and never started. The lock stays.
  void keep() { made_.clear(); }
  /// Standard output, checked the same way.
  static OutputFile standardOutput();

  /// Closes `files` together: those written through a temporary (openReplacing) are put
  /// in place only once every one of them is complete, and a rename that fails undoes the
  /// ones before it, so either every path gets what was written or each keeps what it had
  /// (import's MODEL.tir and MODEL.weights.onnx; run's output_K.pb files).
  static absl::Status closeAll(std::vector<OutputFile>& files);

  /// For an output replaced whole by a rename of a file made elsewhere (a picture gnuplot
  /// draws): OK when `path` does not exist or is a regular file; else refused in one line,
  /// as a rename would replace the FIFO or device itself.
  static absl::Status checkReplaceable(const std::string& path, const std::string& flag);

  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();

  /// Writes `text` and flushes it to the operating system.
  absl::Status write(absl::string_view text);
  /// Closes the file; the error a delayed write reports (NFS, a full disk) comes here.
  absl::Status close();

 private:
  OutputFile(std::FILE* file, std::string what, bool owned)
      : file_(file), what_(std::move(what)), owned_(owned) {}
  absl::Status failure(int err);
  void discardTemporary();
  /// close() up to the rename: every byte written and the file closed.
  absl::Status finish();

  std::FILE* file_ = nullptr;
  std::string what_;  // "--metrics: cannot write 'm.csv'" or "cannot write to standard output"
  bool owned_ = false;
  // openReplacing: the temporary file written, and the path close() renames it to.
  std::string temporary_, final_path_;
  // claim: the file made by claim() and not yet started, removed if never started.
  std::string made_;
  bool regular_ = false;  // claim: a regular file (locked; start() truncates it)
};

}  // namespace tandem::tools
