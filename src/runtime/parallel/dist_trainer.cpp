#include "runtime/parallel/dist_trainer.h"

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

namespace trident::parallel {

namespace {

using clock_type = std::chrono::steady_clock;

// Installs `hook` as the stage's gradient-ready callback when GptStage offers one
// (set_grad_ready_hook(std::function<void(int64_t begin, int64_t end)>)); returns whether it did.
// Checked at compile time, so the DP buckets start layer by layer as soon as the engine has it.
template <class Stage>
bool install_grad_hook(Stage& stage, std::function<void(int64_t, int64_t)> hook) {
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
double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

// Pipeline messages are the stages' boundary tensors in their compute type (bf16 under
// mixed precision, as Megatron sends them), straight from the activation buffers.
comm::RequestPtr recv_message(comm::Communicator& pp, const kernels::Tensor& t, int peer, int tag) {
  return pp.irecv(t.data, t.count, t.dtype, peer, tag);
}
comm::RequestPtr send_message(comm::Communicator& pp, const kernels::Tensor& t, int peer, int tag) {
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

}  // namespace

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

DistTrainer::DistTrainer(const RunSpec& run, ProcessGroups& groups, const BatchSource& data,
                         const TrainerOptions& options)
    : impl_(std::make_unique<Impl>(Impl{run, groups, data, options})) {
  Impl& I = *impl_;
  I.pp = run.layout.pp;
  I.v = run.exec.schedule == ScheduleKind::Interleaved ? run.exec.virtual_stages : 1;
  I.dp = run.layout.dp;
  I.dp_rank = groups.coords.dp();
  I.stage = groups.coords.pp();
  I.b = run.exec.micro_batch_size;
  I.B = run.exec.global_batch_size;
  I.T = run.model.seq_len;
  I.m = run.exec.micro_batches(I.dp);
  I.context = nn::ContextSplit{run.layout.cp, groups.coords[Dim::CP], I.T};
  if (I.context.active()) {
    I.whole_tokens.resize(size_t(I.b * I.T));
    I.whole_targets.resize(size_t(I.b * I.T));
  }

  Problems problems;
  I.split = make_stage_split(run.model, I.pp, I.v, options.stage_layers, problems);
  problems.throw_if_any();
  I.schedule = build_schedule(run.exec.schedule, I.pp, I.m, I.v);
  const auto& program = I.schedule.programs.at(I.stage);

  if (options.kernels) {
    I.k = options.kernels;
  } else {
    I.own_k = kernels::make_cpu_kernels(options.kernel_threads);
    I.k = I.own_k.get();
  }
  I.tp = std::make_unique<measure::TimedCommunicator>(*groups.tp);
  comm::Communicator* tp_comm = run.layout.tp > 1 ? I.tp.get() : nullptr;
  if (groups.ep) I.ep = std::make_unique<measure::TimedCommunicator>(*groups.ep);
  if (groups.etp) I.etp = std::make_unique<measure::TimedCommunicator>(*groups.etp);

  I.tokens.assign(I.m, std::vector<int32_t>(I.N()));
  I.targets.assign(I.m, std::vector<int32_t>(I.N()));
  I.chunks.resize(I.v);
  for (int64_t c = 0; c < I.v; ++c) {
    Chunk& ch = I.chunks[c];
    nn::Shard shard = shard_for(run.model, I.split, I.stage, c, run.layout.tp, groups.coords.tp());
    shard.moe = options.moe;
    engine::use_model_router(shard.moe, run.model);  // its capacity factor, DeepSeek-V3's router
    // Expert parallel: this rank holds its EP group position's experts (ParamLayout's stacking).
    if (groups.ep) shard.ep_size = groups.ep->size(), shard.ep_rank = groups.ep->rank();
    // Expert tensor parallel: this rank's slices of its experts (its ETP group position).
    if (groups.etp) shard.etp_size = groups.etp->size(), shard.etp_rank = groups.etp->rank();
    // Without ep the experts' gradients go over the dense group, which is EDP only at etp = tp.
    if (run.model.is_moe() && !groups.edp && run.layout.etp != run.layout.tp)  // train-expert-layout says it first
      throw std::logic_error("DistTrainer: ep 1 with etp != tp needs an EDP group the runtime builds at ep > 1 only");
    // ZB-H1 runs the backward in its two halves, as the schedule lists them.
    const bool split = run.exec.schedule == ScheduleKind::ZeroBubbleH1;
    // The DP sync first: under ZeRO-2/3 it holds the stage's gradients (and weights) by unit.
    const nn::ParamLayout layout(shard);
    // Dense gradients reduce (and ZeRO shards) over dp x cp: each cp rank's are its tokens' share.
    // The experts' gradients reduce over EDP (the ranks holding the same experts) instead.
    ch.sync = std::make_unique<GradSync>(groups.dense_grads(), layout, run.exec.zero, options.bucket_floats, *I.k,
                                         groups.ep ? groups.edp.get() : nullptr);
    ch.stage = std::make_unique<nn::GptStage>(
        *I.k, shard,
        nn::StageConfig{.B = I.b, .T = I.T, .tp = tp_comm, .sequence_parallel = run.exec.sequence_parallel,
                        .compute = options.compute, .recompute = run.exec.recompute, .split_backward = split,
                        .cp = I.context.active() ? groups.cp.get() : nullptr, .storage = ch.sync->units(),
                        .mtp_loss_scaling = float(options.mtp_loss_scaling)});
    if (I.ep) ch.stage->set_expert_group(I.ep.get());
    if (I.etp) ch.stage->set_expert_tensor_group(I.etp.get());
    if (ch.sync->stage() == 1)
      ch.stage->set_weights_needed_hook([&I, c](int64_t begin, int64_t end) { I.wait_weights(c, begin, end); });
    if (ch.stage->params()) {
      ch.stage->init_params(options.seed);
    } else {  // ZeRO-3: the same initial values, this rank's pieces only
      std::vector<float> host(size_t(layout.total()), 0.0f);
      nn::init_gpt2(layout, options.seed, host.data());
      ch.sync->scatter_from_host(host.data(), ch.sync->units()->param_shard());
    }
    ch.slot_of.assign(I.m, -1);
    ch.grad_send.resize(I.m);
    ch.m = DeviceBuffer(*I.k, size_t(ch.sync->shard_floats()));
    ch.v = DeviceBuffer(*I.k, size_t(ch.sync->shard_floats()));
    for (const ShardPiece& p : ch.sync->pieces()) {
      auto seg = engine::optimizer_segments(layout, p.begin, p.end);
      for (auto& x : seg) x.offset -= p.begin;
      ch.segments.push_back(std::move(seg));
    }
    // Activation slots: the most micro-batches this chunk holds at once in the program (until
    // the backward, or until the weight-gradient pass when the backward is split).
    int64_t live = 0, peak = 0;
    std::vector<bool> held(I.m, false);
    for (size_t i = 0; i < program.size(); ++i) {
      const Action& a = program[i];
      if (a.chunk != c) continue;
      if ((a.kind == ActionKind::RecvActivation || a.kind == ActionKind::Forward) && !held[a.micro_batch]) {
        held[a.micro_batch] = true;
        peak = std::max(peak, ++live);
      }
      if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardWeight) {
        held[a.micro_batch] = false;
        --live;
        ch.last_backward = i;
      }
    }
    for (int64_t s = 0; s < peak; ++s) {
      ch.slots.push_back(std::make_unique<nn::Activations>(*ch.stage));
      ch.free_slots.push_back(int(peak - 1 - s));
    }
  }

  // DeepSeek-V3's expert bias: one table of the model's MoE layers (start_routing's order), zeros
  // at first as Megatron-Core's, the same on every rank; each stage reads its layers' rows.
  if (run.model.router_expert_bias && run.model.is_moe()) {
    const nn::Shard whole = nn::Shard::whole(run.model);
    std::vector<int64_t> moe_layers;
    for (int64_t l = 0; l < run.model.layers + run.model.mtp_layers; ++l)  // the MTP layers' routers too
      if (whole.moe_layer(l)) moe_layers.push_back(l);
    expert_bias_.assign(moe_layers.size(), std::vector<float>(size_t(run.model.experts), 0.0f));
    for (auto& ch : I.chunks) {
      const nn::Shard& s = ch.stage->shard();
      for (int64_t i = 0; i < s.num_layers() + s.mtp_count(); ++i)
        if (s.moe_layer(s.first_layer + i)) {
          const size_t at = size_t(std::find(moe_layers.begin(), moe_layers.end(), s.first_layer + i) - moe_layers.begin());
          ch.stage->set_expert_bias(i, expert_bias_[at].data());
        }
    }
  }

  I.hold_tied_embedding();
  if (I.pp > 1) pp_message_s_ = I.measure_pp_message();
  if (I.ep) std::tie(I.ep_clock_offset, ep_clock_error_s_) = I.measure_ep_clock_offset();
  if (I.context.active()) {
    double block = I.chunks.front().stage->ring()->probe_block_seconds(5);
    all_reduce_f64(*groups.world, &block, 1, comm::ReduceOp::Max);
    cp_block_s_ = block;
  }
}

DistTrainer::~DistTrainer() = default;

void DistTrainer::set_expert_bias(const std::vector<std::vector<float>>& bias) {
  if (bias.size() != expert_bias_.size())
    throw std::logic_error("DistTrainer::set_expert_bias: another number of MoE layers");
  for (size_t i = 0; i < bias.size(); ++i) {
    if (bias[i].size() != expert_bias_[i].size())
      throw std::logic_error("DistTrainer::set_expert_bias: another number of experts");
    std::copy(bias[i].begin(), bias[i].end(), expert_bias_[i].begin());  // in place: the stages point here
  }
}

int64_t DistTrainer::chunks() const { return int64_t(impl_->chunks.size()); }
const nn::ParamLayout& DistTrainer::chunk_layout(int64_t c) const { return impl_->chunks[c].stage->layout(); }
const float* DistTrainer::chunk_params(int64_t c) const {
  impl_->complete_weights();
  return impl_->chunks[c].stage->params();
}
nn::GptStage& DistTrainer::chunk_stage(int64_t c) {
  impl_->complete_weights();
  return *impl_->chunks[c].stage;
}
kernels::Kernels& DistTrainer::kernels() { return *impl_->k; }
int DistTrainer::zero_stage() const { return impl_->chunks.front().sync->stage(); }
ZeroShards::Counts DistTrainer::zero_counts(int64_t c) const {
  const ZeroShards* units = impl_->chunks[c].sync->units();
  return units ? units->counts() : ZeroShards::Counts{};
}
std::vector<float> DistTrainer::whole_moment(int64_t c, int which) {
  impl_->complete_weights();  // the moments' gather stages through the weight gathers' buffers
  Chunk& ch = impl_->chunks[c];
  return ch.sync->gather_to_host(which == 0 ? ch.m.p : ch.v.p);
}
void DistTrainer::set_whole_moment(int64_t c, int which, const float* whole) {
  Chunk& ch = impl_->chunks[c];
  ch.sync->scatter_from_host(whole, which == 0 ? ch.m.p : ch.v.p);
}
std::vector<float> DistTrainer::whole_params(int64_t c) {
  impl_->complete_weights();
  Chunk& ch = impl_->chunks[c];
  if (!ch.stage->params()) return ch.sync->gather_to_host(ch.sync->units()->param_shard());
  std::vector<float> out(size_t(ch.stage->layout().total()));
  impl_->k->to_host(out.data(), ch.stage->params(), out.size());
  return out;
}
float* DistTrainer::host_whole(int64_t c, int which) {
  // CPU kernels' device memory is host memory (runtime/kernels/cpu); a GPU's is not.
  if (impl_->k->device_name().rfind("cpu", 0) != 0) return nullptr;
  impl_->complete_weights();
  Chunk& ch = impl_->chunks[c];
  if (which < 0) return ch.stage->params();  // null under ZeRO-3
  return ch.sync->holds_whole() ? (which == 0 ? ch.m.p : ch.v.p) : nullptr;
}
void DistTrainer::set_whole_params(int64_t c, const float* whole) {
  impl_->complete_weights();  // a gather in flight would overwrite what is set
  Chunk& ch = impl_->chunks[c];
  if (!ch.stage->params()) return ch.sync->scatter_from_host(whole, ch.sync->units()->param_shard());
  impl_->k->from_host(ch.stage->params(), whole, size_t(ch.stage->layout().total()));
  ch.stage->params_updated();
}
const StageSplit& DistTrainer::split() const { return impl_->split; }

double DistTrainer::evaluate(const BatchSource& data, int64_t batches) {
  Impl& I = *impl_;
  ProcessGroups& g = I.groups;
  const int64_t virtual_stages = I.pp * I.v;
  std::vector<int32_t> tokens(size_t(I.N())), targets(size_t(I.N()));
  double loss_sum = 0;
  // Micro-batch j of the validation set goes to replica j % dp; within a replica the
  // activations walk the virtual stages in order (stage k = chunk * pp + pipeline stage), each
  // rank acting on the ones it holds, so every receive has its send already on its way.
  // ZeRO-3's forward gathers weights over the DP group, so every replica runs as many forwards:
  // a replica without a micro-batch left runs one more on micro-batch 0 and does not count it.
  // Expert parallel likewise: each forward's all-to-alls need every rank of the EP group.
  const bool gathers = I.chunks.front().sync->units() && I.chunks.front().sync->stage() >= 3;
  const int64_t rounds = gathers || I.ep ? (batches + I.dp - 1) / I.dp * I.dp : batches;
  for (int64_t j = I.dp_rank; j < rounds; j += I.dp) {
    const bool counted = j < batches;
    I.fetch(data, 0, (counted ? j : 0) * I.b, tokens.data(), targets.data());
    for (int64_t vs = 0; vs < virtual_stages; ++vs) {
      if (vs % I.pp != I.stage) continue;
      Chunk& ch = I.chunks[size_t(vs / I.pp)];
      nn::Activations& acts = *ch.slots.front();
      const int tag = int((1 << 29) + vs);
      if (vs > 0 && I.pp > 1) recv_message(*g.pp, acts.input(), int((vs - 1) % I.pp), tag)->wait();
      if (vs > 0 && I.pp == 1) I.k->convert(acts.input(), I.chunks[size_t(vs - 1)].slots.front()->output());
      ZeroShards* units = ch.sync->units();
      if (units) units->begin_pass(Pass::Forward);
      ch.stage->forward(acts, tokens.data(), targets.data());
      if (units) units->end_pass();
      if (counted && ch.stage->shard().has_output && g.coords.tp() == 0) loss_sum += ch.stage->loss_sum(acts);
      if (vs + 1 < virtual_stages && I.pp > 1)
        send_message(*g.pp, acts.output(), int((vs + 1) % I.pp), int((1 << 29) + vs + 1))->wait();
    }
  }
  all_reduce_f64(*g.world, &loss_sum, 1, comm::ReduceOp::Sum);
  return loss_sum / (double(batches) * double(I.b * I.T));
}

ModelStateBytes DistTrainer::model_state_bytes() const {
  ModelStateBytes b;
  for (const auto& ch : impl_->chunks) {
    const double whole = 4.0 * double(ch.stage->layout().total());
    if (ch.stage->params()) b.weights += whole;
    if (ch.stage->grads()) b.gradients += whole;
    b.optimizer += 4.0 * double(ch.m.n + ch.v.n);
    ch.sync->add_bytes(b);
  }
  return b;
}

double DistTrainer::allocated_bytes() const {
  double floats = 0;
  for (const auto& ch : impl_->chunks)
    for (const auto& g : ch.grad_send) floats += double(g.n);
  for (const auto& t : impl_->tokens) floats += 2.0 * double(t.size());  // tokens + targets (int32)
  return floats * 4 + model_state_bytes().total() + activation_bytes();
}

ActivationMemory DistTrainer::activation_memory() const {
  ActivationMemory a;
  for (const auto& ch : impl_->chunks) {
    a.slots += int64_t(ch.slots.size());
    for (const auto& s : ch.slots) a.slot_bytes += 4.0 * double(s->floats());
    a.scratch_bytes += double(ch.stage->layer_scratch_bytes());
  }
  return a;
}

// Wire time of one pipeline message (N x C in the compute type, N/tp x C under sequence
// parallelism), measured by ping-pong between stage pairs, so waits on a receive can be split
// into transfer and bubble. The message and the result live in device memory (the
// communicator may be NCCL).
double DistTrainer::Impl::measure_pp_message() {
  Impl& I = *this;
  const nn::GptStage& first = *I.chunks.front().stage;
  const size_t count = size_t(first.boundary_floats());
  const DeviceBuffer buf(*I.k, (count * comm::dtype_size(first.compute_dtype()) + 3) / 4);
  const kernels::Tensor msg(buf.p, first.compute_dtype(), count);
  auto& p = *I.groups.pp;
  const int peer = (I.stage % 2 == 0) ? int(I.stage + 1) : int(I.stage - 1);
  double best = 1e30;
  if (peer < p.size()) {
    for (int rep = 0; rep < 5; ++rep) {
      auto t0 = clock_type::now();
      if (I.stage % 2 == 0) {
        send_message(p, msg, peer, 1 << 30)->wait();
        recv_message(p, msg, peer, 1 << 30)->wait();
      } else {
        recv_message(p, msg, peer, 1 << 30)->wait();
        send_message(p, msg, peer, 1 << 30)->wait();
      }
      best = std::min(best, since(t0) / 2);
    }
  }
  const float f = peer < p.size() ? float(best) : 0.0f;
  DeviceBuffer slowest(*I.k, 1);
  I.k->from_host(slowest.p, &f, 1);
  p.all_reduce(slowest.p, 1, comm::DType::F32, comm::ReduceOp::Max);
  float g = 0.0f;
  I.k->to_host(&g, slowest.p, 1);
  return g;
}

namespace {

// Every rank's values, rank after rank, through device memory (an NCCL group needs it).
std::vector<double> all_gather_doubles(kernels::Kernels& k, comm::Communicator& g, const std::vector<double>& mine) {
  const size_t n = mine.size() * 2;  // as floats: the bits travel unchanged
  std::vector<double> all(mine.size() * size_t(g.size()));
  if (n == 0) return all;
  const DeviceBuffer send(k, n), recv(k, n * size_t(g.size()));
  k.from_host(send.p, reinterpret_cast<const float*>(mine.data()), n);
  g.all_gather(send.p, recv.p, n, comm::DType::F32);
  k.to_host(reinterpret_cast<float*>(all.data()), recv.p, all.size() * 2);
  return all;
}

// The same, for per-call records every rank of g must hold as many of (the same calls in the
// same order): a rank that made more or fewer is a logic error, named by `what`.
std::vector<double> all_gather_same_calls(kernels::Kernels& k, comm::Communicator& g, const std::vector<double>& mine,
                                          const char* what) {
  const std::vector<double> counts = all_gather_doubles(k, g, {double(mine.size())});
  if (*std::min_element(counts.begin(), counts.end()) != *std::max_element(counts.begin(), counts.end()))
    throw std::logic_error(std::string("EP ranks made different numbers of ") + what + " in a step");
  return all_gather_doubles(k, g, mine);
}

}  // namespace

// So that the EP ranks' all-to-all entries and exits can be put on one clock (one host: the
// offset is ~0; hosts' clocks differ): Cristian's method, rounds of 8 ping-pongs of each rank
// with EP rank 0 on the (untimed) EP group, the one with the shortest round trip, half of which
// bounds the error. A busy machine can delay every round trip of a round: more rounds follow
// (at most 25) until every rank's bound is under 50 us. Rank 0 serves its peers in turn.
// Buffers in device memory (NCCL).
std::pair<double, double> DistTrainer::Impl::measure_ep_clock_offset() {
  comm::Communicator& e = *groups.ep;
  const DeviceBuffer msg(*k, 2);
  double offset = 0, error = 0, best = std::numeric_limits<double>::infinity();
  for (int round = 0; round < 25; ++round) {
    if (e.rank() == 0) {
      for (int peer = 1; peer < e.size(); ++peer)
        for (int rep = 0; rep < 8; ++rep) {
          e.recv(msg.p, 2, comm::DType::F32, peer, 7);
          const double t = measure::steady_seconds();
          k->from_host(msg.p, reinterpret_cast<const float*>(&t), 2);
          e.send(msg.p, 2, comm::DType::F32, peer, 7);
        }
    } else {
      for (int rep = 0; rep < 8; ++rep) {
        const double t0 = measure::steady_seconds();
        e.send(msg.p, 2, comm::DType::F32, 0, 7);
        e.recv(msg.p, 2, comm::DType::F32, 0, 7);
        double server = 0;
        k->to_host(reinterpret_cast<float*>(&server), msg.p, 2);
        const double t1 = measure::steady_seconds();
        if (t1 - t0 < best) best = t1 - t0, offset = (t0 + t1) / 2 - server;
      }
      error = best / 2;
    }
    double worst = 0;
    for (double x : all_gather_doubles(*k, e, {error})) worst = std::max(worst, x);
    if (worst <= 50e-6 || round == 24) {
      error = worst;
      break;
    }
  }
  return {offset, error};
}

// This rank's wait for its EP peers in the step's all-to-alls (all_to_all_wait_seconds): every
// rank's entries and exits, on EP rank 0's clock, gathered over the EP group after the step.
double DistTrainer::Impl::ep_wait_seconds() {
  comm::Communicator& e = *groups.ep;
  std::vector<double> mine = ep->all_to_all_spans();
  for (double& x : mine) x -= ep_clock_offset;
  return measure::all_to_all_wait_seconds(all_gather_same_calls(*k, e, mine, "all-to-alls"), e.size(), e.rank());
}

// Runs this stage's program of the step (forward, backward, the pipeline sends and receives),
// adding where the time went to t; returns the loss summed over the micro-batches it finished.
double DistTrainer::Impl::run_program(PhaseTimes& t, double pp_message_s) {
  Impl& I = *this;
  ProcessGroups& g = I.groups;
  const auto& program = I.schedule.programs[I.stage];
  const float dloss = float(1.0 / double(I.B * I.T));
  auto acquire = [&](Chunk& ch, int mb) -> nn::Activations& {
    if (ch.slot_of[mb] < 0) {
      ch.slot_of[mb] = ch.free_slots.back();
      ch.free_slots.pop_back();
    }
    return *ch.slots[ch.slot_of[mb]];
  };
  auto wait_recv = [&](comm::RequestPtr r) {
    auto t0 = clock_type::now();
    r->wait();
    const double w = since(t0);
    const double wire = std::min(w, pp_message_s);
    t.pp += wire;
    t.bubble += w - wire;
  };
  for (auto& ch : I.chunks)
    if (nn::RingAttention* r = ch.stage->ring()) r->reset_times();
  auto ep_seconds = [&] { return (I.ep ? I.ep->seconds() : 0.0) + (I.etp ? I.etp->seconds() : 0.0); };
  // The EP all-to-alls' time, split into the collective and the wait for peers after the step.
  auto timed_compute = [&](auto&& f) {
    const double tp0 = I.tp->seconds(), cp0 = I.ring_seconds(), ep0 = ep_seconds();
    auto t0 = clock_type::now();
    f();
    if (I.opt.compute_slowdown > 1) {  // the tests' slow GPU
      const double work = since(t0) - (I.tp->seconds() - tp0) - (I.ring_seconds() - cp0) - (ep_seconds() - ep0);
      std::this_thread::sleep_for(std::chrono::duration<double>((I.opt.compute_slowdown - 1) * std::max(0.0, work)));
    }
    const double dt = since(t0), dtp = I.tp->seconds() - tp0, dcp = I.ring_seconds() - cp0, dep = ep_seconds() - ep0;
    t.compute += dt - dtp - dcp - dep;
    t.tp += dtp;
    t.cp += dcp;
    t.ep += dep;
  };

  double loss_sum = 0;
  for (size_t i = 0; i < program.size(); ++i) {
    const Action& a = program[i];
    Chunk& ch = I.chunks[a.chunk];
    nn::GptStage& st = *ch.stage;
    ZeroShards* units = ch.sync->units();
    const int mb = a.micro_batch;
    const int tag = message_tag(a, I.stage, I.pp, I.v);
    switch (a.kind) {
      case ActionKind::RecvActivation:
        wait_recv(recv_message(*g.pp, acquire(ch, mb).input(), a.peer, tag));
        break;
      case ActionKind::Forward: {
        nn::Activations& acts = acquire(ch, mb);
        timed_compute([&] {
          if (units) units->begin_pass(Pass::Forward);
          st.forward(acts, I.tokens[mb].data(), I.targets[mb].data());
          if (units) units->end_pass();
          if (st.shard().has_output) loss_sum += st.loss_sum(acts);
          for (int64_t k = 1; k <= st.shard().mtp_count(); ++k) I.mtp_sums[size_t(k - 1)] += st.mtp_loss_sum(acts, k);
        });
        I.count_routing(*I.routing, ch, acts, mb);
        I.count_ep_rows(ch, acts);
        break;
      }
      case ActionKind::SendActivation: {
        auto t0 = clock_type::now();
        I.pending_sends.push_back(send_message(*g.pp, acquire(ch, mb).output(), a.peer, tag));
        t.pp += since(t0);
        break;
      }
      case ActionKind::RecvGradient:
        wait_recv(recv_message(*g.pp, st.output_grad(), a.peer, tag));
        break;
      case ActionKind::BackwardInput:
        // Input gradients only (sent upstream next); the slot keeps what the weight pass reads.
        timed_compute([&] {
          if (units) units->begin_pass(Pass::BackwardInput);
          st.backward_input(acquire(ch, mb), I.tokens[mb].data(), I.targets[mb].data(), dloss);
          if (units) units->end_pass();
        });
        break;
      case ActionKind::Backward:
      case ActionKind::BackwardWeight: {
        nn::Activations& acts = acquire(ch, mb);
        // ZeRO-2/3 reduce every micro-batch's gradients unit by unit as backward finishes them;
        // plain DP and ZeRO-1 reduce once, from the chunk's last backward of the step.
        const bool last = i == ch.last_backward, reduce = last || units;
        if (reduce) install_grad_hook(st, [&](int64_t b, int64_t e) { ch.sync->mark_ready(st.grads(), b, e); });
        if (units) units->begin_pass(a.kind == ActionKind::Backward ? Pass::Backward : Pass::BackwardWeight);
        if (a.kind == ActionKind::Backward) {
          timed_compute([&] { st.backward(acts, I.tokens[mb].data(), I.targets[mb].data(), dloss); });
        } else {
          const double before = t.compute;
          timed_compute([&] { st.backward_weight(acts); });
          t.weight += t.compute - before;
        }
        if (units) units->end_pass();
        if (reduce) install_grad_hook(st, nullptr);
        ch.free_slots.push_back(ch.slot_of[mb]);
        ch.slot_of[mb] = -1;
        // The chunk's gradients are final after its last backward of the step: start the DP
        // reduction now, overlapping the rest of the program (other chunks, sends, the cool-down).
        if (reduce) ch.sync->mark_ready(st.grads(), 0, st.layout().total());
        break;
      }
      case ActionKind::SendGradient: {
        auto t0 = clock_type::now();
        // A copy: the next backward overwrites the stage's gradient buffer while this is in flight.
        const kernels::Tensor grad = st.input_grad();
        auto& buf = ch.grad_send[mb];
        const size_t floats = (grad.bytes() + 3) / 4;
        if (buf.n != floats) buf = DeviceBuffer(*I.k, floats);
        const kernels::Tensor copy(buf.p, grad.dtype, grad.count);
        I.k->convert(copy, grad);
        I.pending_sends.push_back(send_message(*g.pp, copy, a.peer, tag));
        t.pp += since(t0);
        break;
      }
    }
  }
  return loss_sum;
}

void DistTrainer::Impl::start_routing(RoutingStats& r) const {
  r = RoutingStats{};
  const nn::Shard whole = nn::Shard::whole(run.model);
  if (!run.model.is_moe()) return;
  for (int64_t l = 0; l < run.model.layers + run.model.mtp_layers; ++l)  // the MTP layers' routers too
    if (whole.moe_layer(l)) r.layers.push_back(l);
  r.tokens_per_expert.assign(r.layers.size(), std::vector<int64_t>(size_t(run.model.experts), 0));
  r.dropped.assign(r.layers.size(), 0);
  r.dropped_ids.assign(r.layers.size(), 0);
  r.closest_tie.assign(r.layers.size(), std::numeric_limits<double>::infinity());
}

// Micro-batch mb of this replica holds sequences dp_rank B/dp + mb b onward (cp 1: whole ones),
// so its token t is token (first sequence) T + t of the global batch (under cp: its position).
void DistTrainer::Impl::count_routing(RoutingStats& r, const Chunk& ch, nn::Activations& acts, int64_t mb) const {
  if (r.empty() || groups.coords.tp() != 0) return;  // tp ranks route the same tokens
  const nn::Shard& s = ch.stage->shard();
  const int64_t first_token = (dp_rank * (B / dp) + mb * b) * T;
  for (int64_t i = 0; i < s.num_layers() + s.mtp_count(); ++i) {
    const nn::MoeRouting* route = acts.routing(i);
    if (!route) continue;
    const size_t at = size_t(std::find(r.layers.begin(), r.layers.end(), s.first_layer + i) - r.layers.begin());
    for (int64_t e = 0; e < route->E; ++e) r.tokens_per_expert[at][size_t(e)] += route->routed[size_t(e)];
    r.dropped[at] += route->dropped;
    if (route->k < route->E) {  // the gap between each token's last chosen score and the best one left out
      std::vector<float> row(size_t(route->E));
      for (int64_t t = 0; t < route->N; ++t) {
        std::copy_n(route->probs.begin() + t * route->E, route->E, row.begin());
        for (size_t e = 0; e < route->bias.size(); ++e) row[e] += route->bias[e];  // chosen on score + bias
        std::nth_element(row.begin(), row.begin() + route->k, row.end(), std::greater<float>());
        const float left_out = row[size_t(route->k)];
        const float last_chosen = *std::min_element(row.begin(), row.begin() + route->k);
        r.closest_tie[at] = std::min(r.closest_tie[at], double(last_chosen) - double(left_out));
      }
    }
    // An assignment's identity: its token in the global batch (under cp local row j of a
    // sequence is its position context.position(j)) and its place j among the token's k.
    const int64_t k = route->k, local = context.local();
    for (int64_t a = 0; a < int64_t(route->pos.size()); ++a) {
      if (route->pos[size_t(a)] != nn::kDropped) continue;
      const int64_t t = a / k, token = first_token + (t / local) * T + context.position(t % local);
      r.dropped_ids[at] += int64_t(nn::mix64(uint64_t(token * k + a % k)) >> 32);
    }
  }
}

void DistTrainer::Impl::count_ep_rows(const Chunk& ch, nn::Activations& acts) {
  if (!ep) return;
  for (int64_t i = 0; i < ch.stage->shard().num_layers() + ch.stage->shard().mtp_count(); ++i)
    if (const nn::MoeRouting* route = acts.routing(i)) {
      double rows = 0;
      for (size_t n : route->recv_rows) rows += double(n);
      ep_rows.push_back(rows);
    }
}

// Every ep rank makes the same dispatches in the same order (the same schedule over the same
// layers): dispatch i's rows, gathered over the group, give its most loaded rank and the mean.
// Called at ep > 1 only (every rank of the world has an EP group then).
void DistTrainer::Impl::ep_load_imbalance(RoutingStats& r) {
  comm::Communicator& e = *groups.ep;
  const std::vector<double> all = all_gather_same_calls(*k, e, ep_rows, "dispatches");
  std::vector<double> sums = {0, 0};  // most loaded, mean
  const size_t n = ep_rows.size();
  for (size_t i = 0; i < n; ++i) {
    double most = 0, total = 0;
    for (int q = 0; q < e.size(); ++q) most = std::max(most, all[size_t(q) * n + i]), total += all[size_t(q) * n + i];
    sums[0] += most, sums[1] += total / e.size();
  }
  ep_rows.clear();
  all_reduce_f64(*groups.world, sums.data(), sums.size(), comm::ReduceOp::Sum);
  r.ep_load_imbalance = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
}

void DistTrainer::Impl::sum_routing(RoutingStats& r) const {
  if (r.empty()) return;
  std::vector<int64_t> all;
  for (const auto& row : r.tokens_per_expert) all.insert(all.end(), row.begin(), row.end());
  all.insert(all.end(), r.dropped.begin(), r.dropped.end());
  all.insert(all.end(), r.dropped_ids.begin(), r.dropped_ids.end());
  groups.world->all_reduce(all.data(), all.size(), comm::DType::I64, comm::ReduceOp::Sum);
  size_t at = 0;
  for (auto& row : r.tokens_per_expert)
    for (auto& x : row) x = all[at++];
  for (auto& x : r.dropped) x = all[at++];
  for (auto& x : r.dropped_ids) x = all[at++];
  all_reduce_f64(*groups.world, r.closest_tie.data(), r.closest_tie.size(), comm::ReduceOp::Min);
}

void DistTrainer::Impl::wait_weights(int64_t c, int64_t begin, int64_t end) {
  Chunk& ch = chunks[size_t(c)];
  for (const auto& r : ch.sync->wait_params(ch.stage->params(), begin, end)) ch.stage->params_updated(r.begin, r.end);
}

void DistTrainer::Impl::complete_weights() {
  for (int64_t c = 0; c < int64_t(chunks.size()); ++c) wait_weights(c, 0, chunks[size_t(c)].stage->layout().total());
}

// ZeRO-1 starts a bucket's reduce-scatter as soon as backward finishes it; the tied embedding's
// two copies are summed after the program, on whole gradients, so their buckets wait for finish().
void DistTrainer::Impl::hold_tied_embedding() {
  if (!nn::embedding_copies(run.model) || run.exec.zero != 1) return;
  auto hold = [&](Chunk& ch, bool input) {
    const auto& L = ch.stage->layout();
    const int64_t off = input ? L.wte : L.head_wte;
    ch.sync->hold_until_finish(off, off + L.shard().vocab_local() * C());
  };
  if (groups.embedding) hold(stage == 0 ? chunks.front() : chunks.back(), stage == 0);
  else if (v > 1) hold(chunks.front(), true), hold(chunks.back(), false);
}

// The tied embedding's gradient summed between the first and the last stage.
void DistTrainer::Impl::sum_tied_embedding() {
  Impl& I = *this;
  ProcessGroups& g = I.groups;
  if (!nn::embedding_copies(I.run.model)) return;  // Llama without MTP: no copy (the head is its own tensor)
  Chunk& first = I.chunks.front();
  Chunk& last = I.chunks.back();
  if (g.embedding) {
    Chunk& mine = I.stage == 0 ? first : last;
    const auto& L = mine.stage->layout();
    const int64_t off = I.stage == 0 ? L.wte : L.head_wte;
    const nn::TensorView* view = L.find("wte");
    const int64_t n = view ? view->size() : L.shard().vocab_local() * I.C();
    g.embedding->all_reduce(mine.sync->grads_at(mine.stage->grads(), off), n, comm::DType::F32, comm::ReduceOp::Sum);
  } else if (I.v > 1) {  // pp == 1, interleaved: both copies on this rank
    const auto& L0 = first.stage->layout();
    const auto& L1 = last.stage->layout();
    const int64_t n = L0.shard().vocab_local() * I.C();
    float* a = first.sync->grads_at(first.stage->grads(), L0.wte);
    float* b = last.sync->grads_at(last.stage->grads(), L1.head_wte);
    I.k->add_inplace(kernels::Tensor(a, size_t(n)), kernels::Tensor(b, size_t(n)));
    I.k->copy(b, a, size_t(n));
  }
}

// Global gradient norm: every logical parameter counted once — tensors TP replicates on
// their primary tp rank only (rank 0 for norms; the first of each kv-head group for Llama's
// replicated kv_w), DP and CP replicas once (rank 0 of dp x cp, or each ZeRO-1 owner its slice;
// experts rank 0 of EDP), and the
// last stage's copy of the tied embedding not at all. Then AdamW on the pieces this rank owns,
// with the norm's clipping; returns the norm.
double DistTrainer::Impl::clip_and_update(int64_t step, bool sharded, double& norm_wait_s) {
  Impl& I = *this;
  ProcessGroups& g = I.groups;
  double sq = 0;
  for (auto& ch : I.chunks) {
    const auto& L = ch.stage->layout();
    // Unsharded, the first rank of each replica group counts: of dp x cp for dense tensors, of
    // EDP for the experts' (each EP rank's experts once).
    const bool dense_counts = sharded || g.dense_grads().rank() == 0, experts_count = sharded || g.expert_grads().rank() == 0;
    if (!dense_counts && !experts_count) continue;
    for (const ShardPiece& p : ch.sync->pieces()) {
      const float* grads = ch.sync->piece_grads(ch.stage->grads(), p);  // the piece's first element
      for (const auto& view : L.tensors()) {
        if (!view.primary(L.shard()) || !(view.expert ? experts_count : dense_counts)) continue;
        if (view.offset == L.head_wte && L.head_wte != L.wte) continue;
        const int64_t lo = std::max(view.offset, p.begin), hi = std::min(view.offset + view.size(), p.end);
        if (hi > lo) sq += I.k->sum_squares(grads + (lo - p.begin), size_t(hi - lo));
      }
    }
  }
  const auto t_wait = clock_type::now();
  all_reduce_f64(*g.world, &sq, 1, comm::ReduceOp::Sum);
  norm_wait_s = since(t_wait);
  const double grad_norm = std::sqrt(sq);
  const double lr = engine::learning_rate(I.opt.adamw, step);
  const double scale = engine::clip_scale(I.opt.adamw, grad_norm);
  for (auto& ch : I.chunks) {
    const auto& pieces = ch.sync->pieces();
    for (size_t j = 0; j < pieces.size(); ++j) {
      const ShardPiece& p = pieces[j];
      engine::adamw_update(*I.k, ch.segments[j], ch.sync->piece_params(ch.stage->params(), p),
                           ch.sync->piece_grads(ch.stage->grads(), p), ch.m.p + p.shard, ch.v.p + p.shard, I.opt.adamw,
                           lr, scale, step + 1);
    }
  }
  return grad_norm;
}

double DistTrainer::step(int64_t step) {
  Impl& I = *impl_;
  ProcessGroups& g = I.groups;
  PhaseTimes t;
  const auto t_step = clock_type::now();
  g.context->step = step;
  I.tp->reset();
  if (I.ep) I.ep->reset();
  if (I.etp) I.etp->reset();

  double gather_wait0 = 0;  // ZeRO-1 and 3: seconds blocked on weight gathers before this step
  for (auto& ch : I.chunks) {
    ch.stage->zero_grads();
    ch.sync->start_step();
    gather_wait0 += ch.sync->param_wait_s();
    if (ch.sync->units()) gather_wait0 += ch.sync->units()->gather_wait_s();
  }
  // This replica's share of the global batch: sequences [dp_rank*B/dp + j*b, +b) for micro-batch j.
  for (int64_t j = 0; j < I.m; ++j)
    I.fetch(I.data, step, I.dp_rank * (I.B / I.dp) + j * I.b, I.tokens[j].data(), I.targets[j].data());

  I.routing = &routing_;
  I.start_routing(routing_);
  I.mtp_sums.assign(size_t(I.run.model.mtp_layers), 0.0);
  const double loss_sum = I.run_program(t, pp_message_s_);
  I.sum_routing(routing_);
  // The expert bias moves with this step's load, counted over every rank: the same everywhere.
  for (size_t i = 0; i < expert_bias_.size(); ++i)
    nn::update_expert_bias(expert_bias_[i].data(), routing_.tokens_per_expert[i], I.opt.moe.bias_update_rate);

  cp_blocks_ = 0;
  for (auto& ch : I.chunks)
    if (nn::RingAttention* r = ch.stage->ring()) t.cp_attention += r->attention_seconds(), cp_blocks_ += r->blocks_sent();
  {
    auto t0 = clock_type::now();
    for (auto& r : I.pending_sends) r->wait();
    I.pending_sends.clear();
    t.pp += since(t0);
  }

  // Gradient reductions left after the program: DP (plain: wait for the buckets; ZeRO-1: start
  // the held buckets' reduce-scatters and wait for all) and the tied embedding between the first
  // and last stage. With ZeRO-1 the embedding sum comes first, on the whole gradients its held
  // buckets still keep.
  auto t_dp = clock_type::now();
  const bool sharded = I.chunks.front().sync->sharded();
  if (sharded) I.sum_tied_embedding();
  for (auto& ch : I.chunks) ch.sync->finish(ch.stage->grads());
  if (!sharded) I.sum_tied_embedding();
  t.dp_exposed += since(t_dp);

  // Global gradient norm, clipping and AdamW.
  auto t_opt = clock_type::now();
  double norm_wait = 0;
  grad_norm_ = I.clip_and_update(step, sharded, norm_wait);
  t.optimizer = since(t_opt) - norm_wait;
  t.compute += t.optimizer;
  t.norm_wait = norm_wait;
  t.bubble += norm_wait;
  // ZeRO-1's and 3's gathers the forward and backward passes waited for (ZeRO-1's started at
  // the end of the step before): exposed DP time, not compute.
  double gather_wait = -gather_wait0;
  for (auto& ch : I.chunks) {
    gather_wait += ch.sync->param_wait_s();
    if (ch.sync->units()) gather_wait += ch.sync->units()->gather_wait_s();
  }
  t.compute -= gather_wait;
  t.dp_exposed += gather_wait;
  t.zero_gather += gather_wait;
  if (sharded) {
    // ZeRO-1: the updated slices' all-gathers start now and complete bucket by bucket as the
    // next forward reaches them (ZeRO-2's are whole here; ZeRO-3 gathers each unit on use).
    auto t0 = clock_type::now();
    for (auto& ch : I.chunks) {
      if (ch.sync->stage() == 1) ch.sync->start_param_gather(ch.stage->params());
      else ch.sync->all_gather_params(ch.stage->params());
    }
    t.dp_exposed += since(t0);
    t.zero_gather += since(t0);
  }
  // The bf16 compute copy (no-op in fp32); ZeRO-1 refreshes each bucket's as its gather completes.
  for (auto& ch : I.chunks)
    if (!ch.sync->gathering_params()) ch.stage->params_updated();

  // Mean loss over the global batch: the last stage's tp rank 0 of each replica contributes.
  const bool reporter = I.chunks.back().stage->shard().has_output && g.coords.tp() == 0;
  std::vector<double> losses{reporter ? loss_sum : 0.0};  // the main loss, then each MTP depth's
  for (double x : I.mtp_sums) losses.push_back(reporter ? x : 0.0);
  all_reduce_f64(*g.world, losses.data(), losses.size(), comm::ReduceOp::Sum);
  const double loss = losses[0];
  mtp_losses_.clear();  // each depth's mean over the rows with a target: B (T - k)
  for (size_t k = 1; k < losses.size(); ++k) mtp_losses_.push_back(losses[k] / double(I.B * (I.T - int64_t(k))));
  t.total = since(t_step);
  if (I.ep) {  // untimed: the exchange of the all-to-alls' spans and of the dispatches' rows
    t.ep_wait = I.ep_wait_seconds();
    t.ep -= t.ep_wait;
    I.ep_load_imbalance(routing_);
  }
  times_ = t;
  return loss / double(I.B * I.T);
}

}  // namespace trident::parallel
