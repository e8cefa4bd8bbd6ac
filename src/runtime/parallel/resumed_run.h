// What a checkpoint holds of its run, and how `train --resume` takes it: resume is the run.
//
// The checkpoint's meta (checkpoint_meta, its one writer) holds every setting that defines the
// run: the model (MoE sizes included), the router, the batch, the learning-rate schedule, the
// seed, the data (path and contents), the layout and its execution. On resume every one of them
// the user did not give is the checkpoint's (fill_from_checkpoint, before the options are
// resolved); after resolving, each given one is compared with the checkpoint's
// (compare_with_checkpoint): one that would change what is trained (lr, seed, batch, router...)
// is refused naming both values; more --steps, a new layout (tp, pp, dp, cp, ep, order, the
// schedule and the execution settings riding on them, the micro-batch) or another loss weight
// (--mtp-loss-scaling-factor) is applied and listed as a change for the start-up table. `--init-from` takes the checkpoint's model and weights only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/options.h"
#include "core/problems.h"
#include "runtime/parallel/training_loop.h"

namespace trident::parallel {

// The checkpoint's meta for the run `s` at `step` (optimizer steps done).
nlohmann::json checkpoint_meta(const TrainSettings& s, int64_t step);

// One setting of a run as a checkpoint's meta holds it: the option that sets it, its value as
// option text (read back by the option parser to the same value), and whether a resume may
// change it.
struct StoredSetting {
  // Layout: the layout and what rides on it; Weight: a loss weight (the MTP losses'), which
  // re-weighs the rest of the run without changing what has been trained.
  enum Kind { Fixed, Steps, Layout, Weight };
  std::string option;  // "lr", "tp", "moe-normalise"
  std::string text;    // "0.004", "2", "false"
  Kind kind = Fixed;
};

// Every setting `meta` holds (checkpoints of older versions: those they have).
std::vector<StoredSetting> stored_settings(const nlohmann::json& meta);

// Sets every option of the checkpoint's run that `values` lacks (source "the checkpoint DIR"):
// the model's sizes (when no --model preset is given), the router, batch, schedule, seed and
// data; the layout when no dimension is given and the launcher started as many ranks as the
// checkpoint's layout has (`world`), the options riding on a dimension (the schedule on pp...)
// when that dimension keeps its size. With `weights_only` (--init-from): the model only (with its router's
// weighting and dropping).
// Returns the options it set.
std::vector<std::string> fill_from_checkpoint(OptionValues& values, const nlohmann::json& meta,
                                              const std::string& dir, int64_t world, bool weights_only);

// The resolved run against the checkpoint it resumes: a fixed setting that differs is a problem
// naming the option and both values (code resume-setting); the allowed changes are returned as
// lines for the start-up table ("steps 12 -> 14 (given)").
std::vector<std::string> compare_with_checkpoint(const TrainSettings& s, const OptionValues& values,
                                                 Problems& problems);

}  // namespace trident::parallel
