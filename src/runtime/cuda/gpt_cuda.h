// GptCuda: a GPT-2 style model (learned positions, LayerNorm, GELU MLP, biases, tied output
// embedding) trained on one GPU with the kernels of kernels.h and cuBLASLt matrix products.
//
// Memory is llm.c's: one flat buffer for each of fp32 master weights, the weights in the
// compute type (bf16 or fp32), fp32 gradients, AdamW's m and v, plus every activation kept
// for backward -- all carved from one DeviceArena allocated at construction. The flat
// gradient buffer is what a data-parallel all-reduce sends (grads_device()).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trident::cuda {

struct GptShape {
  int layers = 0, hidden = 0, heads = 0, max_seq = 0, vocab = 0;
  // The output embedding is padded to a multiple of 128 rows so the logits matrix product is
  // aligned; padded rows stay zero and padded logits are ignored by the loss.
  int padded_vocab() const { return (vocab + 127) / 128 * 128; }
};

enum class Precision { FP32, BF16 };
const char* precision_name(Precision p);

// Flash: the fused kernel of kernels.h (O(T) memory, CUDA cores). Matmul: attention_matmul.h
// (tensor cores, keeps the T x T probabilities of every layer).
enum class AttentionKind { Flash, Matmul };
const char* attention_name(AttentionKind a);

struct AdamW {
  float lr = 3e-4f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
  float grad_clip = 1.0f;  // global gradient norm; <= 0 turns clipping off
};

// A named slice of the flat parameter buffer. decay: AdamW weight decay applies (matrices and
// embeddings, not biases or LayerNorm parameters).
struct ParamTensor {
  std::string name;
  size_t offset = 0, count = 0;
  bool decay = false;
};

// The parameter tensors in buffer order: wte (padded_vocab x C), wpe (max_seq x C), then each
// per-layer tensor for all layers stacked: ln1w, ln1b, qkvw (3C x C), qkvb, attprojw (C x C),
// attprojb, ln2w, ln2b, fcw (4C x C), fcb, fcprojw (C x 4C), fcprojb; then lnfw, lnfb.
std::vector<ParamTensor> gpt_param_tensors(const GptShape& shape);

class GptCuda {
 public:
  // batch x seq tokens per forward; seq <= shape.max_seq. predicted_bytes (planner's memory
  // prediction for this GPU, 0 if unknown) is quoted when the GPU runs out of memory.
  GptCuda(const GptShape& shape, int batch, int seq, Precision precision, double predicted_bytes = 0.0,
          AttentionKind attention = AttentionKind::Flash);
  ~GptCuda();
  GptCuda(const GptCuda&) = delete;
  GptCuda& operator=(const GptCuda&) = delete;

  const GptShape& shape() const;
  int batch() const;
  int seq() const;
  Precision precision() const;
  const std::vector<ParamTensor>& tensors() const;
  size_t num_params() const;  // including the padded rows of wte
  size_t device_bytes() const;
  std::string memory_table() const;  // every region of the arena, largest first
  cudaStream_t stream() const;

  // GPT-2 initialisation: N(0, 0.02) weights, residual projections scaled by 1/sqrt(2L),
  // zero biases, unit LayerNorm weights. Resets the optimizer.
  void init_gpt2(uint64_t seed);
  void set_params(const std::vector<float>& master);  // resets the optimizer
  std::vector<float> params() const;                 // fp32 master weights

  // Logits (batch, seq, vocab) for the tokens, unpadded, as floats.
  std::vector<float> forward_logits(const std::vector<int>& tokens);
  // Forward and backward of mean cross-entropy; gradients (times grad_scale) are added to the
  // gradient buffer. Returns the mean loss.
  float forward_backward(const std::vector<int>& tokens, const std::vector<int>& targets, float grad_scale = 1.0f);
  void zero_grad();
  std::vector<float> grads() const;
  float* grads_device();

  // Clip to the global norm, then AdamW. Returns the gradient norm before clipping.
  float step(const AdamW& settings);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace trident::cuda
