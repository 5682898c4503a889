#pragma once

// Checkpoints of a training run: every module variable, where the data order stands, the
// figures so far and the settings a resumed run must share, in one file written
// atomically (DIR/checkpoint.tmp.XXXXXX, fsync, rename to DIR/checkpoint, fsync of DIR) with a
// crc32 over its whole content. A run killed at any moment leaves the last complete
// checkpoint in place. Format (docs/DESIGN.md section 6), little-endian:
//
//   "TNDMCKPT"  u32 version (2)  u64 file bytes
//   str model  u64 seed  i32 epoch  i64 steps_per_epoch  u32 devices
//   progress: i64 steps, examples, correct; f64 loss_sum, seconds
//   u32 n, n x (str key, str value)             settings that must match on resume (keys of
//                                               train/setting.h; before issue 41, flags)
//   u32 n, n x i64                              images per device of the step
//   u32 n, n x (i32 epoch, 7 x f64, [v2] u32 k, k x i64 split at the epoch's end)
//                                               finished epochs' figures
//   [v2] u32 n, n x (i32 epoch, i64 step, u32 k, k x i64)   --split auto's re-plans
//   [v2] u8 has balancer; i32 step, u8 settled, u32 k, k x f64 busy, k x f64 rows
//   u32 n, n x (str name, u32 replica, str dtype, u32 rank, rank x i64, u64 bytes, bytes)
//   u32 crc32 of everything before it
//
// (str: u32 length and the bytes; f64: the IEEE bits, so figures come back exactly.)
// Version 1 (before --split auto's re-plans were kept) still reads: no re-plans, no
// balancer state, no split per epoch.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/types.h"
#include "runtime/executor.h"
#include "runtime/split_balancer.h"
#include "runtime/trainer.h"

namespace tandem::runtime {

/// The version this build writes; it reads it and every one before (1). 2: the split and
/// its re-plans; 3: each epoch's metrics by name.
inline constexpr uint32_t kCheckpointVersion = 3;
inline constexpr uint32_t kOldestCheckpointVersion = 1;

/// One tensor of a checkpoint: a module variable's replica on one device of the run that
/// wrote it. Replica 0 is always there; another replica only where its bytes differ from
/// replica 0's (batch-norm running statistics without --sync-bn: each device's own batch).
struct CheckpointTensor {
  std::string name;  // the variable
  uint32_t replica = 0;
  ir::TensorType type;
  std::string bytes;  // type.bytes() of them
};

/// One finished epoch's figures as the table and the metrics file print them, so that a
/// resumed run prints the whole table.
struct EpochFigures {
  int32_t epoch = 0;
  double train_loss = 0, train_accuracy = 0, test_loss = 0, test_accuracy = 0;
  double seconds = 0, images_per_second = 0, eval_seconds = 0;
  /// Images per device when the epoch ended (--split auto may have re-planned it).
  std::vector<int64_t> split;
  /// Every metric of the model over the training and the test pass (accuracy among them,
  /// for a classifier), in the step's order; empty in a checkpoint of version 2 or older.
  std::vector<MetricValue> train_metrics, test_metrics;
  bool operator==(const EpochFigures&) const = default;
};

/// A re-plan of --split auto: after `step` of `epoch`, the step ran with `rows` images
/// per device.
struct SplitReplan {
  int32_t epoch = 0;
  int64_t step = 0;
  std::vector<int64_t> rows;
  bool operator==(const SplitReplan&) const = default;
};

/// What a checkpoint holds.
struct Checkpoint {
  std::string model;
  /// Flags whose values a resumed run must share, as (flag, value): what they change is
  /// what the step computes or the order of the data.
  std::vector<std::pair<std::string, std::string>> settings;
  uint64_t seed = 0;
  /// The epoch the run is in (1-based) and its steps done with their sums; at an epoch's
  /// end the next epoch at step 0.
  int32_t epoch = 1;
  EpochProgress progress;
  int64_t steps_per_epoch = 0;
  /// Device count of the writing run, and its images per device of the step.
  uint32_t devices = 0;
  std::vector<int64_t> split;
  std::vector<EpochFigures> history;  // every finished epoch, in order
  /// --split auto: every re-plan so far, and the balancer as it stands (so that the
  /// resumed run re-plans where the run it continues would).
  std::vector<SplitReplan> replans;
  std::optional<SplitBalancer::State> balancer;
  std::vector<CheckpointTensor> tensors;
};

/// The bytes of a checkpoint file; `version` (tests) writes an older format, leaving out
/// what it did not have.
std::string encodeCheckpoint(const Checkpoint& c, uint32_t version = kCheckpointVersion);
/// Parses and verifies checkpoint bytes; `path` names the file in errors, which say what
/// is wrong: not a checkpoint, a version this build does not read, truncated, extra bytes,
/// a checksum mismatch, or a malformed table.
absl::StatusOr<Checkpoint> decodeCheckpoint(absl::string_view bytes, const std::string& path);

/// DIR/checkpoint; the lock file of the run that writes in DIR; the name every temporary
/// file a checkpoint is written through starts with (DIR/checkpoint.tmp.XXXXXX, unique
/// per write), and the ones DIR holds now (a killed run's).
std::string checkpointPath(const std::string& dir);
std::string checkpointLockPath(const std::string& dir);
inline constexpr char kCheckpointTempPrefix[] = "checkpoint.tmp.";
std::vector<std::string> checkpointTempFiles(const std::string& dir);

/// Writes `c` to DIR/checkpoint atomically (see the top of this file) through a temporary
/// file of a unique name, removed when the write fails (a full disk leaves nothing
/// behind). `after_half` (for tests) runs when half of the temporary file is written,
/// before its fsync.
absl::Status writeCheckpointFile(const std::string& dir, const Checkpoint& c,
                                 const std::function<void()>& after_half = nullptr);
/// Reads and verifies DIR/checkpoint; errors name the file. Across processes every rank
/// must call it: rank 0 reads the file and sends its bytes (or its error) to the others.
absl::StatusOr<Checkpoint> readCheckpointFile(const std::string& dir);

/// Every variable of the executor's module: replica 0 from device 0, and each other
/// device's replica whose bytes differ from it. Across processes every rank must call it
/// (each reads its own devices, rank 0 gathers them all); the list is empty elsewhere.
absl::StatusOr<std::vector<CheckpointTensor>> captureVariables(const Executor& ex);
/// Writes the checkpoint's variables into every device of `ex`: device d gets replica d
/// when the checkpoint has it and was written on as many devices, else replica 0 (so
/// another device count works: every device starts from the first device's values); a
/// process writes only its own devices. The
/// module and the checkpoint must have the same variables with the same types; errors
/// name `path` and the variable.
absl::Status restoreVariables(const Checkpoint& c, Executor& ex, const std::string& path);

/// OK when the checkpoint was written for `model` with the same values of `settings`;
/// else an error naming `path` and every setting that differs, with both values.
/// What a refusal of checkCompatible says besides the values: the setting that names the
/// model, and where a value of this run comes from when the user did not give it (a
/// model's warmup follows the run's length).
struct CompatibilityNotes {
  std::string model_setting = "model";
  std::map<std::string, std::string> values;  // key -> where this run's value comes from
  /// How the refusal names a setting by its key (the caller's words); unset: the key.
  std::function<std::string(const std::string& key)> name_of;
};
absl::Status checkCompatible(const Checkpoint& c, const std::string& model,
                             const std::vector<std::pair<std::string, std::string>>& settings,
                             const std::string& path, const CompatibilityNotes& notes = {});

/// Writes a run's checkpoints into one directory. Only the process for which `writes` is
/// true touches the directory (rank 0 of a multi-process run); every rank makes the same
/// calls, and those are collective across processes (see save).
/// How CheckpointWriter's errors name the setting that gave the directory, and the way to
/// continue a run (the caller's words: `tandem train` says --checkpoint and --resume).
struct CheckpointWords {
  std::string setting = "checkpoint";
  std::string resume = "resume";
};

class CheckpointWriter {
 public:
  using Words = CheckpointWords;
  CheckpointWriter(std::string dir, bool writes, Words words = {})
      : dir_(std::move(dir)), writes_(writes), words_(std::move(words)) {}
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  /// Creates the directory if missing, locks it for this run (flock on DIR/checkpoint.lock,
  /// which holds the holder's pid and host: a second run given the same directory is
  /// refused naming it, as long as this writer lives) and checks that a file can be
  /// written in it, before any training; temporary files a killed run left are removed.
  /// An existing DIR/checkpoint is refused unless `replacing` (a run resumed from it): a
  /// new run must not destroy another run's checkpoint. A writer that saves nothing (the
  /// run failed before its first checkpoint) removes the lock file and the directory again
  /// when it made them.
  absl::Status prepare(bool replacing);
  /// Captures the executor's variables into `c` and writes it.
  /// In a multi-process run every rank calls it at the same point (rank 0 gathers the
  /// other ranks' devices); when rank 0 cannot write, every rank gets an error.
  absl::Status save(const Executor& ex, Checkpoint c) const;

  const std::string& dir() const { return dir_; }
  bool writes() const { return writes_; }

 private:
  absl::Status prepareDirectory(bool replacing);
  absl::Status lockDirectory();

  std::string dir_;
  bool writes_;
  Words words_;
  int lock_fd_ = -1;
  // What prepare() made, which a run that writes no checkpoint removes again (a run
  // refused after prepare() leaves nothing behind but what was there).
  bool made_dir_ = false, made_lock_ = false;
  mutable bool saved_ = false;
};

}  // namespace tandem::runtime
