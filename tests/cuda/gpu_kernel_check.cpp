// GPU check (needs a GPU; run by scripts/gpu-check.sh, not by ctest): every op of the kernel
// interface (runtime/kernels/ops.h) on CudaKernels against CpuKernels on the same random inputs,
// once with fp32 tensors and once with bf16 tensors on the GPU.
//  - fp32: a tolerance of a few fp32 roundings (different summation orders);
//  - bf16: the CPU computes in fp32 on the bf16-rounded inputs, the GPU in bf16 (fp32
//    accumulation); bf16 tolerances (8 bits of mantissa). fp32-only outputs of a bf16 op (weight
//    gradients, statistics) keep tighter tolerances.
// Prints one line per check (max abs error, error relative to the reference's max magnitude,
// tolerance) and exits 1 if any check fails.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_kernels.h"
#include "runtime/cuda/device.h"
#include "runtime/kernels/ops.h"

using namespace trident;
using kernels::DType;
using kernels::Kernels;
using kernels::Tensor;
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

// One tensor on both devices: fp32 on the CPU, `dtype` on the GPU (a bf16 tensor holds the
// rounded values, and the CPU copy is rounded the same way so both start equal).
struct Both {
  Kernels& cpu;
  Kernels& gpu;
  DType dtype;
  size_t n;
  float* c;
  float* g32;                  // fp32 staging on the GPU (the tensor itself when dtype is f32)
  float* graw = nullptr;       // bf16 storage
  Both(Kernels& cpu_, Kernels& gpu_, DType t, std::vector<float> init)
      : cpu(cpu_), gpu(gpu_), dtype(t), n(init.size()) {
    c = cpu.alloc(n);
    g32 = gpu.alloc(n);
    gpu.from_host(g32, init.data(), n);
    if (dtype == DType::BF16) {
      graw = gpu.alloc((n + 1) / 2);
      gpu.convert(G(), Tensor(g32, n));
      gpu.convert(Tensor(g32, n), G());  // the rounded values, for the CPU
      gpu.to_host(init.data(), g32, n);
    }
    cpu.from_host(c, init.data(), n);
  }
  Both(Kernels& cpu_, Kernels& gpu_, DType t, size_t count) : Both(cpu_, gpu_, t, std::vector<float>(count, 0.0f)) {}
  ~Both() {
    cpu.free(c, n);
    gpu.free(g32, n);
    if (graw) gpu.free(graw, (n + 1) / 2);
  }
  Tensor C() const { return {c, n}; }
  Tensor G() const { return dtype == DType::BF16 ? Tensor(graw, DType::BF16, n) : Tensor(g32, n); }
  std::vector<float> cpu_values() const {
    std::vector<float> v(n);
    cpu.to_host(v.data(), c, n);
    return v;
  }
  std::vector<float> gpu_values() const {
    if (dtype == DType::BF16) gpu.convert(Tensor(g32, n), G());
    std::vector<float> v(n);
    gpu.to_host(v.data(), g32, n);
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
  const double rel = max_abs / ref_max;
  const bool ok = finite && rel <= tol;
  if (!ok) ++failures;
  std::printf("%-4s %-52s max|diff| %.3e  rel %.3e  (tol %.0e, max|ref| %.3e)\n", ok ? "ok" : "FAIL", what.c_str(),
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

void gemm_checks(Kernels& cpu, Kernels& gpu) {
  // The fp32 product, every transpose combination, alpha/beta, leading dimensions > width.
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const int64_t M = 70, Nn = 50, K = 40, lda = (ta ? M : K) + 3, ldb = (tb ? K : Nn) + 5, ldc = Nn + 2;
      Both A(cpu, gpu, DType::F32, randn((ta ? K : M) * lda)), Bm(cpu, gpu, DType::F32, randn((tb ? Nn : K) * ldb)),
          Cm(cpu, gpu, DType::F32, randn(M * ldc));
      cpu.gemm(ta ? Trans::T : Trans::N, tb ? Trans::T : Trans::N, M, Nn, K, 0.7f, A.c, lda, Bm.c, ldb, 0.3f, Cm.c, ldc);
      gpu.gemm(ta ? Trans::T : Trans::N, tb ? Trans::T : Trans::N, M, Nn, K, 0.7f, A.g32, lda, Bm.g32, ldb, 0.3f,
               Cm.g32, ldc);
      check(std::string("f32 gemm ") + (ta ? "T" : "N") + (tb ? "T" : "N") + " alpha .7 beta .3", Cm, kF32);
    }
}

// Every typed op with activations of type t on the GPU.
void attention_checks(Kernels& cpu, Kernels& gpu, DType t, const std::string& p);

void typed_checks(Kernels& cpu, Kernels& gpu, DType t) {
  const std::string p = std::string(comm::dtype_name(t)) + " ";
  const double tol = t == DType::F32 ? kF32 : kBF16;
  const double tol_acc = t == DType::F32 ? kF32 : 1e-2;  // fp32 accumulations of bf16 inputs
  const DType f = DType::F32;
  const int64_t B = 2, T = 96, nh = 4, hd = 64, C = nh * hd, N = B * T, V = 1000;
  {
    Both inp(cpu, gpu, t, randn(N * C)), w(cpu, gpu, t, randn(3 * C * C, 0.05f)), b(cpu, gpu, t, randn(3 * C)),
        out(cpu, gpu, t, N * 3 * C), dout(cpu, gpu, t, randn(N * 3 * C)), dinp(cpu, gpu, t, N * C),
        dw(cpu, gpu, f, randn(3 * C * C)), db(cpu, gpu, f, randn(3 * C));
    cpu.linear_forward(out.C(), inp.C(), w.C(), b.C(), N, C, 3 * C);
    gpu.linear_forward(out.G(), inp.G(), w.G(), b.G(), N, C, 3 * C);
    check(p + "linear_forward (+bias)", out, tol);
    cpu.linear_backward(dinp.C(), dw.c, db.c, dout.C(), inp.C(), w.C(), N, C, 3 * C);
    gpu.linear_backward(dinp.G(), dw.g32, db.g32, dout.G(), inp.G(), w.G(), N, C, 3 * C);
    check(p + "linear_backward dinp", dinp, tol);
    check(p + "linear_backward dweight (f32 +=)", dw, tol_acc);
    check(p + "linear_backward dbias (f32 +=)", db, tol_acc);
  }
  {
    const size_t n = 100003;
    Both a(cpu, gpu, t, randn(n)), b(cpu, gpu, t, randn(n)), out(cpu, gpu, t, n), dout(cpu, gpu, t, randn(n));
    cpu.add(out.C(), a.C(), b.C()), gpu.add(out.G(), a.G(), b.G());
    check(p + "add", out, t == f ? 0 : kBF16);
    cpu.add_inplace(out.C(), a.C()), gpu.add_inplace(out.G(), a.G());
    check(p + "add_inplace", out, t == f ? 0 : kBF16);
    cpu.gelu_forward(out.C(), a.C()), gpu.gelu_forward(out.G(), a.G());
    check(p + "gelu_forward (tanh)", out, tol);
    cpu.gelu_backward(out.C(), a.C(), dout.C()), gpu.gelu_backward(out.G(), a.G(), dout.G());
    check(p + "gelu_backward", out, tol);
    Both conv(cpu, gpu, f, n);
    gpu.convert(Tensor(conv.g32, n), a.G());
    report(p + "convert to f32", a.cpu_values(), conv.gpu_values(), 0);
  }
  {
    Both inp(cpu, gpu, t, randn(N * C, 2.0f)), w(cpu, gpu, t, randn(C)), b(cpu, gpu, t, randn(C)),
        out(cpu, gpu, t, N * C), mean(cpu, gpu, f, N), rstd(cpu, gpu, f, N), dout(cpu, gpu, t, randn(N * C)),
        dinp(cpu, gpu, t, randn(N * C)), dw(cpu, gpu, f, randn(C)), db(cpu, gpu, f, randn(C));
    cpu.layernorm_forward(out.C(), mean.c, rstd.c, inp.C(), w.C(), b.C(), N, C, 1e-5f);
    gpu.layernorm_forward(out.G(), mean.g32, rstd.g32, inp.G(), w.G(), b.G(), N, C, 1e-5f);
    check(p + "layernorm_forward out", out, tol);
    check(p + "layernorm_forward rstd (f32)", rstd, t == f ? kF32 : 1e-4);
    cpu.layernorm_backward(dinp.C(), dw.c, db.c, dout.C(), inp.C(), w.C(), mean.c, rstd.c, N, C);
    gpu.layernorm_backward(dinp.G(), dw.g32, db.g32, dout.G(), inp.G(), w.G(), mean.g32, rstd.g32, N, C);
    check(p + "layernorm_backward dinp (+=)", dinp, tol);
    check(p + "layernorm_backward dweight (f32 +=)", dw, tol_acc);
    check(p + "layernorm_backward dbias (f32 +=)", db, tol_acc);
  }
  attention_checks(cpu, gpu, t, p + "flash ");
  {  // Llama's blocks
    const int64_t F = 160;
    Both inp(cpu, gpu, t, randn(N * C, 2.0f)), w(cpu, gpu, t, randn(C)), out(cpu, gpu, t, N * C),
        rstd(cpu, gpu, f, N), dout(cpu, gpu, t, randn(N * C)), dinp(cpu, gpu, t, randn(N * C)),
        dw(cpu, gpu, f, randn(C));
    cpu.rmsnorm_forward(out.C(), rstd.c, inp.C(), w.C(), N, C, 1e-6f);
    gpu.rmsnorm_forward(out.G(), rstd.g32, inp.G(), w.G(), N, C, 1e-6f);
    check(p + "rmsnorm_forward out", out, tol);
    check(p + "rmsnorm_forward rstd (f32)", rstd, t == f ? kF32 : 1e-4);
    cpu.rmsnorm_backward(dinp.C(), dw.c, dout.C(), inp.C(), w.C(), rstd.c, N, C);
    gpu.rmsnorm_backward(dinp.G(), dw.g32, dout.G(), inp.G(), w.G(), rstd.g32, N, C);
    check(p + "rmsnorm_backward dinp (+=)", dinp, tol);
    check(p + "rmsnorm_backward dweight (f32 +=)", dw, tol_acc);
    Both gu(cpu, gpu, t, randn(N * 2 * F, 2.0f)), act(cpu, gpu, t, N * F), dact(cpu, gpu, t, randn(N * F)),
        dgu(cpu, gpu, t, N * 2 * F);
    cpu.swiglu_forward(act.C(), gu.C(), N, F), gpu.swiglu_forward(act.G(), gu.G(), N, F);
    check(p + "swiglu_forward", act, tol);
    cpu.swiglu_backward(dgu.C(), gu.C(), dact.C(), N, F), gpu.swiglu_backward(dgu.G(), gu.G(), dact.G(), N, F);
    check(p + "swiglu_backward", dgu, tol);
    // GPT-OSS's clamped unit at a limit inside the inputs' spread (|N(0, 2)| > 1.5 often), so the clamp's
    // zero gradient and the unclamped path are both compared.
    cpu.swiglu_oss_forward(act.C(), gu.C(), N, F, 1.5f), gpu.swiglu_oss_forward(act.G(), gu.G(), N, F, 1.5f);
    check(p + "swiglu_oss_forward (clamped at 1.5)", act, tol);
    cpu.swiglu_oss_backward(dgu.C(), gu.C(), dact.C(), N, F, 1.5f);
    gpu.swiglu_oss_backward(dgu.G(), gu.G(), dact.G(), N, F, 1.5f);
    check(p + "swiglu_oss_backward (clamped at 1.5)", dgu, tol);
    const int64_t row = 3 * C;  // q heads then k/v, as a qkv row
    Both qkv(cpu, gpu, t, randn(N * row));
    const kernels::RopeFreq plain{10000.0f};
    cpu.rope(qkv.C(), B, T, nh, hd, row, plain, false), gpu.rope(qkv.G(), B, T, nh, hd, row, plain, false);
    check(p + "rope (q heads of a qkv row)", qkv, t == f ? 1e-5 : kBF16);
    cpu.rope(qkv.C(), B, T, nh, hd, row, plain, true), gpu.rope(qkv.G(), B, T, nh, hd, row, plain, true);
    check(p + "rope inverse", qkv, t == f ? 1e-5 : kBF16);
    // Llama 3.1's scaling over a short original context, so hd's pairs fall in all three bands.
    const kernels::RopeFreq llama3{500000.0f, true, 8.0f, 1.0f, 4.0f, 16.0f};
    cpu.rope(qkv.C(), B, T, nh, hd, row, llama3, false), gpu.rope(qkv.G(), B, T, nh, hd, row, llama3, false);
    check(p + "rope (llama3 scaling)", qkv, t == f ? 1e-5 : kBF16);
    // YaRN: the ramp over pairs 1..3 (extrapolated, blended, interpolated x 32) and GPT-OSS's
    // attention factor 1.347 on cos and sin, forward and its scaled backward.
    kernels::RopeFreq yarn{150000.0f};
    yarn.yarn = true, yarn.factor = 32.0f, yarn.ramp_low = 1.0f, yarn.ramp_high = 3.5f, yarn.attention = 1.3465736f;
    cpu.rope(qkv.C(), B, T, nh, hd, row, yarn, false), gpu.rope(qkv.G(), B, T, nh, hd, row, yarn, false);
    check(p + "rope (yarn)", qkv, t == f ? 1e-5 : kBF16);
    cpu.rope(qkv.C(), B, T, nh, hd, row, yarn, true), gpu.rope(qkv.G(), B, T, nh, hd, row, yarn, true);
    check(p + "rope (yarn) backward", qkv, t == f ? 1e-5 : kBF16);
    const int64_t nkv = nh / 2;  // two query heads per kv head
    Both q(cpu, gpu, t, randn(N * C)), kv(cpu, gpu, t, randn(N * 2 * nkv * hd)), dq(cpu, gpu, t, N * C),
        dkv(cpu, gpu, t, N * 2 * nkv * hd);
    cpu.gqa_expand(qkv.C(), q.C(), kv.C(), N, nh, nkv, hd), gpu.gqa_expand(qkv.G(), q.G(), kv.G(), N, nh, nkv, hd);
    check(p + "gqa_expand (kv heads repeated)", qkv, 0);
    cpu.gqa_reduce(dq.C(), dkv.C(), qkv.C(), N, nh, nkv, hd), gpu.gqa_reduce(dq.G(), dkv.G(), qkv.G(), N, nh, nkv, hd);
    check(p + "gqa_reduce dq", dq, 0);
    check(p + "gqa_reduce dkv (group sums)", dkv, t == f ? kF32 : kBF16);
    // QK-norm (Qwen3): per-head RMSNorm of the key heads at the start of each kv row, in place.
    Both saved(cpu, gpu, t, N * nkv * hd), hrstd(cpu, gpu, f, N * nkv), hw(cpu, gpu, t, randn(hd)),
        hdw(cpu, gpu, f, randn(hd));
    cpu.head_rmsnorm_forward(kv.C(), saved.C(), hrstd.c, hw.C(), N, nkv, hd, 2 * nkv * hd, 1e-6f);
    gpu.head_rmsnorm_forward(kv.G(), saved.G(), hrstd.g32, hw.G(), N, nkv, hd, 2 * nkv * hd, 1e-6f);
    check(p + "head_rmsnorm_forward (in place)", kv, tol);
    check(p + "head_rmsnorm_forward saved input", saved, 0);
    check(p + "head_rmsnorm_forward rstd (f32)", hrstd, t == f ? kF32 : 1e-4);
    cpu.head_rmsnorm_backward(kv.C(), hdw.c, saved.C(), hw.C(), hrstd.c, N, nkv, hd, 2 * nkv * hd);
    gpu.head_rmsnorm_backward(kv.G(), hdw.g32, saved.G(), hw.G(), hrstd.g32, N, nkv, hd, 2 * nkv * hd);
    check(p + "head_rmsnorm_backward dx (in place)", kv, tol);
    check(p + "head_rmsnorm_backward dweight (f32 +=)", hdw, tol_acc);
    // Multi-head latent attention's head blocks: a strided copy, a broadcast of one block to every
    // head, the heads summed into one block (accumulating), and zeros.
    const int64_t bw = 3;
    Both blk(cpu, gpu, t, randn(N * (nh * bw + 2))), one(cpu, gpu, t, randn(N * bw));
    cpu.copy_heads(blk.C(), nh * bw + 2, bw, qkv.C(), row, hd, N, nh, bw, false);
    gpu.copy_heads(blk.G(), nh * bw + 2, bw, qkv.G(), row, hd, N, nh, bw, false);
    check(p + "copy_heads (strided heads)", blk, 0);
    // Scaled (MLA's queries by YaRN's softmax multiplier, DeepSeek-V3's 1.874).
    cpu.copy_heads(blk.C(), nh * bw + 2, bw, qkv.C(), row, hd, N, nh, bw, false, 1.8738f);
    gpu.copy_heads(blk.G(), nh * bw + 2, bw, qkv.G(), row, hd, N, nh, bw, false, 1.8738f);
    check(p + "copy_heads (scaled)", blk, t == f ? kF32 : kBF16);
    cpu.copy_heads(qkv.C(), row, hd, one.C(), bw, 0, N, nh, bw, false);
    gpu.copy_heads(qkv.G(), row, hd, one.G(), bw, 0, N, nh, bw, false);
    check(p + "copy_heads (one block broadcast)", qkv, 0);
    cpu.copy_heads(one.C(), bw, 0, blk.C(), nh * bw + 2, bw, N, nh, bw, true);
    gpu.copy_heads(one.G(), bw, 0, blk.G(), nh * bw + 2, bw, N, nh, bw, true);
    check(p + "copy_heads (heads summed, accumulated)", one, t == f ? kF32 : kBF16);
    cpu.copy_heads(qkv.C(), row, hd, Tensor(), 0, 0, N, nh, 2, false);
    gpu.copy_heads(qkv.G(), row, hd, Tensor(), 0, 0, N, nh, 2, false);
    check(p + "copy_heads (zeros)", qkv, 0);
  }
  {
    auto ids = random_ids(N, int(V));
    const int64_t v_offset = 300, V_local = 400;  // a tensor-parallel shard of the vocabulary
    Both wte(cpu, gpu, t, randn(V_local * C)), wpe(cpu, gpu, t, randn(T * C)), out(cpu, gpu, t, N * C),
        dout(cpu, gpu, t, randn(N * C)), dwte(cpu, gpu, f, randn(V_local * C)), dwpe(cpu, gpu, f, randn(T * C));
    cpu.embedding_forward(out.C(), ids.data(), wte.C(), N, C, v_offset, V_local);
    gpu.embedding_forward(out.G(), ids.data(), wte.G(), N, C, v_offset, V_local);  // host ids: staged
    check(p + "embedding_forward (vocab shard)", out, 0);
    cpu.add_positions(out.C(), wpe.C(), B, T, C), gpu.add_positions(out.G(), wpe.G(), B, T, C);
    check(p + "add_positions", out, t == f ? 0 : kBF16);
    cpu.embedding_backward(dwte.c, dout.C(), ids.data(), N, C, v_offset, V_local);
    gpu.embedding_backward(dwte.g32, dout.G(), ids.data(), N, C, v_offset, V_local);
    check(p + "embedding_backward (f32 +=)", dwte, kF32);
    cpu.positions_backward(dwpe.c, dout.C(), B, T, C), gpu.positions_backward(dwpe.g32, dout.G(), B, T, C);
    check(p + "positions_backward (f32 +=)", dwpe, kF32);
  }
  {
    // The last 5 columns are vocabulary padding: out of the softmax, zero gradient.
    const int64_t Vv = V - 5, v_offset = 0;
    auto targets = random_ids(N, int(Vv));
    Both logits(cpu, gpu, t, randn(N * V, 3.0f)), mx(cpu, gpu, f, N), se(cpu, gpu, f, N), tl(cpu, gpu, f, N),
        loss(cpu, gpu, f, N);
    cpu.xent_row_max(mx.c, logits.C(), N, V, Vv), gpu.xent_row_max(mx.g32, logits.G(), N, V, Vv);
    check(p + "xent_row_max", mx, 0);
    cpu.xent_sumexp_target(se.c, tl.c, logits.C(), mx.c, targets.data(), N, V, Vv, v_offset);
    gpu.xent_sumexp_target(se.g32, tl.g32, logits.G(), mx.g32, targets.data(), N, V, Vv, v_offset);
    check(p + "xent_sumexp_target sumexp", se, kF32 * 5);
    check(p + "xent_sumexp_target target logit", tl, 0);
    cpu.xent_losses(loss.c, se.c, mx.c, tl.c, N), gpu.xent_losses(loss.g32, se.g32, mx.g32, tl.g32, N);
    check(p + "xent_losses", loss, kF32 * 5);
    cpu.xent_backward_inplace(logits.C(), mx.c, se.c, targets.data(), 1.0f / N, N, V, Vv, v_offset);
    gpu.xent_backward_inplace(logits.G(), mx.g32, se.g32, targets.data(), 1.0f / N, N, V, Vv, v_offset);
    check(p + "xent_backward_inplace", logits, t == f ? kF32 * 5 : kBF16);
  }
}

void attention_checks(Kernels& cpu, Kernels& gpu, DType t, const std::string& p) {
  const DType f = DType::F32;
  const int64_t B = 2, nh = 4, hd = 64, C = nh * hd;
  for (int64_t Tt : {int64_t(96), int64_t(37)}) {  // a sequence that is not a multiple of the tiles
    const int64_t n = B * Tt;
    Both qkv(cpu, gpu, t, randn(n * 3 * C)), out(cpu, gpu, t, n * C), dout(cpu, gpu, t, randn(n * C)),
        dqkv(cpu, gpu, t, n * 3 * C);
    const size_t pc_n = cpu.attention_probs_size(B, Tt, nh), sc_n = cpu.attention_scratch_size(B, Tt, nh);
    const size_t pg_n = gpu.attention_probs_size(B, Tt, nh), sg_n = gpu.attention_scratch_size(B, Tt, nh);
    float *pc = cpu.alloc(pc_n), *sc = cpu.alloc(sc_n), *pg = gpu.alloc(pg_n), *sg = gpu.alloc(sg_n);
    cpu.attention_forward(out.C(), pc, qkv.C(), B, Tt, nh, hd);
    gpu.attention_forward(out.G(), pg, qkv.G(), B, Tt, nh, hd);
    check(p + "attention_forward T=" + std::to_string(Tt), out, t == f ? kF32 * 5 : kBF16);
    cpu.attention_backward(dqkv.C(), sc, dout.C(), qkv.C(), pc, out.C(), B, Tt, nh, hd);
    gpu.attention_backward(dqkv.G(), sg, dout.G(), qkv.G(), pg, out.G(), B, Tt, nh, hd);
    check(p + "attention_backward dqkv T=" + std::to_string(Tt), dqkv, t == f ? kF32 * 5 : 3 * kBF16);
    // GPT-OSS: a sliding window of 40 keys (crossing the 32-key tiles, and past the 37-token
    // sequence's start) and sinks (one logit per head); their gradient (f32 +=).
    Both sinks(cpu, gpu, t, randn(nh)), dsinks(cpu, gpu, f, nh);
    const Kernels::AttentionMask mc{40, sinks.C()}, mg{40, sinks.G()};
    const std::string w = " window 40 + sinks T=" + std::to_string(Tt);
    cpu.attention_forward(out.C(), pc, qkv.C(), B, Tt, nh, hd, mc);
    gpu.attention_forward(out.G(), pg, qkv.G(), B, Tt, nh, hd, mg);
    check(p + "attention_forward" + w, out, t == f ? kF32 * 5 : kBF16);
    cpu.attention_backward(dqkv.C(), sc, dout.C(), qkv.C(), pc, out.C(), B, Tt, nh, hd, mc, dsinks.c);
    gpu.attention_backward(dqkv.G(), sg, dout.G(), qkv.G(), pg, out.G(), B, Tt, nh, hd, mg, dsinks.g32);
    check(p + "attention_backward dqkv" + w, dqkv, t == f ? kF32 * 5 : 3 * kBF16);
    check(p + "attention_backward dsinks (f32 +=)" + w, dsinks, t == f ? kF32 * 5 : 3 * kBF16);
    cpu.free(pc, pc_n), cpu.free(sc, sc_n), gpu.free(pg, pg_n), gpu.free(sg, sg_n);
  }
}

void optimizer_checks(Kernels& cpu, Kernels& gpu) {
  const size_t n = 1 << 20;
  const DType f = DType::F32;
  Both p(cpu, gpu, f, randn(n)), g(cpu, gpu, f, randn(n)), m(cpu, gpu, f, n), v(cpu, gpu, f, n);
  double sc = cpu.sum_squares(g.c, n), sg = gpu.sum_squares(g.g32, n);
  report("f32 sum_squares", {float(sc)}, {float(sg)}, 1e-6);
  for (int t = 1; t <= 3; ++t) {
    cpu.adamw(p.c, g.c, m.c, v.c, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, t);
    gpu.adamw(p.g32, g.g32, m.g32, v.g32, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, t);
  }
  check("f32 adamw (3 steps) params", p, kF32);
  check("f32 adamw (3 steps) v", v, kF32);
  cpu.scale(p.c, 0.37f, n), gpu.scale(p.g32, 0.37f, n);
  check("f32 scale", p, kF32);
}

}  // namespace

int main() {
  try {
    cuda::DeviceInfo info = cuda::select_gpu(cuda::local_rank_from_env());
    std::printf("GPU %d: %s (sm_%d%d, %d SMs, %.1f GiB)\n", info.index, info.name.c_str(), info.major, info.minor,
                info.multiprocessors, double(info.total_bytes) / (1 << 30));
    auto cpu = kernels::make_cpu_kernels();
    cuda::CudaKernels gpu(info.index);
    std::printf("-- CudaKernels vs CpuKernels: fp32 products and optimizer\n");
    gemm_checks(*cpu, gpu);
    optimizer_checks(*cpu, gpu);
    cuda::CudaKernels matmul(info.index, cuda::Attention::Matmul);
    for (DType t : {DType::F32, DType::BF16}) {
      std::printf("-- CudaKernels (%s tensors) vs CpuKernels (f32)\n", comm::dtype_name(t));
      typed_checks(*cpu, gpu, t);
      attention_checks(*cpu, matmul, t, std::string(comm::dtype_name(t)) + " matmul ");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_kernel_check: %s\n", e.what());
    return 2;
  }
  std::printf("%s: %d check(s) failed\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
