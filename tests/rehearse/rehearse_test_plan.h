// The plan the rehearsal unit tests start from (shared by rehearse_unit_test and rehearse_fit_unit_test).
#pragma once

#include "core/model_spec.h"
#include "core/run_spec.h"

namespace trident::rehearse {

// The GPT-3 175B plan `trident plan` picks on 512 DGX A100 nodes (examples/plan-gpt3-175b-512-dgx-a100.toml).
inline RunSpec gpt3_plan() {
  RunSpec r;
  r.model = model_preset("gpt3-175b");
  r.cluster = cluster_preset("dgx-a100-80g");
  r.cluster.nodes = 512;
  r.layout.tp = 8, r.layout.pp = 8, r.layout.dp = 64, r.layout.order = "tp-dp-pp";
  r.exec.micro_batch_size = 3, r.exec.global_batch_size = 1536;
  r.exec.schedule = ScheduleKind::Interleaved, r.exec.virtual_stages = 12;
  r.exec.precision = Precision::BF16, r.exec.attention = AttentionKind::Flash, r.exec.grad_bits = 16;
  r.exec.overlap = Overlap{true, true, true};
  r.exec.sequence_parallel = true, r.exec.zero = 1;
  return r;
}

// The Llama 3 70B plan `trident plan --model llama3-70b --cluster dgx-h100 --nodes 64
// --global-batch-size 1024` picks: tp 4 and cp 2 fill a node, dp 32 and pp 2 cross nodes.
inline RunSpec llama70b_plan() {
  RunSpec r;
  r.model = model_preset("llama3-70b");
  r.cluster = cluster_preset("dgx-h100");
  r.cluster.nodes = 64;
  r.layout.tp = 4, r.layout.cp = 2, r.layout.pp = 2, r.layout.dp = 32, r.layout.order = "tp-cp-ep-dp-pp";
  r.exec.micro_batch_size = 1, r.exec.global_batch_size = 1024;
  r.exec.schedule = ScheduleKind::Interleaved, r.exec.virtual_stages = 10;
  r.exec.precision = Precision::BF16, r.exec.attention = AttentionKind::Flash, r.exec.grad_bits = 16;
  r.exec.overlap = Overlap{true, true, true};
  r.exec.sequence_parallel = true, r.exec.zero = 1;
  return r;
}

}  // namespace trident::rehearse
