// Memory terms under FP8 GEMMs that Megatron-Core with Transformer Engine holds in their quantised
// form alone, or without quantised copies, worked by hand.
#include <gtest/gtest.h>

#include "plan/memory_model.h"

using namespace trident;
using namespace trident::plan;

TEST(Fp8MemoryTerms, routed_experts_keep_their_fc1_input_as_the_quantised_rows_alone) {
  // Mixtral's shape (h 4096, experts of 14336), s 4096, tp 1, FP8 (1-byte copies): each routed
  // copy of a token keeps FC1's output (2 x 14336 at 2 B), FC2's input (14336 at 1 B) and FC1's
  // input (4096 at 1 B: TE's GroupedLinear saves the FP8 rows, the 16-bit ones are freed).
  ModelSpec m = model_preset("mixtral-8x7b");
  m.seq_len = 4096;
  ExecutionSpec e;
  e.attention = AttentionKind::Flash;
  e.precision = Precision::FP8;
  m.experts_per_token = 2;
  const LayerActivations two = layer_activations(m, e, 1);
  m.experts_per_token = 4;
  const LayerActivations four = layer_activations(m, e, 1);
  const double s = 4096, fe = 14336, h = 4096;
  EXPECT_DOUBLE_EQ(four.bytes - two.bytes, 2 * s * (4 * fe + fe + h));
  EXPECT_DOUBLE_EQ(four.fp8_copy_bytes - two.fp8_copy_bytes, 2 * s * (fe + h));
}

TEST(Fp8MemoryTerms, embedding_and_output_layer_weights_have_no_quantised_copies) {
  // Llama 3 8B on pp 2 under MXFP8: the layers' weights are 2 B + two 1.03125 B copies, the
  // embedding (first stage) and the output layer (last) 128256 x 4096 at 2 B.
  const ModelSpec m = model_preset("llama3-8b");
  ExecutionSpec e;
  e.precision = Precision::MXFP8;
  e.global_batch_size = 2;
  MemoryInputs in;
  in.pp = 2;
  const auto stages = stage_memory(m, e, in);
  const double vocab = 128256.0 * 4096;
  for (const StageMemory& st : stages) {
    EXPECT_DOUBLE_EQ(st.weights_bytes, (st.params.dense() - vocab) * 4.0625 + vocab * 2) << st.stage;
    EXPECT_DOUBLE_EQ(st.plain_weight_params, vocab) << st.stage;
  }
  e.precision = Precision::BF16;  // 16-bit GEMMs: every weight 2 B
  const auto bf16 = stage_memory(m, e, in);
  EXPECT_DOUBLE_EQ(bf16[0].weights_bytes, bf16[0].params.dense() * 2);
  EXPECT_EQ(bf16[0].plain_weight_params, 0);
}
