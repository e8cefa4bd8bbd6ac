#include "schedule/schedule.h"

#include <fmt/format.h>

#include <algorithm>

namespace trident {

std::string to_string(ActionKind kind) {
  switch (kind) {
    case ActionKind::Forward: return "F";
    case ActionKind::Backward: return "B";
    case ActionKind::BackwardInput: return "BI";
    case ActionKind::BackwardWeight: return "W";
    case ActionKind::SendActivation: return "send-act";
    case ActionKind::RecvActivation: return "recv-act";
    case ActionKind::SendGradient: return "send-grad";
    case ActionKind::RecvGradient: return "recv-grad";
  }
  return "?";
}

bool is_compute(ActionKind k) {
  return k == ActionKind::Forward || k == ActionKind::Backward || k == ActionKind::BackwardInput ||
         k == ActionKind::BackwardWeight;
}
bool is_send(ActionKind k) { return k == ActionKind::SendActivation || k == ActionKind::SendGradient; }
bool is_recv(ActionKind k) { return k == ActionKind::RecvActivation || k == ActionKind::RecvGradient; }

std::string to_string(const Action& a) {
  std::string s = fmt::format("{}{}.{}", to_string(a.kind), a.micro_batch, a.chunk);
  if (is_send(a.kind)) s += fmt::format("->{}.{}", a.peer, a.peer_chunk);
  if (is_recv(a.kind)) s += fmt::format("<-{}.{}", a.peer, a.peer_chunk);
  return s;
}

int32_t message_tag(const Action& a, int64_t stage, int64_t stages, int64_t virtual_stages) {
  // The receiving virtual stage identifies the message together with direction and micro-batch.
  const bool activation = a.kind == ActionKind::SendActivation || a.kind == ActionKind::RecvActivation;
  const int64_t receiver_vs = is_send(a.kind) ? virtual_stage(a.peer, a.peer_chunk, stages)
                                              : virtual_stage(stage, a.chunk, stages);
  const int64_t per_mb = stages * virtual_stages;
  return static_cast<int32_t>(((int64_t(a.micro_batch) * per_mb + receiver_vs) << 1) | (activation ? 0 : 1));
}

namespace {

std::string multiples_near(int64_t m, int64_t p) {
  const int64_t lo = (m / p) * p;
  const int64_t hi = lo + p;
  if (lo >= p && lo != m) return fmt::format("--micro-batches {} or {}", lo, hi);
  return fmt::format("--micro-batches {}", hi);
}

}  // namespace

void check_schedule_shape(ScheduleKind kind, int64_t p, int64_t m, int64_t v, Problems& problems) {
  const std::string name = to_string(kind);
  if (p < 1) problems.add(fmt::format("pipeline stages is {}, must be at least 1", p), "use --pp 1 or more", "schedule-stages");
  if (m < 1)
    problems.add(fmt::format("micro-batches is {}, must be at least 1", m),
                 "raise --global-batch-size or lower --micro-batch-size / --dp", "schedule-micro-batches");
  if (v < 1) problems.add(fmt::format("virtual stages is {}, must be at least 1", v), "use --virtual-stages 1", "schedule-virtual");
  if (p < 1 || m < 1 || v < 1) return;
  if (kind != ScheduleKind::Interleaved) {
    if (v != 1)
      problems.add(fmt::format("schedule {} runs one model chunk per stage, but virtual stages is {}", name, v),
                   "use --virtual-stages 1, or --schedule interleaved", "schedule-virtual");
    return;
  }
  if (p < 2)
    problems.add("interleaved schedule needs at least 2 pipeline stages, pp is 1",
                 "use --schedule 1f1b (or gpipe), or --pp 2 or more", "schedule-interleaved-pp");
  if (v < 2)
    problems.add(fmt::format("interleaved schedule needs 2 or more virtual stages per stage, got {}", v),
                 "use --virtual-stages 2, or --schedule 1f1b", "schedule-interleaved-v");
  if (p >= 2 && m % p != 0)
    problems.add(fmt::format("interleaved schedule needs micro-batches ({}) to be a multiple of pipeline stages ({}): "
                             "Megatron's interleaving sends groups of p micro-batches round the ring of stages",
                             m, p),
                 fmt::format("use {} (global batch = micro-batches x micro-batch size x dp), or --schedule 1f1b",
                             multiples_near(m, p)),
                 "schedule-interleaved-m");
}

namespace {

struct Builder {
  int64_t p, m, v;
  int64_t s;  // this stage
  std::vector<Action>& out;

  bool first_vs(int64_t c) const { return s == 0 && c == 0; }
  bool last_vs(int64_t c) const { return s == p - 1 && c == v - 1; }
  // Neighbouring virtual stages of (s, c).
  std::pair<int32_t, int32_t> next(int64_t c) const {
    return s + 1 < p ? std::pair<int32_t, int32_t>(s + 1, c) : std::pair<int32_t, int32_t>(0, c + 1);
  }
  std::pair<int32_t, int32_t> prev(int64_t c) const {
    return s > 0 ? std::pair<int32_t, int32_t>(s - 1, c) : std::pair<int32_t, int32_t>(p - 1, c - 1);
  }
  void push(ActionKind k, int64_t mb, int64_t c, std::pair<int32_t, int32_t> peer = {-1, -1}) {
    out.push_back({k, static_cast<int32_t>(mb), static_cast<int32_t>(c), peer.first, peer.second});
  }
  void forward(int64_t mb, int64_t c) {
    if (!first_vs(c)) push(ActionKind::RecvActivation, mb, c, prev(c));
    push(ActionKind::Forward, mb, c);
    if (!last_vs(c)) push(ActionKind::SendActivation, mb, c, next(c));
  }
  void backward(int64_t mb, int64_t c, ActionKind kind) {
    if (!last_vs(c)) push(ActionKind::RecvGradient, mb, c, next(c));
    push(kind, mb, c);
    if (!first_vs(c)) push(ActionKind::SendGradient, mb, c, prev(c));
  }
};

// Megatron's mapping of the k-th virtual micro-batch to (micro-batch, chunk).
int64_t vmb_micro_batch(int64_t k, int64_t p, int64_t v) { return (k / (p * v)) * p + k % p; }
int64_t vmb_chunk(int64_t k, int64_t p, int64_t v, bool forward) {
  const int64_t c = (k % (p * v)) / p;
  return forward ? c : v - 1 - c;
}

}  // namespace

PipelineSchedule build_schedule(ScheduleKind kind, int64_t p, int64_t m, int64_t v) {
  Problems problems;
  check_schedule_shape(kind, p, m, v, problems);
  problems.throw_if_any();

  PipelineSchedule sched;
  sched.kind = kind;
  sched.stages = p;
  sched.micro_batches = m;
  sched.virtual_stages = v;
  sched.programs.resize(p);
  for (int64_t s = 0; s < p; ++s) {
    Builder b{p, m, v, s, sched.programs[s]};
    const int64_t total = m * v;
    int64_t warmup = 0;
    switch (kind) {
      case ScheduleKind::GPipe: warmup = m; break;
      case ScheduleKind::OneFOneB:
      case ScheduleKind::ZeroBubbleH1: warmup = std::min(p - s - 1, m); break;
      case ScheduleKind::Interleaved: warmup = std::min((p - s - 1) * 2 + (v - 1) * p, total); break;
    }
    const bool split = kind == ScheduleKind::ZeroBubbleH1;
    const ActionKind bkind = split ? ActionKind::BackwardInput : ActionKind::Backward;
    // ZB-H1: stage s runs its weight-gradient passes `s` backwards late. The input gradients
    // then run down the pipeline without waiting for weight work, and the last stages fill the
    // end of the step (where 1F1B idles) with their postponed weight gradients.
    const int64_t lag = split ? std::min(s, m) : 0;
    int64_t next_w = 0;
    auto backward_at = [&](int64_t k) {
      const int64_t mb = vmb_micro_batch(k, p, v), c = vmb_chunk(k, p, v, false);
      b.backward(mb, c, bkind);
      if (split && k - next_w >= lag) {
        b.push(ActionKind::BackwardWeight, vmb_micro_batch(next_w, p, v), vmb_chunk(next_w, p, v, false));
        ++next_w;
      }
    };
    for (int64_t k = 0; k < warmup; ++k) b.forward(vmb_micro_batch(k, p, v), vmb_chunk(k, p, v, true));
    for (int64_t k = 0; k < total - warmup; ++k) {
      const int64_t f = warmup + k;
      b.forward(vmb_micro_batch(f, p, v), vmb_chunk(f, p, v, true));
      backward_at(k);
    }
    for (int64_t k = total - warmup; k < total; ++k) backward_at(k);
    for (; split && next_w < total; ++next_w)
      b.push(ActionKind::BackwardWeight, vmb_micro_batch(next_w, p, v), vmb_chunk(next_w, p, v, false));
  }
  return sched;
}

}  // namespace trident
