// The one training loop of `trident train`, for one process and for any dp x tp x pp layout
// under mpirun (one process is a world of one: no MPI, no launcher).
//
// cmd_train parses the options into TrainSettings and calls run_training, which checks the
// run against the world before any work, then on every rank: builds the process groups and the
// trainer (DistTrainer), resumes from a checkpoint, trains to --stop-at, validates every
// --eval-every steps, checkpoints every --checkpoint-every steps and at the end. Rank 0 prints
// the start-up table, the progress line (loss, tokens/s, MFU, ETA, steps counted from 1),
// writes the JSON-lines metrics; every rank emits step records to the caller's sink
// (TrainPlanning::report: with several ranks, the rehearsal report).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/failure_rate.h"
#include "core/output_path.h"
#include "core/run_spec.h"
#include "runtime/data/token_file.h"
#include "runtime/engine/optimizer.h"
#include "runtime/kernels/ops.h"
#include "runtime/nn/moe_routing.h"
#include "runtime/parallel/process_groups.h"
#include "runtime/parallel/train_planning.h"

namespace trident::parallel {

// A GPU's free memory as the device reports it (cudaMemGetInfo), and the ranks that share it.
struct DeviceMemory {
  double free_bytes = 0;
  int64_t ranks_sharing = 1;
};

struct TrainSettings {
  RunSpec run;                  // model, layout, execution
  engine::AdamWConfig adamw;
  int64_t steps = 20;           // the schedule's length
  int64_t stop_at = -1;         // stop after this step; -1 = steps
  uint64_t seed = 1337;
  double mtp_loss_scaling = 0.1;  // --mtp-loss-scaling-factor (multi-token prediction)
  std::string data_path;        // token file; empty = deterministic synthetic sequences
  // The token file at data_path, opened once (its checksum and ids verified once): the batch
  // sources, the run check and the ranks' agreement all read this one. Null: run_training opens it.
  std::shared_ptr<const data::TokenFile> data;
  nlohmann::json tokenizer;     // stored in checkpoints so `trident generate` can decode
  int64_t eval_every = -1;      // validation every N steps; 0 = only at the end; -1 = steps/5
  int64_t eval_batches = 4;     // micro-batches per validation
  int64_t log_every = -1;       // progress line every N steps; -1 = steps/20
  std::string metrics_path;     // JSON lines, one per step (rank 0)
  std::string checkpoint_path;  // checkpoint directory, written at the end
  int64_t checkpoint_every = 0; // and every N steps; kCheckpointEveryAuto (-1): Young/Daly (save_interval.h)
  double failures_per_1000_gpu_days = kLlama3FailuresPer1000GpuDays;  // for the auto interval
  std::string resume_path;      // continue from this checkpoint
  nlohmann::json resume_meta;   // its meta (model, step), for the run check; null: run_training reads it
  // What the start-up table says of the resume: the options taken from the checkpoint, and the
  // settings this run changes ("steps 12 -> 14 (given)"; resumed_run.h).
  std::vector<std::string> resume_taken, resume_changes;
  // --init-from: a new run that starts from this checkpoint's weights (step 0, new optimizer state).
  std::string init_from_path;
  nlohmann::json init_from_meta;  // its meta (the model), for the run check; null: run_training reads it
  int64_t threads = 0;          // CPU kernel threads per rank; 0 = the node's cores / its ranks
  bool threads_given = false;   // --threads (or OMP_NUM_THREADS) was given (then it must be 1 or more)
  std::string threads_from = "--threads";  // which of the two gave it, for the start-up table
  std::string device = "cpu";   // cpu or cuda (checked by the run check)
  std::string gpu_comm;         // how GPU ranks talk: nccl or mpi-host; empty = not given (nccl)
  // Files the command read besides the data and the checkpoint (--config files): no output may replace them.
  std::vector<NamedPath> input_files;
  // Kernels of a non-CPU device (cmd_train's, so the runtime does not link CUDA); null = CPU.
  std::function<std::unique_ptr<kernels::Kernels>()> make_device_kernels;
  // Free memory of this rank's GPU and how many ranks share it (cmd_train's, on CUDA builds),
  // for the resource check; null: no GPU memory check. Throws InputError when there is no GPU.
  std::function<DeviceMemory()> device_memory;
  // How that device's ranks talk, given its kernels (cmd_train's: NCCL or host-staged MPI on
  // CUDA; see runtime/cuda/gpu_groups.h); null = the MPI groups as they are.
  std::function<GroupWrap(kernels::Kernels&)> device_groups;
  std::string report_path;      // JSON rehearsal report
  std::string html_path;        // the same report as one HTML page (report/html_page.h)
  bool trace_comm = false;
  double comm_timeout_s = 300;
  std::vector<int64_t> stage_layers;  // explicit uneven pipeline split; empty = even
  std::string prediction_cluster = "trident-cluster.toml";  // what `trident bench` writes
  std::string prediction_cost;  // --cost FILE for the prediction (empty: the cluster file's [cost])
  double bucket_mib = 4;        // DP gradient bucket
  nn::MoeOptions moe;           // router settings of MoE models (--moe-*)
  // --moe-load-imbalance was given: the rehearsal report's prediction takes it rather than the
  // imbalance the steps measured.
  bool moe_load_imbalance_given = false;
  int64_t warmup_steps = -1;    // steps left out of the report's means; -1 = min(2, steps/4)
  // --evict-stragglers (under `train --elastic`): a rank named a straggler (straggler_watch.h)
  // stops the run at that step, after saving, so the supervisor restarts without its node.
  bool evict_stragglers = false;
  double straggler_factor = 1.5;  // --straggler-factor: the rule's k (straggler_watch.h)
  // Fault injection for the multi-rank tests (a rank dying or stalling mid-run): called on every
  // rank before each step with (step, world rank). Empty in real runs.
  std::function<void(int64_t step, int rank)> before_step;
  // And a slow GPU: the factor by which a rank's compute is slowed (TrainerOptions::compute_slowdown).
  std::function<double(int rank)> compute_slowdown;
  // The planner's pieces the run uses (memory, MFU, the prediction, the report), set by the caller:
  // train_app::planning() (runtime/parallel links no planner).
  TrainPlanning planning;
};

// Initialises MPI when started by mpirun/srun, runs the one run check (check_trainable, the
// world size, the output paths) on every rank, trains, prints, finalises. `parsed` holds the
// problems the command found while reading its options: they are reported together with the
// run check's. Returns the exit code: 0; 2 for bad input (every problem, printed by rank 0
// before any work, the same on every rank); 1 when a save was refused (non-finite loss or
// weights). A rank that fails later prints "rank R failed: ..." and aborts the job, so no rank
// is left hanging.
int run_training(const TrainSettings& s, const Problems& parsed = {});

}  // namespace trident::parallel
