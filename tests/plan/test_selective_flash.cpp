// Selective recomputation under flash attention: Megatron-Core checkpoints the core attention,
// so each layer runs one more fused attention forward before its backward.
#include <gtest/gtest.h>

#include "plan/estimate.h"

using namespace trident;
using namespace trident::plan;

namespace {

RunSpec gpt_at_tp8(bool recompute_flash) {
  RunSpec run;
  run.model = {"gpt-22b", ModelFamily::GPT, 48, 6144, 64, 64, 4 * 6144, 2048, 51200};
  run.cluster = cluster_preset("dgx-a100-80g");
  run.cluster.nodes = 1;
  run.layout = Layout{8, 1, 1, 1, "tp-dp-pp"};
  run.exec.global_batch_size = 4;
  run.exec.micro_batch_size = 4;
  run.exec.attention = AttentionKind::Flash;
  run.exec.recompute = Recompute::Selective;
  run.exec.sequence_parallel = true;
  run.exec.recompute_flash_attention = recompute_flash;
  return run;
}

}  // namespace

TEST(SelectiveFlash, megatron_reruns_the_fused_attention_forward_once_per_layer) {
  const Estimate off = estimate(gpt_at_tp8(false), 0), on = estimate(gpt_at_tp8(true), 0);
  const RunSpec r = gpt_at_tp8(true);
  const LayerCompute lc = layer_compute(r.model, r.exec, 8, r.cluster.gpu, on.cost);
  EXPECT_EQ(off.stages[0].recompute_s, 0);
  // 48 layers x (one fused forward + its one kernel call).
  EXPECT_NEAR(on.stages[0].recompute_s, 48 * (lc.attention_s + lc.kernel_call_s), 1e-12);
  EXPECT_EQ(lc.kernels.recompute.total(), 1);
  EXPECT_NEAR(on.time.compute - off.time.compute, on.stages[0].recompute_s, 1e-9);  // one micro-batch
  // Executed FLOPs count the rerun (the attention products, as model FLOPs count them); MFU does not.
  EXPECT_NEAR(on.stages[0].executed_flops - off.stages[0].executed_flops, 48 * lc.attention_flops, 1);
  EXPECT_EQ(on.stages[0].model_flops, off.stages[0].model_flops);
}

TEST(SelectiveFlash, the_megatron_core_stack_sets_it_and_the_others_do_not) {
  for (const auto& s : stack_presets()) {
    ExecutionSpec e;
    apply_stack(s, e);
    EXPECT_EQ(e.recompute_flash_attention, s.name == "megatron-core-te") << s.name;
  }
}
