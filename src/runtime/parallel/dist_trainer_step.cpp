// One step of DistTrainer: the stage's program (forward, backward, pipeline sends and receives),
// the pipeline message and EP clock measurements, the weights' gathers, the tied embedding, clipping
// and the optimizer.
#include "runtime/parallel/dist_trainer.h"

#include "runtime/parallel/dist_trainer_impl.h"

namespace trident::parallel {

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

namespace trainer_detail {

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

std::vector<double> all_gather_same_calls(kernels::Kernels& k, comm::Communicator& g, const std::vector<double>& mine,
                                          const char* what) {
  const std::vector<double> counts = all_gather_doubles(k, g, {double(mine.size())});
  if (*std::min_element(counts.begin(), counts.end()) != *std::max_element(counts.begin(), counts.end()))
    throw std::logic_error(std::string("EP ranks made different numbers of ") + what + " in a step");
  return all_gather_doubles(k, g, mine);
}

}  // namespace trainer_detail


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
