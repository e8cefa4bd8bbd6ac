// GPU benchmark (needs a GPU; run by scripts/gpu-check.sh): training throughput of GptCuda in
// bf16 for a GPT-2 preset, and its model FLOP utilisation against the bf16 matrix-product rate
// measured in the same run (cuBLASLt, 8192^3, bf16 in/out, fp32 accumulate).
//
// FLOPs per token (PaLM / llm.c convention, printed with its inputs):
//   6 * N  +  12 * L * C * T
// N = parameters that take part in matrix products (all but positions; the tied output
// embedding counts once), L layers, C hidden, T sequence. The attention term counts the full
// T x T score matrices (no causal halving), as the convention does.
// Usage: gpu_gpt_bench PRESET BATCH SEQ STEPS [flash|matmul]   e.g. gpu_gpt_bench gpt2-small 16 1024 20 matmul
// (attention implementation, see gpt_cuda.h; default flash)
// Prints one "RESULT key=value ..." line for the check script.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/gpt_cuda.h"
#include "runtime/cuda/matmul.h"

using namespace trident;
using namespace trident::cuda;

namespace {

// bf16 GEMM rate in FLOP/s: n^3 product, bf16 in/out, fp32 accumulation, median of runs.
double measure_bf16_matmul(int n) {
  cudaStream_t s;
  cudaCheck(cudaStreamCreate(&s));
  void *a, *b, *d;
  const size_t bytes = size_t(n) * n * 2;
  cudaCheck(cudaMalloc(&a, bytes));
  cudaCheck(cudaMalloc(&b, bytes));
  cudaCheck(cudaMalloc(&d, bytes));
  cudaCheck(cudaMemsetAsync(a, 0, bytes, s));  // zeros are fine for timing the tensor cores
  cudaCheck(cudaMemsetAsync(b, 0, bytes, s));
  double best = 0;
  {
    Matmul mm(s);
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    for (int i = 0; i < 3; ++i)
      mm.gemm(true, false, n, n, n, a, n, b, n, d, n, 1.0f, 0.0f, ElemType::BF16, ElemType::BF16);
    const int reps = 20;
    for (int trial = 0; trial < 3; ++trial) {
      cudaCheck(cudaEventRecord(e0, s));
      for (int i = 0; i < reps; ++i)
        mm.gemm(true, false, n, n, n, a, n, b, n, d, n, 1.0f, 0.0f, ElemType::BF16, ElemType::BF16);
      cudaCheck(cudaEventRecord(e1, s));
      cudaCheck(cudaEventSynchronize(e1));
      float ms = 0;
      cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
      best = std::max(best, 2.0 * n * double(n) * n * reps / (ms * 1e-3));
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  }
  cudaFree(a), cudaFree(b), cudaFree(d);
  cudaStreamDestroy(s);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5 || argc > 6) {
    std::fprintf(stderr, "usage: gpu_gpt_bench PRESET BATCH SEQ STEPS [flash|matmul]\n");
    return 2;
  }
  const AttentionKind attention = argc == 6 && std::string(argv[5]) == "matmul" ? AttentionKind::Matmul
                                                                                : AttentionKind::Flash;
  try {
    const ModelSpec spec = model_preset(argv[1]);
    const int B = std::stoi(argv[2]), T = std::stoi(argv[3]), steps = std::stoi(argv[4]);
    DeviceInfo info = select_gpu(local_rank_from_env());
    const double peak = measure_bf16_matmul(8192);

    GptShape shape{int(spec.layers), int(spec.hidden), int(spec.heads), int(spec.seq_len), int(spec.vocab)};
    GptCuda model(shape, B, T, Precision::BF16, 0.0, attention);
    model.init_gpt2(1);
    std::printf("%s (%s attention) on %s: B=%d T=%d, %zu parameters (with %d padded vocab rows); GPU memory:\n%s", argv[1],
                attention_name(attention), info.name.c_str(), B, T, model.num_params(), shape.padded_vocab() - shape.vocab,
                model.memory_table().c_str());

    std::mt19937 rng(3);
    std::uniform_int_distribution<int> id(0, shape.vocab - 1);
    std::vector<int> tokens(size_t(B) * T), targets(size_t(B) * T);
    for (auto& t : tokens) t = id(rng);
    for (auto& t : targets) t = id(rng);
    const AdamW adamw{};
    auto one_step = [&] {
      model.zero_grad();
      float loss = model.forward_backward(tokens, targets);
      model.step(adamw);
      return loss;
    };
    for (int i = 0; i < 3; ++i) one_step();  // warm-up: cuBLASLt plans, caches
    cudaCheck(cudaDeviceSynchronize());
    auto t0 = std::chrono::steady_clock::now();
    float loss = 0;
    for (int i = 0; i < steps; ++i) loss = one_step();
    cudaCheck(cudaDeviceSynchronize());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    const double L = double(spec.layers), C = double(spec.hidden);
    const double n_matmul = double(model.num_params()) - double(shape.padded_vocab() - shape.vocab) * C -
                            double(spec.seq_len) * C;  // without padding and positions
    const double flops_per_token = 6.0 * n_matmul + 12.0 * L * C * T;
    const double tokens_per_s = double(B) * T * steps / seconds;
    const double achieved = tokens_per_s * flops_per_token;
    std::printf("step %.1f ms, %.0f tokens/s, loss %.4f\n", 1e3 * seconds / steps, tokens_per_s, loss);
    std::printf("FLOPs/token = 6*N + 12*L*C*T = 6*%.0f + 12*%.0f*%.0f*%d = %.4g\n", n_matmul, L, C, T,
                flops_per_token);
    std::printf("achieved %.1f TFLOP/s; measured bf16 matmul rate %.1f TFLOP/s; MFU %.1f%%\n", achieved / 1e12,
                peak / 1e12, 100.0 * achieved / peak);
    std::printf("RESULT impl=trident-%s model=%s B=%d T=%d tokens_per_s=%.0f tflops=%.2f matmul_tflops=%.2f mfu=%.4f "
                "flops_per_token=%.6g\n",
                attention_name(attention), argv[1], B, T, tokens_per_s, achieved / 1e12, peak / 1e12, achieved / peak, flops_per_token);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_gpt_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
