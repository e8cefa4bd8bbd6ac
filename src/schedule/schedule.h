// Pipeline schedules as data: for p stages, m micro-batches and v model chunks per stage, one
// ordered list of actions per stage. The simulator plays these lists; the runtime executes them.
//
// Model chunks. With v chunks per stage the model is cut into p*v consecutive pieces
// ("virtual stages"). Stage s, local chunk c holds virtual stage c*p + s (Megatron's
// interleaving): chunk 0 of stage 0 has the first layers, chunk 0 of stage p-1 feeds chunk 1
// of stage 0, ... With v = 1 the chunk id is always 0.
//
// Actions. Compute actions name (micro_batch, chunk):
//   Forward         forward pass of that micro-batch through that chunk;
//   Backward        full backward (input gradient and weight gradient together);
//   BackwardInput   input-gradient half of the backward (zero-bubble schedules) - it produces
//                   the gradient sent upstream;
//   BackwardWeight  weight-gradient half; always after its BackwardInput on the same stage.
// Communication actions carry the other side: `peer` is its pipeline stage, `peer_chunk` its
// local chunk. `chunk` is always the local chunk that produces (send) or consumes (recv) the data:
//   SendActivation  after Forward(mb, chunk): output activation to the next virtual stage;
//   RecvActivation  before Forward(mb, chunk): input activation from the previous virtual stage;
//   SendGradient    after Backward/BackwardInput(mb, chunk): input gradient to the previous one;
//   RecvGradient    before Backward/BackwardInput(mb, chunk): output gradient from the next one.
//
// Communication semantics (what the executor must implement, what validate_schedule checks):
//   - A Send never blocks the program: post it (MPI_Isend / ncclSend on a comm stream) and go
//     on; keep the buffer alive until it completes; complete every send before the step ends.
//   - A Recv blocks until its message has arrived (a receive may be posted earlier, e.g.
//     MPI_Irecv, but the action waits for it at its place in the list).
//   - Messages match by (source stage, message_tag(...)); in addition, on each directed pair of
//     stages and each direction of data (activation / gradient) the sends and the receives come
//     in the same order, so FIFO matching with one tag per kind is also correct.
//   Under these rules every schedule built here runs to completion (no deadlock): validate_schedule
//   proves it by playing the lists. Paired send/recv in one call (Megatron's
//   send_forward_recv_backward) is a valid optimisation of consecutive Send+Recv actions only
//   if the executor posts both before waiting on either.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/execution_spec.h"
#include "core/problems.h"

namespace trident {

enum class ActionKind : uint8_t {
  Forward,
  Backward,
  BackwardInput,
  BackwardWeight,
  SendActivation,
  RecvActivation,
  SendGradient,
  RecvGradient,
};

std::string to_string(ActionKind kind);  // "F", "B", "BI", "W", "send-act", "recv-act", ...
bool is_compute(ActionKind kind);
bool is_send(ActionKind kind);
bool is_recv(ActionKind kind);

struct Action {
  ActionKind kind = ActionKind::Forward;
  int32_t micro_batch = 0;
  int32_t chunk = 0;       // local model chunk on this stage, 0..v-1
  int32_t peer = -1;       // Send/Recv: pipeline stage of the other side; -1 for compute
  int32_t peer_chunk = -1; // Send/Recv: local chunk on the other side; -1 for compute
  bool operator==(const Action&) const = default;
};

std::string to_string(const Action& action);  // "F3.1" (micro-batch 3, chunk 1), "send-act3.1->2"

struct PipelineSchedule {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int64_t stages = 1;          // p
  int64_t micro_batches = 1;   // m
  int64_t virtual_stages = 1;  // v: model chunks per stage
  std::vector<std::vector<Action>> programs;  // programs[stage] = ordered actions
};

// Virtual stage (0..p*v-1) held by local chunk `chunk` of `stage`.
inline int64_t virtual_stage(int64_t stage, int64_t chunk, int64_t stages) { return chunk * stages + stage; }

// A tag both sides compute the same way: unique per (direction, micro-batch, receiving virtual
// stage) within a step. Fits in 31 bits for m*p*v < 2^30.
int32_t message_tag(const Action& action, int64_t stage, int64_t stages, int64_t virtual_stages);

// Checks that `kind` can run with p stages, m micro-batches and v chunks; every problem names
// the values, the reason and the nearest valid settings (codes "schedule-*").
void check_schedule_shape(ScheduleKind kind, int64_t stages, int64_t micro_batches, int64_t virtual_stages,
                          Problems& problems);

// Builds the per-stage action lists. Throws InputError (via check_schedule_shape) when the
// schedule cannot run for these sizes.
//   GPipe        all forwards, then all backwards (micro-batch order).
//   1F1B         stage s: min(p-s-1, m) warm-up forwards, then one forward / one backward
//                alternating, then the remaining backwards (PipeDream-Flush / Megatron).
//   Interleaved  Megatron's interleaved 1F1B: m*v virtual micro-batches, warm-up
//                (p-s-1)*2 + (v-1)*p, forward chunk of virtual micro-batch k is (k mod pv) div p,
//                backward chunk v-1 minus that; needs v >= 2 and m a multiple of p.
//   ZB-H1        1F1B's order with the backward split into BackwardInput and BackwardWeight;
//                stage s runs each weight-gradient pass s backwards after its input-gradient
//                pass (the rest at the end), so input gradients travel down the pipeline
//                unhindered and the postponed weight work fills the drain where 1F1B idles.
//                With F = B = W the step's bubble is (p-1)F, a third of 1F1B's
//                (Qi et al., ICLR'24, "ZB-H1").
PipelineSchedule build_schedule(ScheduleKind kind, int64_t stages, int64_t micro_batches, int64_t virtual_stages);

// Every rule the executor relies on; returns one line per violation (empty = valid):
// each (micro-batch, chunk) forwarded exactly once and backwarded exactly once (or split into
// BackwardInput then BackwardWeight) on every stage, forward before backward; each non-first
// virtual stage receives its input before its forward, each non-last sends its output after;
// the same for gradients in reverse; every send has its matching receive with the same order
// on each channel; and playing the lists with non-blocking sends and blocking receives finishes
// (no deadlock).
std::vector<std::string> validate_schedule(const PipelineSchedule& schedule);

}  // namespace trident

namespace trident {

// The lists as text, one line per stage ("stage 0: F0 F1 F2 B0 F3 B1 ..."); with compute_only the
// sends and receives are left out. Chunk ids are shown as "F3.1" when v > 1.
std::string format_schedule(const PipelineSchedule& schedule, bool compute_only = true);

// Most micro-batch chunks whose forward has run and whose backward (input gradient for ZB) has
// not, at any point of the stage's list: what its activation memory must hold.
int64_t peak_in_flight(const PipelineSchedule& schedule, int64_t stage);

}  // namespace trident
