#include "runtime/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "ir/f32_value.h"

namespace tandem::runtime {

absl::StatusOr<LrSchedule> LrSchedule::parse(absl::string_view text, int64_t warmup_steps,
                                             int64_t steps_per_epoch, int64_t epochs,
                                             const LrScheduleWords& words) {
  LrSchedule s;
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        words.schedule, " '", text, "': ", why,
        " (it takes constant, step:EPOCHS:GAMMA such as step:30:0.1, cosine, or cosine:FLOOR "
        "such as cosine:0.1)"));
  };
  if (parts[0] == "constant" && parts.size() == 1) {
    s.kind_ = Kind::kConstant;
  } else if (parts[0] == "cosine" && parts.size() <= 2) {
    s.kind_ = Kind::kCosine;
    if (parts.size() == 2 &&
        (!absl::SimpleAtod(parts[1], &s.floor_) || !(s.floor_ >= 0) || !(s.floor_ < 1)))
      return bad("FLOOR, the last factor, must be a number in [0, 1)");
  } else if (parts[0] == "step") {
    if (parts.size() != 3) return bad("step needs EPOCHS and GAMMA");
    if (!absl::SimpleAtoi(parts[1], &s.step_epochs_) || s.step_epochs_ < 1)
      return bad("EPOCHS must be a whole number of epochs >= 1");
    if (!absl::SimpleAtod(parts[2], &s.gamma_) || !std::isfinite(s.gamma_) || s.gamma_ <= 0 ||
        s.gamma_ > 1)
      return bad("GAMMA must be a number in (0, 1]");
    // The factor is fed to the step in f32: a GAMMA that is 0 there stops training.
    const std::string problem = ir::f32RoundingProblem(
        s.gamma_, [](double g) { return g > 0 && g <= 1; }, "must be in (0, 1]",
        "the learning-rate factor's arithmetic");
    if (!problem.empty()) return bad(absl::StrCat("GAMMA ", parts[2], " ", problem));
    s.kind_ = Kind::kStep;
  } else {
    return bad("unknown schedule");
  }
  if (warmup_steps < 0)
    return absl::InvalidArgumentError(
        absl::StrCat(words.warmup, " ", warmup_steps, ": must be a number of steps >= 0"));
  s.steps_per_epoch_ = std::max<int64_t>(steps_per_epoch, 1);
  s.total_ = std::max<int64_t>(steps_per_epoch * epochs, 1);
  // A warmup as long as the run never reaches the schedule, whatever its kind: cosine
  // would have no steps left, and any schedule's learning rate would stay a fraction of
  // --lr (the last step's factor is total / warmup).
  if (warmup_steps >= s.total_)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s %d: the run has %d %s, so the warmup would not end before the run does (the "
        "learning rate would reach %.3g of %s at most); give %s below %d or more %s",
        words.warmup, warmup_steps, s.total_, s.total_ == 1 ? "step" : "steps",
        static_cast<double>(s.total_) / static_cast<double>(warmup_steps), words.lr, words.warmup,
        s.total_, words.length));
  s.warmup_ = warmup_steps;
  return s;
}

double LrSchedule::factor(int64_t step) const {
  double f = 1;
  switch (kind_) {
    case Kind::kConstant:
      break;
    case Kind::kStep:
      f = std::pow(gamma_, static_cast<double>(step / steps_per_epoch_ / step_epochs_));
      break;
    case Kind::kCosine: {
      const double span = static_cast<double>(total_ - warmup_);
      const double t = std::clamp(static_cast<double>(step - warmup_), 0.0, span);
      f = floor_ + (1 - floor_) * 0.5 * (1 + std::cos(std::numbers::pi * t / span));
      break;
    }
  }
  if (step < warmup_) f *= static_cast<double>(step + 1) / static_cast<double>(warmup_);
  return f;
}

std::string LrSchedule::describe() const {
  std::string out = kind_ == Kind::kConstant ? "constant"
                    : kind_ == Kind::kCosine
                        ? (floor_ > 0 ? absl::StrFormat("cosine to x%g", floor_) : "cosine")
                        : absl::StrFormat("step (x%g every %d epochs)", gamma_, step_epochs_);
  if (warmup_ > 0) absl::StrAppend(&out, ", warmup ", warmup_, " steps");
  return out;
}

}  // namespace tandem::runtime
