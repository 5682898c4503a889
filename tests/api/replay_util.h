#pragma once

// What the replays against PyTorch share (gpt_replay_test.cc, vit_replay_test.cc): a
// model's initial weights and every step's loss as the text files the Python replays read
// (tests/api/replay_steps.py).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tandem/tandem.h"

namespace tandem::testing {

/// Numbers as the replays read them: %.9g (a float's value exactly), space-separated.
template <typename Range>
std::string numbersText(const Range& values, const char* separator = " ") {
  return absl::StrJoin(values, separator, [](std::string* out, double v) {
    absl::StrAppend(out, absl::StrFormat("%.9g", v));
  });
}

/// The weights before training and the loss of every step of `m.fit()`.
struct Replayed {
  std::string weights;  // per variable a line "NAME D0 D1 ..." and a line of its values
  std::vector<double> losses;
};

inline absl::StatusOr<Replayed> trainForReplay(Model& m) {
  absl::StatusOr<std::vector<Weight>> initial = m.weights();
  if (!initial.ok()) return initial.status();
  Replayed r;
  for (const Weight& w : *initial)
    absl::StrAppend(&r.weights, w.name, " ", absl::StrJoin(w.shape, " "), "\n",
                    numbersText(w.f32()), "\n");
  auto fit = m.fit({.on_step = [&](const StepMetrics& s) {
    r.losses.push_back(s.loss);
    return true;
  }});
  if (!fit.ok()) return fit.status();
  return r;
}

}  // namespace tandem::testing
