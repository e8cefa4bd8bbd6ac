#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "core/problems.h"

namespace trident::sim {

std::string to_string(SpanKind k) {
  switch (k) {
    case SpanKind::Forward: return "F";
    case SpanKind::Backward: return "B";
    case SpanKind::BackwardInput: return "B";
    case SpanKind::BackwardWeight: return "W";
    case SpanKind::Send: return "send";
    case SpanKind::RecvWait: return "recv";
    case SpanKind::DpReduce: return "dp";
    case SpanKind::EmbeddingSync: return "emb";
    case SpanKind::Optimizer: return "opt";
    case SpanKind::DpGather: return "gather";
  }
  return "?";
}

SimCosts uniform_costs(int64_t stages, int64_t chunks, double forward_s, double backward_s, double p2p_s) {
  SimCosts c;
  c.stages.resize(stages);
  for (auto& st : c.stages) {
    st.chunks.assign(chunks, ChunkCost{forward_s, backward_s, 0.5, 0, 0});
    st.p2p_s = p2p_s;
  }
  return c;
}

namespace {

void check_shape(const PipelineSchedule& sc, const SimCosts& costs) {
  Problems problems;
  if (int64_t(costs.stages.size()) != sc.stages)
    problems.add(fmt::format("costs for {} stages, schedule has {}", costs.stages.size(), sc.stages),
                 "give one StageCost per pipeline stage");
  else
    for (size_t s = 0; s < costs.stages.size(); ++s)
      if (int64_t(costs.stages[s].chunks.size()) != sc.virtual_stages)
        problems.add(fmt::format("stage {} has costs for {} chunks, schedule has {}", s, costs.stages[s].chunks.size(),
                                 sc.virtual_stages),
                     "give one ChunkCost per virtual stage");
  problems.throw_if_any();
}

struct Message {
  double sent_s = -1;     // when the transfer started
  double arrival_s = -1;  // when it is at the receiver
};

// Records a span of a stage when the options ask for spans (and the span is not empty).
struct SpanRecorder {
  bool on;
  std::vector<Span>& spans;
  void operator()(int64_t s, SpanKind k, const Action* a, double t0, double t1, bool dp_stream = false) const {
    if (!on || t1 <= t0) return;
    Span sp;
    sp.stage = s;
    sp.kind = k;
    sp.start_s = t0;
    sp.end_s = t1;
    sp.on_dp_stream = dp_stream;
    if (a) {
      sp.micro_batch = a->micro_batch;
      sp.chunk = a->chunk;
      sp.peer = a->peer;
    }
    spans.push_back(sp);
  }
};

// The start and end of the last weight-producing backward of each (stage, chunk): where its DP
// buckets become ready.
// Per stage and chunk, every weight-gradient window (Backward or BackwardWeight) in order.
using WgradTimes = std::vector<std::vector<std::vector<std::pair<double, double>>>>;

// The pipeline phase: each stage runs its program as far as its receives allow, round after
// round, until every program is done (or none can advance: a deadlock, an InputError).
WgradTimes play_programs(const PipelineSchedule& sc, const SimCosts& costs, const SpanRecorder& span, SimResult& r) {
  const int64_t p = sc.stages, m = sc.micro_batches, v = sc.virtual_stages;
  std::vector<double> clock(p, 0.0);
  std::vector<size_t> pc(p, 0);
  std::vector<Message> messages(size_t(m * p * v * 2));
  std::map<std::tuple<int64_t, int64_t, bool>, double> channel_free;  // (src, dst, activation) -> free at
  WgradTimes last_wgrad(p, std::vector<std::vector<std::pair<double, double>>>(v));

  bool progress = true;
  while (progress) {
    progress = false;
    for (int64_t s = 0; s < p; ++s) {
      const auto& prog = sc.programs[s];
      StageResult& st = r.stages[s];
      const StageCost& cost = costs.stages[s];
      while (pc[s] < prog.size()) {
        const Action& a = prog[pc[s]];
        double& t = clock[s];
        if (is_recv(a.kind)) {
          const Message& msg = messages[message_tag(a, s, p, v)];
          if (msg.arrival_s < 0) break;  // not sent yet: another stage must advance first
          if (msg.arrival_s > t) {
            const double transfer_from = std::max(t, msg.sent_s);
            st.exposed_pp_s += msg.arrival_s - transfer_from;
            span(s, SpanKind::RecvWait, &a, transfer_from, msg.arrival_s);
            t = msg.arrival_s;
          }
        } else if (is_send(a.kind)) {
          const bool act = a.kind == ActionKind::SendActivation;
          // The link between s and its next stage carries both directions at p2p_s each.
          const double p2p = act ? cost.p2p_s : costs.stages[a.peer].p2p_s;
          double& free_at = channel_free[{s, a.peer, act}];
          Message& msg = messages[message_tag(a, s, p, v)];
          msg.sent_s = std::max(t, free_at);
          msg.arrival_s = msg.sent_s + p2p;
          free_at = msg.arrival_s;
          if (costs.blocking_sends) {
            st.exposed_pp_s += msg.arrival_s - t;
            span(s, SpanKind::Send, &a, msg.sent_s, msg.arrival_s);
            t = msg.arrival_s;
          }
        } else {
          const ChunkCost& cc = cost.chunks[a.chunk];
          double d = 0, tp = 0, cpx = 0, epx = 0, dpx = 0, hx = 0;
          SpanKind k = SpanKind::Forward;
          const bool fwd = a.kind == ActionKind::Forward;
          const bool bwd_input = a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput;
          if (fwd || bwd_input) {
            cpx = fwd ? cc.cp_forward_s : cc.cp_backward_s;
            epx = fwd ? cc.ep_forward_s : cc.ep_backward_s;
            dpx = fwd ? cc.dp_forward_s : cc.dp_backward_s;
            hx = fwd ? cc.host_forward_s : cc.host_backward_s;
          }
          // A split backward's host wait goes with each half's compute (weight_share).
          if (a.kind == ActionKind::BackwardInput) hx = cc.host_backward_s * (1 - cc.weight_share);
          if (a.kind == ActionKind::BackwardWeight) hx = cc.host_backward_s * cc.weight_share;
          switch (a.kind) {
            case ActionKind::Forward: d = cc.forward_s; tp = cc.tp_forward_s; k = SpanKind::Forward; break;
            case ActionKind::Backward: d = cc.backward_s; tp = cc.tp_backward_s; k = SpanKind::Backward; break;
            case ActionKind::BackwardInput: d = cc.backward_input_s(); tp = cc.tp_backward_s; k = SpanKind::BackwardInput; break;
            case ActionKind::BackwardWeight: d = cc.backward_weight_s(); k = SpanKind::BackwardWeight; break;
            default: break;
          }
          span(s, k, &a, t, t + d);
          if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardWeight) last_wgrad[s][a.chunk].push_back({t, t + d});
          st.compute_s += d;
          st.exposed_tp_s += tp;
          st.exposed_cp_s += cpx;
          st.exposed_ep_s += epx;
          st.host_wait_s += hx;
          st.exposed_layer_dp_s += dpx;
          t += d;
          st.pipeline_end_s = t;
        }
        ++pc[s];
        progress = true;
      }
    }
  }
  for (int64_t s = 0; s < p; ++s)
    if (pc[s] < sc.programs[s].size())
      throw InputError({{fmt::format("the {} schedule deadlocks: stage {} waits forever at {}", to_string(sc.kind), s,
                                     to_string(sc.programs[s][pc[s]])),
                         "check it with validate_schedule", "schedule-deadlock"}});

  return last_wgrad;
}

// After the pipeline, each stage's DP buckets in the order they became ready (all at the stage's
// pipeline end when it does not overlap DP), one at a time on the DP stream; returns when each
// stage's gradients are reduced. The step-end reduction follows each chunk's last backward, the
// per-micro-batch one (ZeRO-2) every backward of each chunk.
std::vector<double> reduce_gradients(const SimCosts& costs, int64_t v, const WgradTimes& wgrad,
                                     const SpanRecorder& span, SimResult& r) {
  const int64_t p = int64_t(costs.stages.size());
  std::vector<double> grads_done(p);
  for (int64_t s = 0; s < p; ++s) {
    const StageCost& cost = costs.stages[s];
    StageResult& st = r.stages[s];
    double dp_end = st.pipeline_end_s;
    const int64_t per_chunk = std::max<int64_t>(1, cost.dp_buckets / v);
    std::vector<std::pair<double, double>> ready;  // (ready at, seconds)
    auto add_buckets = [&](double reduce_s, std::pair<double, double> window) {
      const double bucket_s = reduce_s / double(per_chunk * v);
      for (int64_t k = 0; k < per_chunk; ++k)
        ready.push_back({cost.dp_overlapped ? window.first + (window.second - window.first) * double(k + 1) / double(per_chunk)
                                            : st.pipeline_end_s,
                         bucket_s});
    };
    for (int64_t c = 0; c < v; ++c) {
      const auto& windows = wgrad[s][size_t(c)];
      if (windows.empty()) continue;
      if (cost.dp_reduce_each_backward_s > 0)
        for (const auto& w : windows) add_buckets(cost.dp_reduce_each_backward_s, w);
      if (cost.dp_reduce_s > 0) add_buckets(cost.dp_reduce_s, windows.back());
    }
    if (cost.dp_reduce_s > 0) st.dp_reductions += 1;
    if (cost.dp_reduce_each_backward_s > 0 && v > 0) {
      size_t windows = 0;
      for (const auto& w : wgrad[s]) windows += w.size();
      st.dp_reductions += int64_t(windows) / v;  // one reduction of the stage's buffer: a piece per chunk
    }
    std::stable_sort(ready.begin(), ready.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    double free_at = 0;
    for (const auto& [t, bucket_s] : ready) {
      const double start = std::max(t, free_at);
      free_at = start + bucket_s;
      st.dp_reduce_played_s += bucket_s;
      span(s, SpanKind::DpReduce, nullptr, start, free_at, true);
    }
    if (!ready.empty()) dp_end = std::max(dp_end, free_at);
    grads_done[s] = dp_end;
  }
  return grads_done;
}

// The tied embedding's sum between the first and last stage, the optimizer, the gathers after
// it, and the step's totals.
void finish_step(const SimCosts& costs, const std::vector<double>& grads_done, const SpanRecorder& span, SimResult& r) {
  const int64_t p = int64_t(costs.stages.size());
  std::vector<double> synced = grads_done;
  if (p > 1 && (costs.stages[0].embedding_sync_s > 0 || costs.stages[p - 1].embedding_sync_s > 0)) {
    const double start = std::max(grads_done[0], grads_done[p - 1]);
    for (int64_t s : {int64_t(0), p - 1}) {
      synced[s] = start + costs.stages[s].embedding_sync_s;
      span(s, SpanKind::EmbeddingSync, nullptr, start, synced[s]);
    }
  }
  for (int64_t s = 0; s < p; ++s) {
    const StageCost& cost = costs.stages[s];
    StageResult& st = r.stages[s];
    st.stage = s;
    const double opt_end = synced[s] + cost.optimizer_s;
    span(s, SpanKind::Optimizer, nullptr, synced[s], opt_end);
    st.end_s = opt_end + cost.dp_after_optimizer_s;
    span(s, SpanKind::DpGather, nullptr, opt_end, st.end_s);
    st.optimizer_s = cost.optimizer_s;
    st.exposed_dp_s = (synced[s] - st.pipeline_end_s) + cost.dp_after_optimizer_s + st.exposed_layer_dp_s;
    if (st.end_s > r.stages[r.critical_stage].end_s) r.critical_stage = s;
  }
  r.step_s = r.stages[r.critical_stage].end_s;
  double bubbles = 0;
  for (auto& st : r.stages) {
    st.busy_s = st.compute_s + st.optimizer_s;
    st.idle_s = r.step_s - st.busy_s;
    st.bubble_s = std::max(0.0, r.pipeline_s - st.compute_s - st.exposed_pp_s);
    bubbles += st.bubble_s;
  }
  r.bubble_share = r.pipeline_s > 0 ? bubbles / (double(p) * r.pipeline_s) : 0;
}

}  // namespace

SimResult simulate(const PipelineSchedule& sc, const SimCosts& costs, const SimOptions& options) {
  check_shape(sc, costs);
  SimResult r;
  r.stages.resize(sc.stages);
  const SpanRecorder span{options.record_spans, r.spans};
  const WgradTimes last_wgrad = play_programs(sc, costs, span, r);
  // Pipeline phase done; now the DP stream, embedding sync, optimizer and gathers.
  r.pipeline_s = 0;
  for (const auto& st : r.stages) r.pipeline_s = std::max(r.pipeline_s, st.pipeline_end_s);
  finish_step(costs, reduce_gradients(costs, sc.virtual_stages, last_wgrad, span, r), span, r);
  return r;
}

}  // namespace trident::sim
