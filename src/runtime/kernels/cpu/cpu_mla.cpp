// Multi-head latent attention's strided head blocks on the CPU (semantics: Kernels::copy_heads):
// a summing copy (dst_head 0) adds the heads in order, so it is deterministic.
#include "runtime/kernels/cpu/cpu_kernels.h"

namespace trident::kernels {

namespace {
// Elements a strided view spans: its last row's last head's last column, plus one.
size_t span(int64_t rows, int64_t row, int64_t heads, int64_t head, int64_t cols) {
  return rows <= 0 || cols <= 0 ? 0 : size_t((rows - 1) * row + (heads - 1) * head + cols);
}
}  // namespace

void CpuKernels::copy_heads(const Tensor& dst_t, int64_t dst_row, int64_t dst_head, const Tensor& src_t,
                            int64_t src_row, int64_t src_head, int64_t rows, int64_t heads, int64_t cols,
                            bool accumulate, float scale) {
  const int64_t dst_heads = dst_head == 0 ? 1 : heads, summed = dst_head == 0 ? heads : 1;
  float* dst = f32_data(dst_t, "copy_heads", span(rows, dst_row, dst_heads, dst_head, cols));
  const float* src = src_t.empty() ? nullptr : f32_data(src_t, "copy_heads", span(rows, src_row, heads, src_head, cols));
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < dst_heads; ++h) {
      float* d = dst + r * dst_row + h * dst_head;
      for (int64_t c = 0; c < cols; ++c) {
        float v = 0.0f;
        if (src)
          for (int64_t k = 0; k < summed; ++k) v += src[r * src_row + (h + k) * src_head + c];
        d[c] = (accumulate ? d[c] : 0.0f) + scale * v;
      }
    }
}

}  // namespace trident::kernels
