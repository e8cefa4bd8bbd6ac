// Checksums of checkpoint data. CRC-32C (Castagnoli) is what checkpoints are written with: folded
// by carry-less multiplication (AVX-512 VPCLMULQDQ) at tens of GB/s, else the crc32 instruction
// at several, far above a disk; crc32c_combine joins the slices' (and pieces') checksums into the
// file's without a second pass over the bytes. FNV-1a 64 (one
// byte at a time, a few hundred MB/s) is what older checkpoints carry; the reader still checks it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace trident::checkpoint {

// CRC-32C of n bytes, continuing from `crc` (the checksum of what came before; 0 to start).
uint32_t crc32c(const void* bytes, size_t n, uint32_t crc = 0);
// CRC-32C of A followed by B from crc32c(A), crc32c(B) and B's length.
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t bytes_b);
std::string crc32c_hex(uint32_t crc);  // 8 lowercase hex digits, as manifests store it

constexpr uint64_t kFnv1aStart = 1469598103934665603ull;
// FNV-1a 64, continuing from `h`: the checksum of checkpoints written before CRC-32C.
uint64_t fnv1a64(const void* bytes, size_t n, uint64_t h = kFnv1aStart);
std::string fnv1a64_hex(uint64_t h);  // 16 lowercase hex digits

}  // namespace trident::checkpoint
