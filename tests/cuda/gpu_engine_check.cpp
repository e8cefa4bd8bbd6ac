// GPU check (needs a GPU; run by scripts/gpu-check.sh): the one trainer and its GPT and Llama
// (RMSNorm, SwiGLU, RoPE, grouped-query attention) layers run unchanged on CudaKernels and give
// the CPU engine's results: logits of a forward, then the loss and gradient norm of 5 AdamW steps
// (2 micro-batches each) -- fp32 on both devices with fp32 tolerances, then the GPU in bf16 mixed
// precision against the CPU's fp32 with bf16 ones.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "runtime/cuda/cuda_kernels.h"
#include "runtime/cuda/device.h"
#include "runtime/kernels/ops.h"
#include "runtime/nn/gpt.h"
#include "runtime/parallel/batch_source.h"
#include "runtime/parallel/dist_trainer.h"

using namespace trident;

namespace {
// The batches as the trainer asks for them: micro-batch j of a step = sequences [j*B, (j+1)*B).
struct FnSource final : parallel::BatchSource {
  std::function<void(int64_t, int64_t, int32_t*, int32_t*)> fn;
  int64_t B = 1;
  void fill(int64_t step, int64_t first, int64_t, int32_t* tok, int32_t* tgt) const override { fn(step, first / B, tok, tgt); }
  std::string describe() const override { return "random batches"; }
};

// One process of the one trainer (a world of one) on kernels k in dtype dt.
struct OneProcess {
  parallel::ProcessGroups groups = parallel::make_single_process_groups(std::make_shared<comm::CommContext>());
  std::unique_ptr<parallel::DistTrainer> trainer;
  OneProcess(const RunSpec& run, const parallel::BatchSource& data, kernels::Kernels& k, const engine::AdamWConfig& opt,
             kernels::DType dt) {
    parallel::TrainerOptions o;
    o.adamw = opt;
    o.seed = 5;
    o.kernels = &k;
    o.compute = dt;
    trainer = std::make_unique<parallel::DistTrainer>(run, groups, data, o);
  }
  // Forward only on the given tokens; the logits [B*T, V] (compute dtype).
  kernels::Tensor forward_logits(nn::Activations& acts, const int32_t* tok, const int32_t* tgt) {
    trainer->chunk_stage(0).forward(acts, tok, tgt);
    return acts.logits();
  }
};
}  // namespace

int main() {
  try {
    cuda::DeviceInfo info = cuda::select_gpu(cuda::local_rank_from_env());
    ModelSpec gpt;
    gpt.name = "check";
    gpt.layers = 2, gpt.hidden = 128, gpt.heads = 2, gpt.kv_heads = 2, gpt.ffn_hidden = 512;  // hd 64
    gpt.seq_len = 64, gpt.vocab = 500;
    ModelSpec llama = gpt;  // 4 query heads sharing 2 kv heads (hd 32), untied head
    llama.name = "check-llama", llama.family = ModelFamily::Llama;
    llama.heads = 4, llama.kv_heads = 2, llama.ffn_hidden = 344;
    ModelSpec model = gpt;
    const int64_t micro = 4, accum = 2, steps = 5;
    engine::AdamWConfig opt;
    opt.lr = 1e-3;
    auto batch = [&](int64_t step, int64_t m, int32_t* tok, int32_t* tgt) {
      std::mt19937 rng(uint32_t(step * 100 + m));
      std::uniform_int_distribution<int> id(0, int(model.vocab) - 1);
      for (int64_t i = 0; i < micro * model.seq_len; ++i) tok[i] = id(rng), tgt[i] = id(rng);
    };
    auto cpu = kernels::make_cpu_kernels();
    cuda::CudaKernels gpu(info.index);
    FnSource source;
    source.fn = batch;
    source.B = micro;
    int failures = 0;
    auto verdict = [&](const std::string& what, double err, double tol) {
      bool ok = std::isfinite(err) && err <= tol;
      failures += !ok;
      std::printf("%-4s %-52s %.3e (tol %.0e)\n", ok ? "ok" : "FAIL", what.c_str(), err, tol);
    };
    for (const ModelSpec& family : {gpt, llama})
    for (kernels::DType dt : {kernels::DType::F32, kernels::DType::BF16}) {
      model = family;
      RunSpec run;
      run.model = model;
      run.exec.micro_batch_size = micro, run.exec.global_batch_size = micro * accum, run.exec.precision = Precision::FP32;
      const bool fp32 = dt == kernels::DType::F32;
      const std::string p = to_string(model.family) + " " + comm::dtype_name(dt) + " ";
      OneProcess tc(run, source, *cpu, opt, kernels::DType::F32), tg(run, source, gpu, opt, dt);
      nn::Activations ac(tc.trainer->chunk_stage(0)), ag(tg.trainer->chunk_stage(0));
      std::vector<int32_t> tok(size_t(micro * model.seq_len)), tgt(tok.size());
      batch(999, 0, tok.data(), tgt.data());
      const size_t nl = size_t(micro * model.seq_len * model.vocab);
      std::vector<float> lc(nl), lg(nl);
      cpu->to_host(lc.data(), kernels::f32_data(tc.forward_logits(ac, tok.data(), tgt.data()), "check"), nl);
      float* g32 = gpu.alloc(nl);
      gpu.convert(kernels::Tensor(g32, nl), tg.forward_logits(ag, tok.data(), tgt.data()));
      gpu.to_host(lg.data(), g32, nl);
      gpu.free(g32, nl);
      double diff = 0, ref = 1e-30;
      for (size_t i = 0; i < nl; ++i)
        diff = std::max(diff, double(std::fabs(lc[i] - lg[i]))), ref = std::max(ref, double(std::fabs(lc[i])));
      verdict(p + "engine logits, GPU vs CPU f32 (max rel)", diff / ref, fp32 ? 1e-4 : 3e-2);
      double worst_loss = 0, worst_norm = 0;
      for (int64_t s = 0; s < steps; ++s) {
        const double lc_s = tc.trainer->step(s), lg_s = tg.trainer->step(s);
        const double nc = tc.trainer->last_grad_norm(), ng = tg.trainer->last_grad_norm();
        std::printf("     %sstep %lld: loss CPU %.6f GPU %.6f, grad norm CPU %.6f GPU %.6f\n", p.c_str(), (long long)s,
                    lc_s, lg_s, nc, ng);
        worst_loss = std::max(worst_loss, std::fabs(lc_s - lg_s));
        worst_norm = std::max(worst_norm, std::fabs(nc - ng) / std::max(nc, 1e-12));
      }
      verdict(p + "engine training losses, max abs diff", worst_loss, fp32 ? 1e-3 : 3e-2);
      verdict(p + "engine gradient norms, max rel diff", worst_norm, fp32 ? 1e-3 : 5e-2);
    }
    std::printf("%s: the engine on CudaKernels (%s) vs CpuKernels\n", failures ? "FAILED" : "PASSED",
                gpu.device_name().c_str());
    return failures ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_engine_check: %s\n", e.what());
    return 2;
  }
}
