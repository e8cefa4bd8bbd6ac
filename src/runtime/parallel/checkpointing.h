// The trainer's state to and from a checkpoint directory (runtime/checkpoint), on any layout.
//
// Saving: every rank of DP replica 0 writes the logical slices it holds (parameters and AdamW
// moments; ZeRO-1 moments are first gathered over the DP group), TP-replicated tensors only
// from tp rank 0, the tied embedding only from the first stage. Loading: every rank reads the
// whole logical tensors it needs and cuts out its own slices, so any layout reads any
// checkpoint. Both are collective over the world.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/parallel/dist_trainer.h"

namespace trident::parallel {

// Refused saves (a non-finite loss or non-finite weights): the previous checkpoint stays.
struct SaveRefused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// meta: the run settings; "step" must be the optimizer steps done. Throws SaveRefused (same on
// every rank) when `loss` or any weight is not finite, InputError on I/O failure.
void save_checkpoint(DistTrainer& trainer, ProcessGroups& groups, const std::string& dir, const nlohmann::json& meta,
                     double loss);

// Loads parameters and optimizer moments (with `weights_only`, --init-from: the parameters; the
// moments stay the new run's zeros). Throws InputError when the checkpoint's tensors do not fit
// this model (another shape, a missing tensor).
void load_checkpoint(DistTrainer& trainer, const checkpoint::CheckpointReader& reader, bool weights_only = false);

}  // namespace trident::parallel
