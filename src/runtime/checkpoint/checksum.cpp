#include "runtime/checkpoint/checksum.h"

#include <array>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace trident::checkpoint {

namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // Castagnoli, reflected

std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ kPoly : c >> 1;
    t[i] = c;
  }
  return t;
}

// Without the instruction (not x86-64, or a CPU before SSE 4.2): a byte at a time.
uint32_t crc32c_table(const unsigned char* p, size_t n, uint32_t c) {
  static const std::array<uint32_t, 256> table = make_table();
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const unsigned char* p, size_t n, uint32_t c) {
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c64 = _mm_crc32_u64(c64, word);
  }
  uint32_t c32 = uint32_t(c64);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}
#endif

// GF(2) matrix times vector and matrix square (zlib's crc32_combine, with the Castagnoli polynomial).
uint32_t gf2_times(const uint32_t* mat, uint32_t vec) {
  uint32_t sum = 0;
  for (; vec; vec >>= 1, ++mat)
    if (vec & 1) sum ^= *mat;
  return sum;
}

void gf2_square(uint32_t* square, const uint32_t* mat) {
  for (int n = 0; n < 32; ++n) square[n] = gf2_times(mat, mat[n]);
}

#if defined(__x86_64__)
// Three streams at once: the instruction takes 3 cycles but starts one every cycle. The register
// after blocks A B C of kBlock bytes is shift(shift(crc(A)) ^ crc0(B)) ^ crc0(C), shift being
// the linear map of kBlock zero bytes (its 32 columns computed once).
constexpr size_t kBlock = 8192;

struct BlockShift {
  uint32_t column[32];
};

const BlockShift& block_shift() {
  static const BlockShift s = [] {
    BlockShift b{};
    const std::vector<unsigned char> zeros(kBlock, 0);
    for (int i = 0; i < 32; ++i) b.column[i] = crc32c_sse42(zeros.data(), kBlock, 1u << i);
    return b;
  }();
  return s;
}

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42_3way(const unsigned char* p, size_t n, uint32_t c) {
  const BlockShift& s = block_shift();
  for (; n >= 3 * kBlock; n -= 3 * kBlock, p += 3 * kBlock) {
    uint64_t a = c, b = 0, d = 0;
    for (size_t i = 0; i < kBlock; i += 8) {
      uint64_t wa, wb, wd;
      std::memcpy(&wa, p + i, 8);
      std::memcpy(&wb, p + kBlock + i, 8);
      std::memcpy(&wd, p + 2 * kBlock + i, 8);
      a = _mm_crc32_u64(a, wa);
      b = _mm_crc32_u64(b, wb);
      d = _mm_crc32_u64(d, wd);
    }
    c = gf2_times(s.column, gf2_times(s.column, uint32_t(a)) ^ uint32_t(b)) ^ uint32_t(d);
  }
  return crc32c_sse42(p, n, c);
}

// Carry-less multiplication folds 256 bytes per step (four 512-bit registers, four 128-bit lanes
// each), several times the crc32 instruction's rate. A 128-bit lane H of the message, T bits
// before the lane it folds into, is worth H(x) x^T mod P: with H = L x^64 + U (its two
// 64-bit halves, bit-reflected), that is L (x^(64+T) mod P) + U (x^T mod P), two carry-less
// products that land in the 128 bits of the later lane. The last lane left, followed by the
// tail, is finished with the crc32 instruction from a zero register; the starting register is
// XORed into the first 4 bytes (the same as starting from it).
struct Fold {
  uint64_t lo, hi;  // the operands for L and U
};

// x^e mod P, bit-reflected into the top half: a reflected carry-less product has one factor x
// too many, so the exponent is one less.
uint64_t fold_operand(int e) {
  uint64_t r = 1;
  for (int i = 1; i < e; ++i) {
    r <<= 1;
    if (r >> 32) r ^= (uint64_t(1) << 32) | 0x1EDC6F41u;  // Castagnoli, normal bit order
  }
  uint32_t reflected = 0;
  for (int i = 0; i < 32; ++i)
    if (r >> i & 1) reflected |= 1u << (31 - i);
  return uint64_t(reflected) << 32;
}

Fold fold_by(int bits) { return {fold_operand(64 + bits), fold_operand(bits)}; }

__attribute__((target("avx512f,avx512vl,avx512dq,vpclmulqdq,pclmul,sse4.2"))) inline __m512i broadcast(const Fold& f) {
  return _mm512_set4_epi64(int64_t(f.hi), int64_t(f.lo), int64_t(f.hi), int64_t(f.lo));
}

__attribute__((target("avx512f,avx512vl,avx512dq,vpclmulqdq,pclmul,sse4.2"))) inline __m512i fold512(__m512i h, __m512i k, __m512i next) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(h, k, 0x00), _mm512_clmulepi64_epi128(h, k, 0x11), next,
                                   0x96);  // a ^ b ^ c
}

__attribute__((target("avx512f,avx512vl,avx512dq,vpclmulqdq,pclmul,sse4.2"))) inline __m128i fold128(__m128i h, const Fold& f, __m128i next) {
  const __m128i k = _mm_set_epi64x(int64_t(f.hi), int64_t(f.lo));
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(h, k, 0x00), _mm_clmulepi64_si128(h, k, 0x11)), next);
}

__attribute__((target("avx512f,avx512vl,avx512dq,vpclmulqdq,pclmul,sse4.2"))) uint32_t crc32c_fold(const unsigned char* p, size_t n, uint32_t c) {
  if (n < 512) return crc32c_sse42_3way(p, n, c);
  static const Fold by2048 = fold_by(2048), by1536 = fold_by(1536), by1024 = fold_by(1024), by512 = fold_by(512),
                    by384 = fold_by(384), by256 = fold_by(256), by128 = fold_by(128);
  __m512i a0 = _mm512_loadu_si512(p), a1 = _mm512_loadu_si512(p + 64), a2 = _mm512_loadu_si512(p + 128),
          a3 = _mm512_loadu_si512(p + 192);
  a0 = _mm512_xor_si512(a0, _mm512_zextsi128_si512(_mm_cvtsi32_si128(int(c))));
  const __m512i k = broadcast(by2048);
  for (p += 256, n -= 256; n >= 256; n -= 256, p += 256) {
    a0 = fold512(a0, k, _mm512_loadu_si512(p));
    a1 = fold512(a1, k, _mm512_loadu_si512(p + 64));
    a2 = fold512(a2, k, _mm512_loadu_si512(p + 128));
    a3 = fold512(a3, k, _mm512_loadu_si512(p + 192));
  }
  a3 = fold512(a0, broadcast(by1536), a3);
  a3 = fold512(a1, broadcast(by1024), a3);
  a3 = fold512(a2, broadcast(by512), a3);
  __m128i x = _mm512_extracti64x2_epi64(a3, 3);
  x = fold128(_mm512_extracti64x2_epi64(a3, 0), by384, x);
  x = fold128(_mm512_extracti64x2_epi64(a3, 1), by256, x);
  x = fold128(_mm512_extracti64x2_epi64(a3, 2), by128, x);
  unsigned char last[16];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(last), x);
  return crc32c_sse42(p, n, crc32c_sse42(last, 16, 0));
}
#endif

}  // namespace

uint32_t crc32c(const void* bytes, size_t n, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  const uint32_t c = ~crc;
#if defined(__x86_64__)
  static const bool folding = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                              __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("vpclmulqdq") &&
                              __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.2");
  if (folding) return ~crc32c_fold(p, n, c);
  static const bool hardware = __builtin_cpu_supports("sse4.2");
  if (hardware) return ~crc32c_sse42_3way(p, n, c);
#endif
  return ~crc32c_table(p, n, c);
}

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t bytes_b) {
  if (bytes_b == 0) return crc_a;
  uint32_t even[32], odd[32];
  odd[0] = kPoly;  // the operator for one zero bit
  for (int n = 1; n < 32; ++n) odd[n] = 1u << (n - 1);
  gf2_square(even, odd);  // two zero bits
  gf2_square(odd, even);  // four
  // Apply len(B) zero bytes to crc_a, squaring the operator for each bit of the length.
  do {
    gf2_square(even, odd);
    if (bytes_b & 1) crc_a = gf2_times(even, crc_a);
    bytes_b >>= 1;
    if (bytes_b == 0) break;
    gf2_square(odd, even);
    if (bytes_b & 1) crc_a = gf2_times(odd, crc_a);
    bytes_b >>= 1;
  } while (bytes_b != 0);
  return crc_a ^ crc_b;
}

std::string crc32c_hex(uint32_t crc) { return fmt::format("{:08x}", crc); }

uint64_t fnv1a64(const void* bytes, size_t n, uint64_t h) {
  const auto* b = static_cast<const unsigned char*>(bytes);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

std::string fnv1a64_hex(uint64_t h) { return fmt::format("{:016x}", h); }

}  // namespace trident::checkpoint
