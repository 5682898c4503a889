#pragma once

// The learning-rate schedule of a run (`--schedule`, `--warmup`): a factor for every
// update, multiplied into each optimizer update's lr through the fed variable @lr_scale
// (passes/feed_learning_rate.h). A pure function of the update's index in the whole run,
// so a run resumed mid-epoch gets exactly the factors it would have had.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::runtime {

/// How LrSchedule's errors name the settings (the caller's words). `length`: the setting
/// that makes the run longer (its epochs, or its steps for a run by steps).
struct LrScheduleWords {
  std::string schedule = "schedule", warmup = "warmup", lr = "lr", length = "epochs";
};

class LrSchedule {
 public:
  enum class Kind { kConstant, kStep, kCosine };

  /// `text`: constant, step:EPOCHS:GAMMA (the factor is GAMMA^floor(epoch / EPOCHS), as
  /// torch.optim.lr_scheduler.StepLR stepped per epoch), cosine (from 1 to 0 over the
  /// updates after the warmup, as CosineAnnealingLR with eta_min 0 over the whole run) or
  /// cosine:FLOOR (from 1 to FLOOR: eta_min = FLOOR * lr, nanoGPT's min_lr = lr / 10).
  /// `warmup_steps` updates first ramp linearly: update s (from 0) gets (s + 1) / warmup,
  /// times the schedule's own factor. `steps_per_epoch` and `epochs` size the run. Errors
  /// name the setting at fault and what it takes, in the caller's words.
  static absl::StatusOr<LrSchedule> parse(absl::string_view text, int64_t warmup_steps,
                                          int64_t steps_per_epoch, int64_t epochs,
                                          const LrScheduleWords& words = {});

  /// The factor of update `step` (0 for the run's first).
  double factor(int64_t step) const;
  /// True for the constant schedule without warmup: every factor is 1.
  bool isConstant() const { return kind_ == Kind::kConstant && warmup_ == 0; }
  /// "cosine, warmup 235 steps" as the run header says it.
  std::string describe() const;

 private:
  Kind kind_ = Kind::kConstant;
  int64_t step_epochs_ = 1;
  double gamma_ = 1;
  double floor_ = 0;  // cosine's last factor
  int64_t warmup_ = 0;
  int64_t steps_per_epoch_ = 1;
  int64_t total_ = 1;
};

}  // namespace tandem::runtime
