// Event simulation of one training step of ONE pipeline (p stages). Every DP replica and every
// TP rank of a stage runs the same program with the same costs, so one pipeline stands for the
// whole cluster: the costs already carry the TP collectives and the DP reduction over the links
// the Mesh gives them (see plan_costs.h). Cost: O(actions) = O(p * m * v).
//
// Timing rules (the schedule's communication semantics, timed):
//   - compute actions run back to back on their stage;
//   - a send starts when its stage reaches it and when the previous message on the same channel
//     (stage pair and direction) has left; it takes p2p_s; with blocking_sends the stage waits
//     for it; a receive waits until the message has arrived;
//   - after a stage's last backward of a chunk (ZeRO-2: after every backward), that chunk's
//     gradient buckets are reduced on a separate DP stream, bucket k ready once (k+1)/n of that
//     backward is done;
//   - then the tied-embedding sync (first and last stage together), the optimizer, and the
//     ZeRO all-gather. The step ends when the last stage is done.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedule/schedule.h"
#include "sim/sim_costs.h"

namespace trident::sim {

enum class SpanKind {
  Forward,
  Backward,
  BackwardInput,
  BackwardWeight,
  Send,           // a pipeline message leaving this stage (on the stage's lane when blocking)
  RecvWait,       // a receive waiting for a message still in flight
  DpReduce,       // one gradient bucket on the DP stream
  EmbeddingSync,
  Optimizer,
  DpGather,
};
std::string to_string(SpanKind kind);

struct Span {
  int64_t stage = 0;
  SpanKind kind = SpanKind::Forward;
  int32_t micro_batch = -1;
  int32_t chunk = -1;
  int32_t peer = -1;      // Send / RecvWait: the other stage
  bool on_dp_stream = false;  // DpReduce runs beside compute, on its own stream
  double start_s = 0;
  double end_s = 0;
};

struct StageResult {
  int64_t stage = 0;
  double compute_s = 0;       // forward/backward/weight-gradient actions (TP collectives included)
  double optimizer_s = 0;
  double busy_s = 0;          // compute + optimizer
  double idle_s = 0;          // step - busy
  double pipeline_end_s = 0;  // end of this stage's last compute action
  double end_s = 0;           // end of its step (optimizer and gathers done)
  double bubble_s = 0;        // idle inside the pipeline phase not explained by communication
  double exposed_tp_s = 0;    // TP collectives (always on the critical path)
  double exposed_pp_s = 0;    // blocking sends + the part of receive waits that is transfer time
  double exposed_dp_s = 0;    // DP reduction, embedding sync and gathers past the last backward, + the next
  double exposed_layer_dp_s = 0;  // ZeRO-3 per-layer gathers / reduce-scatters inside the passes
  double exposed_cp_s = 0;    // KV ring exchange not hidden behind attention (context parallel)
  double exposed_ep_s = 0;    // MoE all-to-alls on the ep group
  double host_wait_s = 0;     // waiting for the host to issue the kernels (plan/host_issue.h)
  // What the DP stream played: reductions of the stage's whole gradient buffer (each split in
  // buckets and, interleaved, in a piece per chunk) and their seconds (hidden or not).
  int64_t dp_reductions = 0;
  double dp_reduce_played_s = 0;
};

struct SimResult {
  double step_s = 0;
  double pipeline_s = 0;      // until the last compute action of any stage ends
  double bubble_share = 0;    // sum of bubbles / (p * pipeline_s)
  int64_t critical_stage = 0; // the stage that ends last
  std::vector<StageResult> stages;
  std::vector<Span> spans;    // the timeline, for pictures
  // Exposed communication of the critical stage, per group.
  double exposed_tp_s() const { return stages[critical_stage].exposed_tp_s; }
  double exposed_pp_s() const { return stages[critical_stage].exposed_pp_s; }
  double exposed_dp_s() const { return stages[critical_stage].exposed_dp_s; }
  double exposed_cp_s() const { return stages[critical_stage].exposed_cp_s; }
  double exposed_ep_s() const { return stages[critical_stage].exposed_ep_s; }
  double host_wait_s() const { return stages[critical_stage].host_wait_s; }
};

struct SimOptions {
  bool record_spans = true;
};

// Throws InputError when the costs do not match the schedule's shape (stages, chunks).
SimResult simulate(const PipelineSchedule& schedule, const SimCosts& costs, const SimOptions& options = {});

// The closed forms the simulation must reproduce for uniform stages and free communication are
// core/pipeline_bubble.h's closed_form_bubble_share.

}  // namespace trident::sim
