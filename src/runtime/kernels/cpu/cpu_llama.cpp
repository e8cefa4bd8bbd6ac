// Llama's blocks on the CPU: RMSNorm, SwiGLU and rotary position embeddings (OpenMP loops the
// compiler vectorises; the RMSNorm weight gradient is reduced per thread, then in thread order,
// so it is deterministic for a given thread count).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/kernels/cpu/fast_math.h"

namespace trident::kernels {

void CpuKernels::rmsnorm_forward(const Tensor& out_t, float* rstd, const Tensor& inp_t, const Tensor& weight_t,
                                 int64_t N, int64_t C, float eps) {
  float* out = f32_data(out_t, "rmsnorm_forward", size_t(N * C));
  const float* inp = f32_data(inp_t, "rmsnorm_forward", size_t(N * C));
  const float* weight = f32_data(weight_t, "rmsnorm_forward", size_t(C));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const float* x = inp + i * C;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < C; ++c) ss += x[c] * x[c];
    const float r = 1.0f / std::sqrt(ss / float(C) + eps);
    float* o = out + i * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) o[c] = x[c] * r * weight[c];
    rstd[i] = r;
  }
}

void CpuKernels::rmsnorm_backward(const Tensor& dinp_t, float* dweight, const Tensor& dout_t, const Tensor& inp_t,
                                  const Tensor& weight_t, const float* rstd, int64_t N, int64_t C) {
  float* dinp = f32_data(dinp_t, "rmsnorm_backward", size_t(N * C));
  const float* dout = f32_data(dout_t, "rmsnorm_backward", size_t(N * C));
  const float* inp = f32_data(inp_t, "rmsnorm_backward", size_t(N * C));
  const float* weight = f32_data(weight_t, "rmsnorm_backward", size_t(C));
  const int nt = threads_;
  std::vector<float> partial(size_t(nt) * C, 0.0f);
#pragma omp parallel num_threads(nt)
  {
    float* dw = partial.data() + size_t(omp_get_thread_num()) * C;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < N; ++i) {
      const float* x = inp + i * C;
      const float* dy = dout + i * C;
      float* dx = dinp + i * C;
      const float r = rstd[i];
      // y = x * r * w: dx = r * (g - x * r^2 * mean(g * x)), g = dy * w.
      float gx = 0.0f;
#pragma omp simd reduction(+ : gx)
      for (int64_t c = 0; c < C; ++c) gx += dy[c] * weight[c] * x[c];
      const float k = r * r * r * gx / float(C);
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        dx[c] += r * dy[c] * weight[c] - k * x[c];
        dw[c] += dy[c] * x[c] * r;
      }
    }
  }
  for (int t = 0; t < nt; ++t)
    for (int64_t c = 0; c < C; ++c) dweight[c] += partial[size_t(t) * C + c];
}

void CpuKernels::head_rmsnorm_forward(const Tensor& x_t, const Tensor& saved_t, float* rstd, const Tensor& weight_t,
                                      int64_t N, int64_t heads, int64_t hd, int64_t row, float eps) {
  float* x = f32_data(x_t, "head_rmsnorm_forward", size_t((N - 1) * row + heads * hd));
  float* saved = f32_data(saved_t, "head_rmsnorm_forward", size_t(N * heads * hd));
  const float* weight = f32_data(weight_t, "head_rmsnorm_forward", size_t(hd));
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + n * row + h * hd;
      float* keep = saved + (n * heads + h) * hd;
      float ss = 0.0f;
      for (int64_t d = 0; d < hd; ++d) ss += v[d] * v[d], keep[d] = v[d];
      const float r = 1.0f / std::sqrt(ss / float(hd) + eps);
      for (int64_t d = 0; d < hd; ++d) v[d] = v[d] * r * weight[d];
      rstd[n * heads + h] = r;
    }
}

void CpuKernels::head_rmsnorm_backward(const Tensor& dx_t, float* dweight, const Tensor& saved_t,
                                       const Tensor& weight_t, const float* rstd, int64_t N, int64_t heads, int64_t hd,
                                       int64_t row) {
  float* dx = f32_data(dx_t, "head_rmsnorm_backward", size_t((N - 1) * row + heads * hd));
  const float* saved = f32_data(saved_t, "head_rmsnorm_backward", size_t(N * heads * hd));
  const float* weight = f32_data(weight_t, "head_rmsnorm_backward", size_t(hd));
  const int nt = threads_;
  std::vector<float> partial(size_t(nt) * hd, 0.0f);  // weight gradient per thread, summed in thread order
#pragma omp parallel num_threads(nt)
  {
    float* dw = partial.data() + size_t(omp_get_thread_num()) * hd;
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < heads; ++h) {
        float* dy = dx + n * row + h * hd;
        const float* v = saved + (n * heads + h) * hd;
        const float r = rstd[n * heads + h];
        float gx = 0.0f;  // as rmsnorm_backward: dx = r g - r^3 mean(g x) x, g = dy w
        for (int64_t d = 0; d < hd; ++d) gx += dy[d] * weight[d] * v[d];
        const float k = r * r * r * gx / float(hd);
        for (int64_t d = 0; d < hd; ++d) {
          dw[d] += dy[d] * v[d] * r;
          dy[d] = r * dy[d] * weight[d] - k * v[d];
        }
      }
  }
  for (int t = 0; t < nt; ++t)
    for (int64_t d = 0; d < hd; ++d) dweight[d] += partial[size_t(t) * hd + d];
}

void CpuKernels::swiglu_forward(const Tensor& out_t, const Tensor& gate_up_t, int64_t N, int64_t F) {
  float* out = f32_data(out_t, "swiglu_forward", size_t(N * F));
  const float* gu = f32_data(gate_up_t, "swiglu_forward", size_t(N * 2 * F));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const float* g = gu + i * 2 * F;
    const float* u = g + F;
    float* o = out + i * F;
#pragma omp simd
    for (int64_t j = 0; j < F; ++j) {
      // The sigmoid first, then products: g / (1 + e) x u vectorises to twice the divisions (3x slower).
      const float s = 1.0f / (1.0f + fast_exp(-g[j]));
      o[j] = g[j] * s * u[j];
    }
  }
}

void CpuKernels::swiglu_backward(const Tensor& dgate_up_t, const Tensor& gate_up_t, const Tensor& dout_t, int64_t N,
                                 int64_t F) {
  float* dgu = f32_data(dgate_up_t, "swiglu_backward", size_t(N * 2 * F));
  const float* gu = f32_data(gate_up_t, "swiglu_backward", size_t(N * 2 * F));
  const float* dout = f32_data(dout_t, "swiglu_backward", size_t(N * F));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const float* g = gu + i * 2 * F;
    const float* u = g + F;
    const float* dy = dout + i * F;
    float* dg = dgu + i * 2 * F;
    float* du = dg + F;
#pragma omp simd
    for (int64_t j = 0; j < F; ++j) {
      const float s = 1.0f / (1.0f + fast_exp(-g[j]));  // silu(g) = g s, silu'(g) = s (1 + g (1 - s))
      du[j] = dy[j] * g[j] * s;
      dg[j] = dy[j] * u[j] * s * (1.0f + g[j] * (1.0f - s));
    }
  }
}

// GPT-OSS's unit: g = min(gate, limit), u = clamp(up, -limit, limit), out = (u + 1) g sigmoid(1.702 g).
void CpuKernels::swiglu_oss_forward(const Tensor& out_t, const Tensor& gate_up_t, int64_t N, int64_t F, float limit) {
  float* out = f32_data(out_t, "swiglu_oss_forward", size_t(N * F));
  const float* gu = f32_data(gate_up_t, "swiglu_oss_forward", size_t(N * 2 * F));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const float* gi = gu + i * 2 * F;
    const float* ui = gi + F;
    float* o = out + i * F;
#pragma omp simd
    for (int64_t j = 0; j < F; ++j) {
      const float g = std::min(gi[j], limit), u = std::min(std::max(ui[j], -limit), limit);
      const float s = 1.0f / (1.0f + fast_exp(-1.702f * g));
      o[j] = (u + 1.0f) * (g * s);
    }
  }
}

// No gradient through a clamped value (torch.clamp's backward: the bounds themselves pass).
void CpuKernels::swiglu_oss_backward(const Tensor& dgate_up_t, const Tensor& gate_up_t, const Tensor& dout_t, int64_t N,
                                     int64_t F, float limit) {
  float* dgu = f32_data(dgate_up_t, "swiglu_oss_backward", size_t(N * 2 * F));
  const float* gu = f32_data(gate_up_t, "swiglu_oss_backward", size_t(N * 2 * F));
  const float* dout = f32_data(dout_t, "swiglu_oss_backward", size_t(N * F));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const float* gi = gu + i * 2 * F;
    const float* ui = gi + F;
    const float* dy = dout + i * F;
    float* dg = dgu + i * 2 * F;
    float* du = dg + F;
#pragma omp simd
    for (int64_t j = 0; j < F; ++j) {
      const float g = std::min(gi[j], limit), u = std::min(std::max(ui[j], -limit), limit);
      const float s = 1.0f / (1.0f + fast_exp(-1.702f * g));  // d/dg g s(a g) = s (1 + a g (1 - s))
      const float dgv = dy[j] * (u + 1.0f) * s * (1.0f + 1.702f * g * (1.0f - s));
      const float duv = dy[j] * g * s;
      dg[j] = gi[j] <= limit ? dgv : 0.0f;
      du[j] = ui[j] >= -limit && ui[j] <= limit ? duv : 0.0f;
    }
  }
}

namespace {
// Rotates `seqs` runs of T tokens (run b starting at x + b * T * row), token t of a run at
// position first_position + t.
void rotate(float* x, int64_t seqs, int64_t T, int64_t heads, int64_t hd, int64_t row, const RopeFreq& freq,
            bool inverse, int64_t first_position) {
  const int64_t half = hd / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv_freq[size_t(i)] = float(rope_inv_freq<double>(freq, int(i), int(hd)));
  const float sign = inverse ? -1.0f : 1.0f;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < seqs; ++b)
    for (int64_t t = 0; t < T; ++t) {
      float* r = x + (b * T + t) * row;
      for (int64_t i = 0; i < half; ++i) {
        const double angle = double(first_position + t) * double(inv_freq[size_t(i)]);
        const float c = freq.attention * float(std::cos(angle)), s = sign * freq.attention * float(std::sin(angle));
        for (int64_t h = 0; h < heads; ++h) {
          float* p = r + h * hd + 2 * i;
          const float x0 = p[0], x1 = p[1];
          p[0] = x0 * c - x1 * s;
          p[1] = x0 * s + x1 * c;
        }
      }
    }
}
}  // namespace

void CpuKernels::rope(const Tensor& x_t, int64_t B, int64_t T, int64_t heads, int64_t hd, int64_t row,
                      const RopeFreq& freq, bool inverse) {
  float* x = f32_data(x_t, "rope", size_t((B * T - 1) * row + heads * hd));
  rotate(x, B, T, heads, hd, row, freq, inverse, 0);
}

void CpuKernels::rope_at(const Tensor& x_t, int64_t T, int64_t heads, int64_t hd, int64_t row,
                         const RopeFreq& freq, bool inverse, int64_t first_position) {
  float* x = f32_data(x_t, "rope_at", size_t((T - 1) * row + heads * hd));
  rotate(x, 1, T, heads, hd, row, freq, inverse, first_position);
}

}  // namespace trident::kernels
