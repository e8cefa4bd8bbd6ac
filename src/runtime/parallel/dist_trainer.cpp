// DistTrainer's set-up (groups, split, chunks, ZeRO), its state for checkpoints, evaluation and
// memory; a step is dist_trainer_step.cpp.
#include "runtime/parallel/dist_trainer.h"

#include "runtime/parallel/dist_trainer_impl.h"

namespace trident::parallel {

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

}  // namespace trident::parallel
