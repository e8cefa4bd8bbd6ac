// The inside of DistTrainer (dist_trainer.h), shared by its files: dist_trainer.cpp (set-up,
// state access, evaluation, memory), dist_trainer_step.cpp (a step: the program, the pipeline
// messages, the EP clock and wait, the optimizer) and dist_trainer_routing.cpp (routing statistics).
// Private to runtime/parallel.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <thread>
#include <tuple>
#include <utility>

#include "runtime/engine/run_meta.h"
#include "runtime/measure/timed_communicator.h"
#include "runtime/nn/gpt.h"
#include "runtime/nn/init.h"
#include "runtime/parallel/device_buffer.h"
#include "runtime/parallel/grad_sync.h"
#include "runtime/parallel/stage_split.h"
#include "schedule/schedule.h"

namespace trident::parallel::trainer_detail {

using clock_type = std::chrono::steady_clock;

// Installs `hook` as the stage's gradient-ready callback when GptStage offers one
// (set_grad_ready_hook(std::function<void(int64_t begin, int64_t end)>)); returns whether it did.
// Checked at compile time, so the DP buckets start layer by layer as soon as the engine has it.
template <class Stage>
inline bool install_grad_hook(Stage& stage, std::function<void(int64_t, int64_t)> hook) {
  if constexpr (requires { stage.set_grad_ready_hook(hook); }) {
    stage.set_grad_ready_hook(std::move(hook));
    return true;
  } else {
    return false;
  }
}
// GptStage has the hook now: DP buckets start layer by layer (fail loudly if it ever goes away).
static_assert(requires(nn::GptStage& s) { s.set_grad_ready_hook(nullptr); },
              "GptStage::set_grad_ready_hook is needed for layer-by-layer DP overlap");
inline double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

// Pipeline messages are the stages' boundary tensors in their compute type (bf16 under
// mixed precision, as Megatron sends them), straight from the activation buffers.
inline comm::RequestPtr recv_message(comm::Communicator& pp, const kernels::Tensor& t, int peer, int tag) {
  return pp.irecv(t.data, t.count, t.dtype, peer, tag);
}
inline comm::RequestPtr send_message(comm::Communicator& pp, const kernels::Tensor& t, int peer, int tag) {
  return pp.isend(t.data, t.count, t.dtype, peer, tag);
}

// One model chunk this rank holds: its stage, activation slots, gradient sync and optimizer state.
struct Chunk {
  std::unique_ptr<nn::GptStage> stage;
  std::vector<std::unique_ptr<nn::Activations>> slots;  // reused; as many as the schedule keeps in flight
  std::vector<int> free_slots;
  std::vector<int> slot_of;                             // micro-batch -> slot (-1: none)
  std::vector<DeviceBuffer> grad_send;                  // micro-batch -> copy of the input gradient being sent
  std::unique_ptr<GradSync> sync;
  DeviceBuffer m, v;                                    // AdamW moments of the owned pieces (shard coordinates)
  std::vector<std::vector<engine::Segment>> segments;   // per owned piece, offsets from its start
  size_t last_backward = 0;                             // index in the program of the step's last backward
                                                        // (of its last weight-gradient pass when split)
};

// Every rank's values, rank after rank, through device memory (an NCCL group needs it).
std::vector<double> all_gather_doubles(kernels::Kernels& k, comm::Communicator& g, const std::vector<double>& mine);
// The same, for per-call records every rank of g must hold as many of (the same calls in the
// same order): a rank that made more or fewer is a logic error, named by `what`.
std::vector<double> all_gather_same_calls(kernels::Kernels& k, comm::Communicator& g, const std::vector<double>& mine,
                                          const char* what);

}  // namespace trident::parallel::trainer_detail

namespace trident::parallel {

using namespace trainer_detail;

struct DistTrainer::Impl {
  RunSpec run;
  ProcessGroups& groups;
  const BatchSource& data;
  TrainerOptions opt;
  std::unique_ptr<kernels::Kernels> own_k;  // the CPU kernels when the caller hands none
  kernels::Kernels* k = nullptr;
  std::unique_ptr<measure::TimedCommunicator> tp;
  std::unique_ptr<measure::TimedCommunicator> ep;  // expert parallel: the token dispatch's all-to-alls (null at ep 1)
  std::unique_ptr<measure::TimedCommunicator> etp;  // expert tensor parallel: the rows' gathers and reductions (null at etp 1)
  StageSplit split;
  PipelineSchedule schedule;
  int64_t stage = 0, pp = 1, v = 1, m = 1, b = 1, T = 1, B = 1, dp = 1, dp_rank = 0;
  nn::ContextSplit context;  // which rows of each sequence this rank holds (all of them at cp 1)
  std::vector<Chunk> chunks;
  std::vector<std::vector<int32_t>> tokens, targets;  // per micro-batch, b x T / cp
  std::vector<int32_t> whole_tokens, whole_targets;   // context parallel: b whole sequences
  std::vector<comm::RequestPtr> pending_sends;
  RoutingStats* routing = nullptr;  // the step's (DistTrainer::routing_)
  std::vector<double> mtp_sums;     // the step's MTP loss sums per depth (stage with the output)

  int64_t N() const { return b * context.local(); }  // tokens of a micro-batch on this rank
  int64_t C() const { return run.model.hidden; }
  // Sequences [first, first + b) of `step` of `source`, the rows this rank holds.
  void fetch(const BatchSource& source, int64_t step, int64_t first, int32_t* tok, int32_t* tgt) {
    if (!context.active()) return source.fill(step, first, b, tok, tgt);
    source.fill(step, first, b, whole_tokens.data(), whole_targets.data());
    context_share(context, b, whole_tokens.data(), tok);
    context_share(context, b, whole_targets.data(), tgt);
  }
  double run_program(PhaseTimes& t, double pp_message_s);
  double measure_pp_message();  // a collective over pp: the slowest pair's seconds
  // EP: this rank's steady clock minus EP rank 0's, and the error bound (the group's largest).
  std::pair<double, double> measure_ep_clock_offset();
  double ep_clock_offset = 0;
  double ep_wait_seconds();  // a collective over EP: this rank's wait for its peers in the step
  // Routing statistics: zeroed for the step, added after each forward, summed over the world.
  void start_routing(RoutingStats& r) const;
  void count_routing(RoutingStats& r, const Chunk& ch, nn::Activations& acts, int64_t mb) const;
  void sum_routing(RoutingStats& r) const;
  // Expert parallel: the rows this rank's experts received in each dispatch of the step, and
  // after it (a collective over ep, then the world) the step's load imbalance.
  std::vector<double> ep_rows;
  void count_ep_rows(const Chunk& ch, nn::Activations& acts);
  void ep_load_imbalance(RoutingStats& r);
  void sum_tied_embedding();
  void hold_tied_embedding();
  // ZeRO-1's weight all-gathers: those of chunk c overlapping [begin, end) (forward's hook), or all.
  void wait_weights(int64_t c, int64_t begin, int64_t end);
  void complete_weights();
  // norm_wait_s: seconds in the norm's all-reduce over the world (waiting for the slowest rank).
  double clip_and_update(int64_t step, bool sharded, double& norm_wait_s);
  // Seconds of the step so far waiting on the ring attention's exchange (all chunks).
  double ring_seconds() const {
    double s = 0;
    for (const auto& ch : chunks)
      if (nn::RingAttention* r = ch.stage->ring()) s += r->exchange_seconds();
    return s;
  }
};

}  // namespace trident::parallel
