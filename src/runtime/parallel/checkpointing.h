// The trainer's state to and from a checkpoint directory (runtime/checkpoint), on any layout.
//
// Saving: every rank of DP replica 0 writes the logical slices it holds (parameters and AdamW
// moments; ZeRO-1 moments are first gathered over the DP group), TP-replicated tensors only
// from tp rank 0, the tied embedding only from the first stage. Loading: every rank reads the
// whole logical tensors it needs and cuts out its own slices, so any layout reads any
// checkpoint. Both are collective over the world.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/parallel/dist_trainer.h"

namespace trident::parallel {

// Refused saves (a non-finite loss or non-finite weights): the previous checkpoint stays.
struct SaveRefused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// meta: the run settings; "step" must be the optimizer steps done. Throws SaveRefused (same on
// every rank) when `loss` or any weight is not finite, InputError on I/O failure. Returns when the
// checkpoint is durable and in place.
void save_checkpoint(DistTrainer& trainer, ProcessGroups& groups, const std::string& dir, const nlohmann::json& meta,
                     double loss);

// Saves that overlap training (as torch.distributed.checkpoint's async_save): start() checks the
// state, makes DIR.saving and starts a thread that writes the shard; it returns once every byte
// has left the trainer's buffers (the only part the training loop waits for): with O_DIRECT the
// disk has read them straight from those buffers, through the page cache they are copied into
// it; the rest of the save (the sync, the manifest, the swap) goes on while training does. (A
// copy of the state into a buffer of the save's own cost the first save its allocation, 1-3 s
// for 608 MB on this project's VMs, and checkpoint-sized host memory: written from the trainer's
// buffers, the wait is the disk's write and nothing is allocated.) GPU and ZeRO states are
// gathered into copies of the save's own, written while training goes on. complete() waits for
// that thread and, on every rank alike, writes the manifest and swaps DIR.saving in
// (collective); poll() does it only once every writer is done. A save is in place only once
// completed, so an interrupted one leaves the previous checkpoint as it was. One save at a time:
// start() completes the one before it. The destructor (a run that failed elsewhere) joins the
// thread and removes that save's DIR.saving without swapping it in (no collective on an error path).
class AsyncSaver {
 public:
  AsyncSaver(DistTrainer& trainer, ProcessGroups& groups, std::string dir);
  ~AsyncSaver();
  AsyncSaver(const AsyncSaver&) = delete;
  AsyncSaver& operator=(const AsyncSaver&) = delete;
  // Throws like save_checkpoint (SaveRefused, InputError), the previous save's errors included.
  void start(const nlohmann::json& meta, double loss);
  void complete();  // no-op when no save is in flight
  // Completes the save in flight if every rank's writer has finished (a collective: every rank
  // calls it at the same step); true when it did. The run calls it after every step, so a save is
  // in place as soon as it is durable, not only at the next save.
  bool poll();
  // A save the caller waits for whole (the state does not change meanwhile).
  void save_now(const nlohmann::json& meta, double loss);
  bool in_flight() const;
  // Of the last completed save: seconds from start() until this rank's shard was durable.
  double last_durable_seconds() const { return last_durable_s_; }

 private:
  struct Flight;
  void begin(const nlohmann::json& meta, double loss, bool background);
  DistTrainer& trainer_;
  ProcessGroups& groups_;
  std::string dir_;
  std::unique_ptr<Flight> flight_;
  double last_durable_s_ = 0;
};

// Loads parameters and optimizer moments (with `weights_only`, --init-from: the parameters; the
// moments stay the new run's zeros). Throws InputError when the checkpoint's tensors do not fit
// this model (another shape, a missing tensor).
void load_checkpoint(DistTrainer& trainer, const checkpoint::CheckpointReader& reader, bool weights_only = false);

}  // namespace trident::parallel
