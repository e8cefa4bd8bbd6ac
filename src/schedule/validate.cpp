// validate_schedule: the rules an executor relies on, checked by reading and by playing the lists.
#include <fmt/format.h>

#include <map>
#include <set>
#include <tuple>

#include "schedule/schedule.h"

namespace trident {
namespace {

struct Slots {  // positions of one (micro-batch, chunk)'s actions in a stage's program; -1 = absent
  int64_t f = -1, b = -1, bi = -1, w = -1, recv_act = -1, send_act = -1, recv_grad = -1, send_grad = -1;
};

// Sets slot to pos, or reports a duplicate.
void place(int64_t& slot, int64_t pos, const std::string& what, std::vector<std::string>& errors) {
  if (slot >= 0) errors.push_back(what + " appears twice");
  slot = pos;
}

}  // namespace

std::vector<std::string> validate_schedule(const PipelineSchedule& sc) {
  std::vector<std::string> errors;
  const int64_t p = sc.stages, m = sc.micro_batches, v = sc.virtual_stages;
  if (static_cast<int64_t>(sc.programs.size()) != p) {
    errors.push_back(fmt::format("{} programs for {} stages", sc.programs.size(), p));
    return errors;
  }
  // Channel (src, dst, is_activation) -> ordered (micro-batch, receiving virtual stage).
  using Channel = std::tuple<int64_t, int64_t, bool>;
  std::map<Channel, std::vector<std::pair<int64_t, int64_t>>> sent, received;

  for (int64_t s = 0; s < p; ++s) {
    std::vector<Slots> slots(m * v);
    const auto& prog = sc.programs[s];
    for (int64_t i = 0; i < static_cast<int64_t>(prog.size()); ++i) {
      const Action& a = prog[i];
      const std::string where = fmt::format("stage {} action {} ({})", s, i, to_string(a));
      if (a.micro_batch < 0 || a.micro_batch >= m || a.chunk < 0 || a.chunk >= v) {
        errors.push_back(where + ": micro-batch or chunk out of range");
        continue;
      }
      Slots& sl = slots[a.micro_batch * v + a.chunk];
      const int64_t vs = virtual_stage(s, a.chunk, p);
      if (!is_compute(a.kind)) {
        const bool act = a.kind == ActionKind::SendActivation || a.kind == ActionKind::RecvActivation;
        // Data flows to vs+1 for activations, to vs-1 for gradients.
        const int64_t expect = (is_send(a.kind) == act) ? vs + 1 : vs - 1;
        if (expect < 0 || expect >= p * v || a.peer != expect % p || a.peer_chunk != expect / p) {
          errors.push_back(where + fmt::format(": peer should be virtual stage {}", expect));
          continue;
        }
        const Channel ch = is_send(a.kind) ? Channel{s, a.peer, act} : Channel{a.peer, s, act};
        const int64_t receiver_vs = is_send(a.kind) ? expect : vs;
        (is_send(a.kind) ? sent : received)[ch].push_back({a.micro_batch, receiver_vs});
      }
      switch (a.kind) {
        case ActionKind::Forward: place(sl.f, i, where, errors); break;
        case ActionKind::Backward: place(sl.b, i, where, errors); break;
        case ActionKind::BackwardInput: place(sl.bi, i, where, errors); break;
        case ActionKind::BackwardWeight: place(sl.w, i, where, errors); break;
        case ActionKind::SendActivation: place(sl.send_act, i, where, errors); break;
        case ActionKind::RecvActivation: place(sl.recv_act, i, where, errors); break;
        case ActionKind::SendGradient: place(sl.send_grad, i, where, errors); break;
        case ActionKind::RecvGradient: place(sl.recv_grad, i, where, errors); break;
      }
    }
    for (int64_t mb = 0; mb < m; ++mb)
      for (int64_t c = 0; c < v; ++c) {
        const Slots& sl = slots[mb * v + c];
        const std::string who = fmt::format("stage {} micro-batch {} chunk {}", s, mb, c);
        const int64_t vs = virtual_stage(s, c, p);
        const bool first = vs == 0, last = vs == p * v - 1;
        if (sl.f < 0) errors.push_back(who + ": no forward");
        const bool full = sl.b >= 0, split = sl.bi >= 0 || sl.w >= 0;
        if (full == split) errors.push_back(who + ": needs exactly one Backward or one BackwardInput + BackwardWeight");
        if (split && (sl.bi < 0 || sl.w < 0)) errors.push_back(who + ": BackwardInput and BackwardWeight must both appear");
        const int64_t bpos = full ? sl.b : sl.bi;
        if (sl.f >= 0 && bpos >= 0 && bpos < sl.f) errors.push_back(who + ": backward before forward");
        if (split && sl.w >= 0 && sl.bi >= 0 && sl.w < sl.bi) errors.push_back(who + ": weight gradient before input gradient");
        if (first != (sl.recv_act < 0)) errors.push_back(who + (first ? ": first virtual stage receives an activation" : ": activation never received"));
        if (last != (sl.send_act < 0)) errors.push_back(who + (last ? ": last virtual stage sends an activation" : ": activation never sent"));
        if (last != (sl.recv_grad < 0)) errors.push_back(who + (last ? ": last virtual stage receives a gradient" : ": gradient never received"));
        if (first != (sl.send_grad < 0)) errors.push_back(who + (first ? ": first virtual stage sends a gradient" : ": gradient never sent"));
        if (sl.recv_act >= 0 && sl.f >= 0 && sl.recv_act > sl.f) errors.push_back(who + ": activation received after forward");
        if (sl.send_act >= 0 && sl.f >= 0 && sl.send_act < sl.f) errors.push_back(who + ": activation sent before forward");
        if (sl.recv_grad >= 0 && bpos >= 0 && sl.recv_grad > bpos) errors.push_back(who + ": gradient received after backward");
        if (sl.send_grad >= 0 && bpos >= 0 && sl.send_grad < bpos) errors.push_back(who + ": gradient sent before backward");
      }
  }
  std::set<Channel> channels;
  for (auto& [ch, _] : sent) channels.insert(ch);
  for (auto& [ch, _] : received) channels.insert(ch);
  for (const Channel& ch : channels)
    if (sent[ch] != received[ch])
      errors.push_back(fmt::format("{} from stage {} to stage {}: sends and receives differ in number or order",
                                   std::get<2>(ch) ? "activations" : "gradients", std::get<0>(ch), std::get<1>(ch)));
  if (!errors.empty()) return errors;

  // Play: sends never block, receives wait for their message. Round-robin until stuck.
  std::set<int32_t> delivered;  // message tags posted so far
  std::vector<size_t> pc(p, 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int64_t s = 0; s < p; ++s) {
      const auto& prog = sc.programs[s];
      while (pc[s] < prog.size()) {
        const Action& a = prog[pc[s]];
        const int32_t tag = message_tag(a, s, p, v);
        if (is_recv(a.kind) && !delivered.count(tag)) break;
        if (is_send(a.kind)) delivered.insert(tag);
        ++pc[s];
        progress = true;
      }
    }
  }
  for (int64_t s = 0; s < p; ++s)
    if (pc[s] < sc.programs[s].size())
      errors.push_back(fmt::format("deadlock: stage {} waits forever at action {} ({})", s, pc[s],
                                   to_string(sc.programs[s][pc[s]])));
  return errors;
}

}  // namespace trident
