// GPU benchmark (needs a GPU; run by scripts/gpu-check.sh): training throughput of the one model
// (GptStage through the one trainer, one process, on CudaKernels) in bf16 mixed precision or fp32 for a GPT-2
// preset, and its model FLOP utilisation against the bf16 matrix-product rate measured in the
// same run (cuBLASLt, 8192^3, bf16 in/out, fp32 accumulate). The vocabulary is padded to a
// multiple of 128 (50257 -> 50304), as the PyTorch peer and the planner do.
//
// FLOPs per token (PaLM / llm.c convention, printed with its inputs):
//   6 * N  +  12 * L * C * T
// N = parameters that take part in matrix products (all but positions; the tied output
// embedding counts once), L layers, C hidden, T sequence. The attention term counts the full
// T x T score matrices (no causal halving), as the convention does.
// Usage: gpu_gpt_bench PRESET BATCH SEQ STEPS [bf16|fp32] [flash|matmul]
//   e.g. gpu_gpt_bench gpt2-small 16 1024 20 bf16 matmul   (attention: see cuda_kernels.h; default flash)
// Prints one "RESULT key=value ..." line for the check script.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_kernels.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/matmul.h"
#include "runtime/nn/gpt.h"
#include "runtime/parallel/batch_source.h"
#include "runtime/parallel/dist_trainer.h"

using namespace trident;
using namespace trident::cuda;

namespace {

// The same fixed batch every step (throughput only).
struct FixedBatch final : parallel::BatchSource {
  std::vector<int32_t> tokens, targets;
  void fill(int64_t, int64_t, int64_t, int32_t* tok, int32_t* tgt) const override {
    std::copy(tokens.begin(), tokens.end(), tok);
    std::copy(targets.begin(), targets.end(), tgt);
  }
  std::string describe() const override { return "a fixed random batch"; }
};

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
  const std::string prec = argc > 5 ? argv[5] : "bf16", att = argc > 6 ? argv[6] : "flash";
  if (argc < 5 || argc > 7 || (prec != "bf16" && prec != "fp32") || (att != "flash" && att != "matmul")) {
    std::fprintf(stderr, "usage: gpu_gpt_bench PRESET BATCH SEQ STEPS [bf16|fp32] [flash|matmul]\n");
    return 2;
  }
  const bool bf16 = prec == "bf16";
  const Attention attention = att == "matmul" ? Attention::Matmul : Attention::Flash;
  const kernels::DType dtype = bf16 ? kernels::DType::BF16 : kernels::DType::F32;
  try {
    ModelSpec real = model_preset(argv[1]);
    const int B = std::stoi(argv[2]), T = std::stoi(argv[3]), steps = std::stoi(argv[4]);
    real.seq_len = T;
    ModelSpec spec = real;
    spec.vocab = (spec.vocab + 127) / 128 * 128;
    DeviceInfo info = select_gpu(local_rank_from_env());
    const double peak = measure_bf16_matmul(8192);

    CudaKernels k(info.index, attention);
    engine::AdamWConfig opt;
    opt.lr = 3e-4, opt.min_lr = 3e-4;
    FixedBatch batch;
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> id(0, int(spec.vocab) - 1);
    batch.tokens.resize(size_t(B) * T), batch.targets.resize(size_t(B) * T);
    for (auto& t : batch.tokens) t = id(rng);
    for (auto& t : batch.targets) t = id(rng);
    RunSpec run;
    run.model = spec;
    run.exec.micro_batch_size = B, run.exec.global_batch_size = B, run.exec.precision = Precision::FP32;
    parallel::ProcessGroups groups = parallel::make_single_process_groups(std::make_shared<comm::CommContext>());
    parallel::TrainerOptions o;
    o.adamw = opt;
    o.seed = 1;
    o.kernels = &k;
    o.compute = dtype;
    parallel::DistTrainer trainer(run, groups, batch, o);
    nn::GptStage& g = trainer.chunk_stage(0);
    const int64_t P = g.layout().total();
    std::printf("%s (%s, %s attention) on %s: B=%d T=%d, %lld parameters (vocab padded to %lld)\n%s%s", argv[1], prec.c_str(), att.c_str(),
                info.name.c_str(), B, T, (long long)P, (long long)spec.vocab, g.memory_table().c_str(),
                std::string("  trainer buffers in all (weights, grads, AdamW, activation slots): " +
                            std::to_string(trainer.allocated_bytes() / (1 << 20)) + " MiB\n")
                    .c_str());

    for (int i = 0; i < 3; ++i) trainer.step(i);  // warm-up: cuBLASLt plans, caches
    k.synchronize();
    auto t0 = std::chrono::steady_clock::now();
    double loss = 0;
    for (int i = 0; i < steps; ++i) loss = trainer.step(3 + i);
    k.synchronize();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    const double L = double(spec.layers), C = double(spec.hidden);
    // Parameters in matrix products: the real vocabulary (not the padding), no positions.
    const double n_matmul = double(count_parameters(real).total) - double(real.seq_len) * C;
    const double flops_per_token = 6.0 * n_matmul + 12.0 * L * C * T;
    const double tokens_per_s = double(B) * T * steps / seconds;
    const double achieved = tokens_per_s * flops_per_token;
    std::printf("step %.1f ms, %.0f tokens/s, loss %.4f\n", 1e3 * seconds / steps, tokens_per_s, loss);
    std::printf("FLOPs/token = 6*N + 12*L*C*T = 6*%.0f + 12*%.0f*%.0f*%d = %.4g\n", n_matmul, L, C, T,
                flops_per_token);
    std::printf("achieved %.1f TFLOP/s; measured bf16 matmul rate %.1f TFLOP/s; MFU %.1f%%\n", achieved / 1e12,
                peak / 1e12, 100.0 * achieved / peak);
    std::printf("RESULT impl=trident-%s-%s model=%s B=%d T=%d tokens_per_s=%.0f tflops=%.2f matmul_tflops=%.2f mfu=%.4f "
                "flops_per_token=%.6g\n",
                prec.c_str(), att.c_str(), argv[1], B, T, tokens_per_s, achieved / 1e12, peak / 1e12, achieved / peak,
                flops_per_token);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_gpt_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
