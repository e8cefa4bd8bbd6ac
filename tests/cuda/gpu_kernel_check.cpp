// GPU check (needs a GPU; run by scripts/gpu-check.sh, not by ctest): every CUDA kernel against
// the CPU path on the same random inputs.
//  - fp32: each operation of the engine's kernel interface, CudaKernels vs CpuKernels, with a
//    tolerance of a few fp32 roundings (different summation orders).
//  - bf16: the mixed-precision kernels of kernels.h (and bf16 cuBLASLt products) vs the CPU
//    fp32 result on the same bf16-rounded inputs, with bf16 tolerances.
// Prints one line per check (max abs error, max error relative to the reference's max
// magnitude, tolerance) and exits 1 if any check fails.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/cuda/attention_matmul.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_kernels.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/matmul.h"
#include "runtime/kernels/ops.h"

using namespace trident;
using kernels::Kernels;
using kernels::Trans;

namespace {

int failures = 0;
std::mt19937 rng(1234);

std::vector<float> randn(size_t n, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

float round_bf16(float x) { return __bfloat162float(__float2bfloat16(x)); }
std::vector<float> rounded_bf16(std::vector<float> v) {
  for (auto& x : v) x = round_bf16(x);
  return v;
}

// The same buffer on the CPU engine and on the GPU.
struct Both {
  Kernels& cpu;
  Kernels& gpu;
  size_t n;
  float* c;
  float* g;
  Both(Kernels& cpu_, Kernels& gpu_, const std::vector<float>& init) : cpu(cpu_), gpu(gpu_), n(init.size()) {
    c = cpu.alloc(n);
    g = gpu.alloc(n);
    cpu.from_host(c, init.data(), n);
    gpu.from_host(g, init.data(), n);
  }
  Both(Kernels& cpu_, Kernels& gpu_, size_t count) : Both(cpu_, gpu_, std::vector<float>(count, 0.0f)) {}
  ~Both() {
    cpu.free(c, n);
    gpu.free(g, n);
  }
  std::vector<float> cpu_values() const {
    std::vector<float> v(n);
    cpu.to_host(v.data(), c, n);
    return v;
  }
  std::vector<float> gpu_values() const {
    std::vector<float> v(n);
    gpu.to_host(v.data(), g, n);
    return v;
  }
};

void report(const std::string& what, const std::vector<float>& ref, const std::vector<float>& got, double tol) {
  double max_abs = 0.0, ref_max = 1e-30;
  bool finite = ref.size() == got.size();
  for (size_t i = 0; i < ref.size() && i < got.size(); ++i) {
    if (!std::isfinite(got[i])) finite = false;
    max_abs = std::max(max_abs, std::fabs(double(ref[i]) - double(got[i])));
    ref_max = std::max(ref_max, std::fabs(double(ref[i])));
  }
  double rel = max_abs / ref_max;
  bool ok = finite && rel <= tol;
  if (!ok) ++failures;
  std::printf("%-4s %-44s max|diff| %.3e  rel %.3e  (tol %.0e, max|ref| %.3e)\n", ok ? "ok" : "FAIL", what.c_str(),
              max_abs, rel, tol, ref_max);
}
void check(const std::string& what, const Both& b, double tol) { report(what, b.cpu_values(), b.gpu_values(), tol); }

constexpr double kF32 = 2e-5;   // fp32 vs fp32, different summation order
constexpr double kBF16 = 2e-2;  // bf16 storage (8 bits of mantissa) vs fp32

std::vector<int32_t> random_ids(size_t n, int V) {
  std::uniform_int_distribution<int> d(0, V - 1);
  std::vector<int32_t> ids(n);
  for (auto& t : ids) t = d(rng);
  return ids;
}

void fp32_checks(Kernels& cpu, Kernels& gpu) {
  const int64_t B = 2, T = 96, nh = 4, hd = 64, C = nh * hd, N = B * T, V = 1000;
  // Matrix products, every transpose combination, alpha/beta, leading dimensions > width.
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const int64_t M = 70, Nn = 50, K = 40, lda = (ta ? M : K) + 3, ldb = (tb ? K : Nn) + 5, ldc = Nn + 2;
      Both A(cpu, gpu, randn((ta ? K : M) * lda)), Bm(cpu, gpu, randn((tb ? Nn : K) * ldb)), Cm(cpu, gpu, randn(M * ldc));
      for (Kernels* k : {&cpu, &gpu})
        k->gemm(ta ? Trans::T : Trans::N, tb ? Trans::T : Trans::N, M, Nn, K, 0.7f, k == &cpu ? A.c : A.g, lda,
                k == &cpu ? Bm.c : Bm.g, ldb, 0.3f, k == &cpu ? Cm.c : Cm.g, ldc);
      check(std::string("gemm ") + (ta ? "T" : "N") + (tb ? "T" : "N") + " alpha .7 beta .3", Cm, kF32);
    }
  {
    Both inp(cpu, gpu, randn(N * C)), w(cpu, gpu, randn(3 * C * C, 0.05f)), b(cpu, gpu, randn(3 * C)),
        out(cpu, gpu, N * 3 * C), dout(cpu, gpu, randn(N * 3 * C)), dinp(cpu, gpu, N * C),
        dw(cpu, gpu, randn(3 * C * C)), db(cpu, gpu, randn(3 * C));
    cpu.linear_forward(out.c, inp.c, w.c, b.c, N, C, 3 * C);
    gpu.linear_forward(out.g, inp.g, w.g, b.g, N, C, 3 * C);
    check("linear_forward (+bias)", out, kF32);
    cpu.linear_backward(dinp.c, dw.c, db.c, dout.c, inp.c, w.c, N, C, 3 * C);
    gpu.linear_backward(dinp.g, dw.g, db.g, dout.g, inp.g, w.g, N, C, 3 * C);
    check("linear_backward dinp", dinp, kF32);
    check("linear_backward dweight (+=)", dw, kF32);
    check("linear_backward dbias (+=)", db, kF32);
  }
  {
    const size_t n = 100003;
    Both a(cpu, gpu, randn(n)), b(cpu, gpu, randn(n)), out(cpu, gpu, n), dout(cpu, gpu, randn(n));
    cpu.add(out.c, a.c, b.c, n), gpu.add(out.g, a.g, b.g, n);
    check("add", out, 0);
    cpu.add_inplace(out.c, a.c, n), gpu.add_inplace(out.g, a.g, n);
    check("add_inplace", out, 0);
    cpu.scale(out.c, 0.37f, n), gpu.scale(out.g, 0.37f, n);
    check("scale", out, 0);
    cpu.gelu_forward(out.c, a.c, n), gpu.gelu_forward(out.g, a.g, n);
    check("gelu_forward (tanh)", out, kF32);
    cpu.gelu_backward(out.c, a.c, dout.c, n), gpu.gelu_backward(out.g, a.g, dout.g, n);
    check("gelu_backward", out, kF32);
  }
  {
    Both inp(cpu, gpu, randn(N * C, 2.0f)), w(cpu, gpu, randn(C)), b(cpu, gpu, randn(C)), out(cpu, gpu, N * C),
        mean(cpu, gpu, N), rstd(cpu, gpu, N), dout(cpu, gpu, randn(N * C)), dinp(cpu, gpu, randn(N * C)),
        dw(cpu, gpu, randn(C)), db(cpu, gpu, randn(C));
    cpu.layernorm_forward(out.c, mean.c, rstd.c, inp.c, w.c, b.c, N, C);
    gpu.layernorm_forward(out.g, mean.g, rstd.g, inp.g, w.g, b.g, N, C);
    check("layernorm_forward out", out, kF32);
    check("layernorm_forward rstd", rstd, kF32);
    cpu.layernorm_backward(dinp.c, dw.c, db.c, dout.c, inp.c, w.c, mean.c, rstd.c, N, C);
    gpu.layernorm_backward(dinp.g, dw.g, db.g, dout.g, inp.g, w.g, mean.g, rstd.g, N, C);
    check("layernorm_backward dinp (+=)", dinp, kF32);
    check("layernorm_backward dweight (+=)", dw, kF32);
    check("layernorm_backward dbias (+=)", db, kF32);
  }
  for (int64_t Tt : {int64_t(96), int64_t(37)}) {  // a sequence that is not a multiple of the tiles
    const int64_t n = B * Tt;
    Both qkv(cpu, gpu, randn(n * 3 * C)), out(cpu, gpu, n * C), dout(cpu, gpu, randn(n * C)),
        dqkv(cpu, gpu, n * 3 * C);
    std::vector<float> probs_c(cpu.attention_probs_size(B, Tt, nh)), scratch_c(cpu.attention_scratch_size(B, Tt, nh));
    float* pc = cpu.alloc(probs_c.size());
    float* sc = cpu.alloc(scratch_c.size());
    float* pg = gpu.alloc(gpu.attention_probs_size(B, Tt, nh));
    float* sg = gpu.alloc(gpu.attention_scratch_size(B, Tt, nh));
    cpu.attention_forward(out.c, pc, qkv.c, B, Tt, nh, hd);
    gpu.attention_forward(out.g, pg, qkv.g, B, Tt, nh, hd);
    check("attention_forward (flash) T=" + std::to_string(Tt), out, kF32 * 5);
    cpu.attention_backward(dqkv.c, sc, dout.c, qkv.c, pc, out.c, B, Tt, nh, hd);
    gpu.attention_backward(dqkv.g, sg, dout.g, qkv.g, pg, out.g, B, Tt, nh, hd);
    check("attention_backward dqkv T=" + std::to_string(Tt), dqkv, kF32 * 5);
    cpu.free(pc, probs_c.size()), cpu.free(sc, scratch_c.size());
    gpu.free(pg, gpu.attention_probs_size(B, Tt, nh)), gpu.free(sg, gpu.attention_scratch_size(B, Tt, nh));
  }
  {
    auto ids = random_ids(N, int(V));
    const int64_t v_offset = 300, V_local = 400;  // a tensor-parallel shard of the vocabulary
    Both wte(cpu, gpu, randn(V_local * C)), wpe(cpu, gpu, randn(T * C)), out(cpu, gpu, N * C),
        dout(cpu, gpu, randn(N * C)), dwte(cpu, gpu, randn(V_local * C)), dwpe(cpu, gpu, randn(T * C));
    cpu.embedding_forward(out.c, ids.data(), wte.c, N, C, v_offset, V_local);
    gpu.embedding_forward(out.g, ids.data(), wte.g, N, C, v_offset, V_local);  // host ids: staged
    check("embedding_forward (vocab shard)", out, 0);
    cpu.add_positions(out.c, wpe.c, B, T, C), gpu.add_positions(out.g, wpe.g, B, T, C);
    check("add_positions", out, 0);
    cpu.embedding_backward(dwte.c, dout.c, ids.data(), N, C, v_offset, V_local);
    gpu.embedding_backward(dwte.g, dout.g, ids.data(), N, C, v_offset, V_local);
    check("embedding_backward (+=)", dwte, kF32);
    cpu.positions_backward(dwpe.c, dout.c, B, T, C), gpu.positions_backward(dwpe.g, dout.g, B, T, C);
    check("positions_backward (+=)", dwpe, kF32);
  }
  {
    auto targets = random_ids(N, int(V));
    const int64_t v_offset = 0;
    Both logits(cpu, gpu, randn(N * V, 3.0f)), mx(cpu, gpu, N), se(cpu, gpu, N), tl(cpu, gpu, N), loss(cpu, gpu, N);
    cpu.xent_row_max(mx.c, logits.c, N, V), gpu.xent_row_max(mx.g, logits.g, N, V);
    check("xent_row_max", mx, 0);
    cpu.xent_sumexp_target(se.c, tl.c, logits.c, mx.c, targets.data(), N, V, v_offset);
    gpu.xent_sumexp_target(se.g, tl.g, logits.g, mx.g, targets.data(), N, V, v_offset);
    check("xent_sumexp_target sumexp", se, kF32 * 5);
    check("xent_sumexp_target target logit", tl, 0);
    cpu.xent_losses(loss.c, se.c, mx.c, tl.c, N), gpu.xent_losses(loss.g, se.g, mx.g, tl.g, N);
    check("xent_losses", loss, kF32 * 5);
    cpu.xent_backward_inplace(logits.c, mx.c, se.c, targets.data(), 1.0f / N, N, V, v_offset);
    gpu.xent_backward_inplace(logits.g, mx.g, se.g, targets.data(), 1.0f / N, N, V, v_offset);
    check("xent_backward_inplace", logits, kF32 * 5);
  }
  {
    const size_t n = 1 << 20;
    Both p(cpu, gpu, randn(n)), g(cpu, gpu, randn(n)), m(cpu, gpu, n), v(cpu, gpu, n);
    double sc = cpu.sum_squares(g.c, n), sg = gpu.sum_squares(g.g, n);
    report("sum_squares", {float(sc)}, {float(sg)}, 1e-6);
    for (int t = 1; t <= 3; ++t) {
      cpu.adamw(p.c, g.c, m.c, v.c, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, t);
      gpu.adamw(p.g, g.g, m.g, v.g, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, t);
    }
    check("adamw (3 steps) params", p, kF32);
    check("adamw (3 steps) v", v, kF32);
  }
}

// ---- bf16 kernels of kernels.h against the CPU fp32 path on bf16-rounded inputs.
struct Bf16Buffer {
  size_t n;
  cuda::bf16* p = nullptr;
  explicit Bf16Buffer(const std::vector<float>& v) : n(v.size()) {
    std::vector<cuda::bf16> h(n);
    for (size_t i = 0; i < n; ++i) h[i] = __float2bfloat16(v[i]);
    cudaCheck(cudaMalloc(&p, n * sizeof(cuda::bf16)));
    cudaCheck(cudaMemcpy(p, h.data(), n * sizeof(cuda::bf16), cudaMemcpyHostToDevice));
  }
  explicit Bf16Buffer(size_t count) : Bf16Buffer(std::vector<float>(count, 0.0f)) {}
  ~Bf16Buffer() { cudaFree(p); }
  std::vector<float> values() const {
    cudaCheck(cudaDeviceSynchronize());
    std::vector<cuda::bf16> h(n);
    cudaCheck(cudaMemcpy(h.data(), p, n * sizeof(cuda::bf16), cudaMemcpyDeviceToHost));
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = __bfloat162float(h[i]);
    return v;
  }
};
struct F32Buffer {
  size_t n;
  float* p = nullptr;
  explicit F32Buffer(const std::vector<float>& v) : n(v.size()) {
    cudaCheck(cudaMalloc(&p, n * sizeof(float)));
    cudaCheck(cudaMemcpy(p, v.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  }
  ~F32Buffer() { cudaFree(p); }
  std::vector<float> values() const {
    cudaCheck(cudaDeviceSynchronize());
    std::vector<float> v(n);
    cudaCheck(cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
    return v;
  }
};

void bf16_checks(Kernels& cpu) {
  const int B = 2, T = 128, nh = 4, hd = 64, C = nh * hd, N = B * T, V = 1000;
  cudaStream_t s = nullptr;
  auto to_cpu = [&](const std::vector<float>& v) {
    float* p = cpu.alloc(v.size());
    cpu.from_host(p, v.data(), v.size());
    return p;
  };
  auto from_cpu = [&](float* p, size_t n) {
    std::vector<float> v(n);
    cpu.to_host(v.data(), p, n);
    return v;
  };
  {  // LayerNorm forward
    auto x = rounded_bf16(randn(size_t(N) * C, 2.0f)), w = rounded_bf16(randn(C)), b = rounded_bf16(randn(C));
    Bf16Buffer gx(x), gw(w), gb(b), gout(size_t(N) * C);
    F32Buffer gm{std::vector<float>(N)}, gr{std::vector<float>(N)};
    cuda::layernorm_forward<cuda::bf16>(gout.p, gm.p, gr.p, gx.p, gw.p, gb.p, N, C, s);
    float *cx = to_cpu(x), *cw = to_cpu(w), *cb = to_cpu(b), *co = cpu.alloc(size_t(N) * C), *cm = cpu.alloc(N),
          *cr = cpu.alloc(N);
    cpu.layernorm_forward(co, cm, cr, cx, cw, cb, N, C);
    report("bf16 layernorm_forward", from_cpu(co, size_t(N) * C), gout.values(), kBF16);
  }
  {  // GELU
    auto x = rounded_bf16(randn(100000, 2.0f));
    Bf16Buffer gx(x), gout(x.size());
    cuda::gelu_forward<cuda::bf16>(gout.p, gx.p, x.size(), s);
    float *cx = to_cpu(x), *co = cpu.alloc(x.size());
    cpu.gelu_forward(co, cx, x.size());
    report("bf16 gelu_forward", from_cpu(co, x.size()), gout.values(), kBF16);
  }
  {  // Attention forward and backward
    auto qkv = rounded_bf16(randn(size_t(N) * 3 * C)), dout = rounded_bf16(randn(size_t(N) * C));
    Bf16Buffer gq(qkv), gout(size_t(N) * C), gdout(dout), gdqkv(size_t(N) * 3 * C);
    F32Buffer glse(std::vector<float>(size_t(B) * nh * T)), gdelta(std::vector<float>(size_t(B) * nh * T));
    cuda::attention_forward<cuda::bf16>(gout.p, glse.p, gq.p, B, T, nh, hd, s);
    cuda::attention_backward<cuda::bf16>(gdqkv.p, gdelta.p, gdout.p, gq.p, gout.p, glse.p, B, T, nh, hd, s);
    float *cq = to_cpu(qkv), *co = cpu.alloc(size_t(N) * C), *cp = cpu.alloc(cpu.attention_probs_size(B, T, nh)),
          *cs = cpu.alloc(cpu.attention_scratch_size(B, T, nh)), *cd = to_cpu(dout), *cdq = cpu.alloc(size_t(N) * 3 * C);
    cpu.attention_forward(co, cp, cq, B, T, nh, hd);
    report("bf16 attention_forward", from_cpu(co, size_t(N) * C), gout.values(), kBF16);
    cpu.attention_backward(cdq, cs, cd, cq, cp, co, B, T, nh, hd);
    report("bf16 attention_backward dqkv", from_cpu(cdq, size_t(N) * 3 * C), gdqkv.values(), 3 * kBF16);
    // The tensor-core alternative (attention_matmul.h) on the same inputs.
    cuda::Matmul mm(s);
    Bf16Buffer heads(cuda::AttentionMatmulScratch<cuda::bf16>::heads_elems(B, T, C)),
        probs(cuda::AttentionMatmulScratch<cuda::bf16>::score_elems(B, T, nh)), mout(size_t(N) * C),
        mdqkv(size_t(N) * 3 * C);
    F32Buffer scores{std::vector<float>(cuda::AttentionMatmulScratch<cuda::bf16>::score_elems(B, T, nh))};
    cuda::AttentionMatmulScratch<cuda::bf16> scratch{heads.p, scores.p};
    cuda::attention_matmul_forward<cuda::bf16>(mm, mout.p, probs.p, gq.p, scratch, B, T, nh, hd, s);
    report("bf16 attention_matmul_forward", from_cpu(co, size_t(N) * C), mout.values(), kBF16);
    cuda::attention_matmul_backward<cuda::bf16>(mm, mdqkv.p, probs.p, gdout.p, gq.p, scratch, B, T, nh, hd, s);
    report("bf16 attention_matmul_backward dqkv", from_cpu(cdq, size_t(N) * 3 * C), mdqkv.values(), 3 * kBF16);
  }
  {  // fp32 tensor-core attention path vs the CPU, tight tolerance (fp32 products, no TF32)
    auto qkv = randn(size_t(N) * 3 * C), dout = randn(size_t(N) * C);
    F32Buffer gq{qkv}, gdout{dout}, mout{std::vector<float>(size_t(N) * C)}, mdqkv{std::vector<float>(size_t(N) * 3 * C)},
        heads{std::vector<float>(cuda::AttentionMatmulScratch<float>::heads_elems(B, T, C))},
        probs{std::vector<float>(cuda::AttentionMatmulScratch<float>::score_elems(B, T, nh))},
        scores{std::vector<float>(cuda::AttentionMatmulScratch<float>::score_elems(B, T, nh))};
    cuda::Matmul mm(s);
    cuda::AttentionMatmulScratch<float> scratch{heads.p, scores.p};
    cuda::attention_matmul_forward<float>(mm, mout.p, probs.p, gq.p, scratch, B, T, nh, hd, s);
    float *cq = to_cpu(qkv), *co = cpu.alloc(size_t(N) * C), *cp = cpu.alloc(cpu.attention_probs_size(B, T, nh)),
          *cs = cpu.alloc(cpu.attention_scratch_size(B, T, nh)), *cd = to_cpu(dout), *cdq = cpu.alloc(size_t(N) * 3 * C);
    cpu.attention_forward(co, cp, cq, B, T, nh, hd);
    report("fp32 attention_matmul_forward", from_cpu(co, size_t(N) * C), mout.values(), kF32 * 5);
    cuda::attention_matmul_backward<float>(mm, mdqkv.p, probs.p, gdout.p, gq.p, scratch, B, T, nh, hd, s);
    cpu.attention_backward(cdq, cs, cd, cq, cp, co, B, T, nh, hd);
    report("fp32 attention_matmul_backward dqkv", from_cpu(cdq, size_t(N) * 3 * C), mdqkv.values(), kF32 * 5);
  }
  {  // Fused softmax + cross-entropy on padded rows (Vp = 1024 > V = 1000)
    const int Vp = 1024;
    auto logits = rounded_bf16(randn(size_t(N) * Vp, 3.0f));
    auto targets = random_ids(N, V);
    Bf16Buffer gl(logits);
    F32Buffer gloss{std::vector<float>(N)};
    int* gt = nullptr;
    cudaCheck(cudaMalloc(&gt, N * sizeof(int)));
    cudaCheck(cudaMemcpy(gt, targets.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    cuda::softmax_cross_entropy<cuda::bf16>(gloss.p, gl.p, gt, N, V, Vp, 1.0f / N, s);
    std::vector<float> unpadded(size_t(N) * V);
    for (int i = 0; i < N; ++i) std::copy_n(logits.data() + size_t(i) * Vp, V, unpadded.data() + size_t(i) * V);
    float *cl = to_cpu(unpadded), *mx = cpu.alloc(N), *se = cpu.alloc(N), *tl = cpu.alloc(N), *ls = cpu.alloc(N);
    cpu.xent_row_max(mx, cl, N, V);
    cpu.xent_sumexp_target(se, tl, cl, mx, targets.data(), N, V, 0);
    cpu.xent_losses(ls, se, mx, tl, N);
    cpu.xent_backward_inplace(cl, mx, se, targets.data(), 1.0f / N, N, V, 0);
    report("bf16 softmax_cross_entropy losses (fp32 out)", from_cpu(ls, N), gloss.values(), 1e-5);
    auto grad = gl.values();
    std::vector<float> grad_unpadded(size_t(N) * V), pad;
    for (int i = 0; i < N; ++i) {
      std::copy_n(grad.data() + size_t(i) * Vp, V, grad_unpadded.data() + size_t(i) * V);
      pad.insert(pad.end(), grad.begin() + size_t(i) * Vp + V, grad.begin() + size_t(i + 1) * Vp);
    }
    report("bf16 softmax_cross_entropy dlogits", from_cpu(cl, size_t(N) * V), grad_unpadded, kBF16);
    report("bf16 softmax_cross_entropy padded dlogits = 0", std::vector<float>(pad.size(), 0.0f), pad, 0);
    cudaFree(gt);
  }
  {  // bf16 cuBLASLt linear layer: bf16 out, fp32 weight gradient
    cuda::Matmul mm(s);
    const int OC = 3 * C;
    auto x = rounded_bf16(randn(size_t(N) * C)), w = rounded_bf16(randn(size_t(OC) * C, 0.05f)),
         b = rounded_bf16(randn(OC)), dy = rounded_bf16(randn(size_t(N) * OC));
    Bf16Buffer gx(x), gw(w), gb(b), gy(size_t(N) * OC), gdy(dy), gdx(size_t(N) * C);
    F32Buffer gdw(std::vector<float>(size_t(OC) * C, 0.0f));
    mm.linear_forward(gy.p, gx.p, gw.p, gb.p, N, C, OC, cuda::ElemType::BF16);
    mm.linear_backward_input(gdx.p, gdy.p, gw.p, N, C, OC, cuda::ElemType::BF16);
    mm.linear_backward_weight(gdw.p, gdy.p, gx.p, N, C, OC, cuda::ElemType::BF16);
    float *cx = to_cpu(x), *cw = to_cpu(w), *cb = to_cpu(b), *cy = cpu.alloc(size_t(N) * OC), *cdy = to_cpu(dy),
          *cdx = cpu.alloc(size_t(N) * C), *cdw = cpu.alloc(size_t(OC) * C);
    cpu.linear_forward(cy, cx, cw, cb, N, C, OC);
    cpu.linear_backward(cdx, cdw, nullptr, cdy, cx, cw, N, C, OC);
    report("bf16 cuBLASLt linear_forward (+bias)", from_cpu(cy, size_t(N) * OC), gy.values(), kBF16);
    report("bf16 cuBLASLt linear dinp", from_cpu(cdx, size_t(N) * C), gdx.values(), kBF16);
    report("bf16 cuBLASLt linear dweight (fp32 out)", from_cpu(cdw, size_t(OC) * C), gdw.values(), 1e-4);
  }
}

}  // namespace

int main() {
  try {
    cuda::DeviceInfo info = cuda::select_gpu(cuda::local_rank_from_env());
    std::printf("GPU %d: %s (sm_%d%d, %d SMs, %.1f GiB)\n", info.index, info.name.c_str(), info.major, info.minor,
                info.multiprocessors, double(info.total_bytes) / (1 << 30));
    auto cpu = kernels::make_cpu_kernels();
    cuda::CudaKernels gpu(info.index);
    std::printf("-- fp32: CudaKernels vs CpuKernels (the engine's kernel interface)\n");
    fp32_checks(*cpu, gpu);
    std::printf("-- bf16: mixed-precision kernels vs the CPU fp32 path on bf16-rounded inputs\n");
    bf16_checks(*cpu);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_kernel_check: %s\n", e.what());
    return 2;
  }
  std::printf("%s: %d check(s) failed\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
