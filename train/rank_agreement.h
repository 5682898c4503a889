#pragma once

// What the processes of a multi-process run (mpirun) compare before any collective that a
// difference would corrupt: mpirun's MPMD lines give each rank its own settings, and each
// rank reads its own copy of the data.

#include <string>
#include <utility>
#include <vector>

#include "ir/ir.h"
#include "runtime/data/example_source.h"
#include "train/model_settings.h"
#include "train/setting.h"
#include "train/train_config.h"

namespace tandem::training {

/// The settings every rank must share, as (name in the front end's words, value): all
/// that decide the module it compiles, the data order, the run's length and which
/// collectives it makes (the checkpoints, a stop on a non-finite loss), then the front
/// end's own (TrainConfig::also_shared). Per-rank choices that change no result may
/// differ: threads per device, the data's path (its contents are compared once loaded),
/// the collective timeout and the outputs (rank 0 writes them).
std::vector<std::pair<std::string, std::string>> settingsEveryRankShares(const TrainConfig& config,
                                                                         const ModelChoice& choice,
                                                                         const SettingNames& names);

/// What the ranks compare once the module is compiled and the data read: a rank of
/// another build, or one whose data holds other files, would train another step.
std::vector<std::pair<std::string, std::string>> contentsEveryRankShares(
    const ir::Module& module, const runtime::data::ExampleSource& train,
    const runtime::data::ExampleSource& test);

}  // namespace tandem::training
