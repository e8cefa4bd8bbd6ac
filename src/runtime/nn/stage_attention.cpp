// The attention core of a GptStage layer (see gpt.h): the kernels' attention, or ring attention
// under context parallel, with the layer's GPT-OSS settings (its sliding window, its sinks).
#include "runtime/nn/gpt.h"

namespace trident::nn {

using kernels::Kernels;

size_t GptStage::attention_state_floats() const {
  return ring_ ? ring_->lse_floats() : k_.attention_probs_size(B_, T_, shard().heads_local());
}

// GPT-OSS: layer i's sliding window (Hugging Face's layer_types; Megatron's window_attn_skip_freq)
// and its sinks (this rank's heads).
Kernels::AttentionMask GptStage::attention_mask(int64_t i) const {
  const Shard& s = shard();
  Kernels::AttentionMask m;
  if (s.model.is_window_layer(s.first_layer + i)) m.window = s.model.sliding_window;
  if (const int64_t at = layout_.layer(i).sinks; at >= 0) m.sinks = W(at, s.heads_local());
  return m;
}

void GptStage::attention_forward(const LayerActs& x, int64_t i) {
  const Shard& s = shard();
  const Kernels::AttentionMask mask = attention_mask(i);
  if (ring_) ring_->forward(x.atty, x.probs, x.qkv, mask);
  else k_.attention_forward(x.atty, x.probs, x.qkv, B_, T_, s.heads_local(), s.head_dim(), mask);
}

void GptStage::attention_backward(const Tensor& dqkv, const LayerActs& x, int64_t i) {
  const Shard& s = shard();
  const Kernels::AttentionMask mask = attention_mask(i);
  // The sinks' gradient in the input pass too (a split backward's weight pass has no attention),
  // as QK-norm's: this rank's heads, no TP sum; cp ranks' shares are summed with the gradients.
  const int64_t at = layout_.layer(i).sinks;
  float* dsinks = at >= 0 ? grad_at(at) : nullptr;
  if (ring_) ring_->backward(dqkv, datty_, x.qkv, x.atty, x.probs, mask, dsinks);
  else k_.attention_backward(dqkv, dattn_, datty_, x.qkv, x.probs, x.atty, B_, T_, s.heads_local(), s.head_dim(), mask,
                             dsinks);
}

}  // namespace trident::nn
