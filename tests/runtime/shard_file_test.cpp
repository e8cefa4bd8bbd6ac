// The shard file writer (runtime/checkpoint/shard_file.h): the same bytes and checksums whether it
// writes with O_DIRECT or through the page cache, large runs straight from the caller's memory,
// and a file system that refuses O_DIRECT (at the open or at a write) written through the cache.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "runtime/checkpoint/checksum.h"
#include "runtime/checkpoint/shard_file.h"

using namespace trident;
using checkpoint::ShardFile;
namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("trident_shard_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::vector<char> read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// What the writer asked of the system (function pointers: no captures, so file-level state).
struct Call {
  const void* from;
  size_t n;
  off_t offset;
  bool direct;
};
std::vector<Call> calls;
bool refuse_direct_open = false, refuse_direct_write = false;

int recording_open(const char* path, int flags, mode_t mode) {
  if (refuse_direct_open && (flags & O_DIRECT)) {
    errno = EINVAL;  // as a file system without O_DIRECT answers
    return -1;
  }
  return ::open(path, flags, mode);
}

ssize_t recording_pwrite(int fd, const void* bytes, size_t n, off_t offset) {
  const bool direct = (::fcntl(fd, F_GETFL) & O_DIRECT) != 0;
  calls.push_back({bytes, n, offset, direct});
  if (refuse_direct_write && direct) {
    errno = EINVAL;  // took O_DIRECT at the open, refuses the write
    return -1;
  }
  return ::pwrite(fd, bytes, n, offset);
}

// Blocks of every kind: small ones, a large aligned one, a large one off alignment, one whose
// bounce-buffered head leaves the file off a block boundary, one over a piece, an odd tail.
struct Blocks {
  char* memory;  // kAlign-aligned
  std::vector<std::pair<size_t, size_t>> at;  // offset in memory, bytes
  std::vector<char> expected;
  Blocks() {
    const size_t total = size_t(40) << 20;
    memory = static_cast<char*>(std::aligned_alloc(ShardFile::kAlign, total));
    for (size_t i = 0; i < total; ++i) memory[i] = char(i * 131 + i / 4099);
    at = {{0, 100},                     // small: bounce buffer, file now off a block boundary
          {4096, 3 << 20},              // large, aligned in memory, but the file is not
          {(8 << 20) + 4, (5 << 19) + 3},  // large, off alignment in memory
          {12 << 20, 4096 - 100 - 3 - (5 << 19) % 4096},  // brings the file back to a block boundary
          {16 << 20, (9 << 20) + 4096},  // aligned both: straight from memory, over a piece
          {28 << 20, 12},                // small again
          {32 << 20, (2 << 20) + 77}};   // the file's odd tail
    for (auto [o, n] : at) expected.insert(expected.end(), memory + o, memory + o + n);
  }
  ~Blocks() { std::free(memory); }
};

// Writes the blocks to `path`; checks the file and every block's checksum.
void write_and_check(const Blocks& b, const std::string& path, bool& direct_at_the_end) {
  calls.clear();
  ShardFile f(path, {recording_open, recording_pwrite});
  ASSERT_TRUE(f.ok()) << std::strerror(errno);
  for (auto [o, n] : b.at) {
    uint32_t crc = 1;
    ASSERT_TRUE(f.append(b.memory + o, n, crc)) << std::strerror(errno);
    EXPECT_EQ(crc, checkpoint::crc32c(b.memory + o, n)) << "block at " << o;
  }
  direct_at_the_end = f.direct();
  ASSERT_TRUE(f.finish()) << std::strerror(errno);
  EXPECT_EQ(f.bytes(), int64_t(b.expected.size()));
  const std::vector<char> got = read_all(path);
  ASSERT_EQ(got.size(), b.expected.size());
  EXPECT_TRUE(got == b.expected) << "the file's bytes differ from the blocks'";
  fs::remove(path);
}

bool writes_from(const Blocks& b, size_t offset) {
  for (const Call& c : calls)
    if (c.from == b.memory + offset) return true;
  return false;
}

}  // namespace

TEST(ShardFile, direct_writes_give_the_blocks_bytes_large_runs_straight_from_memory_and_no_small_write) {
  Blocks b;
  refuse_direct_open = refuse_direct_write = false;
  bool direct = false;
  write_and_check(b, temp_path("direct.bin"), direct);
  if (calls.empty() || !calls.front().direct) GTEST_SKIP() << "this temporary folder's file system refuses O_DIRECT";
  EXPECT_TRUE(direct);
  for (const Call& c : calls) {
    EXPECT_TRUE(c.direct);
    EXPECT_EQ(c.n % ShardFile::kAlign, 0u);
    EXPECT_EQ(size_t(c.offset) % ShardFile::kAlign, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(c.from) % ShardFile::kAlign, 0u);
  }
  EXPECT_TRUE(writes_from(b, 16 << 20)) << "the aligned 9 MiB block was copied, not written from its memory";
  // 43 MiB in kPiece (8 MiB) writes or fewer, never one per small block.
  EXPECT_LE(calls.size(), 12u);
}

TEST(ShardFile, a_file_system_that_refuses_o_direct_at_the_open_is_written_through_the_page_cache) {
  Blocks b;
  refuse_direct_open = true;
  refuse_direct_write = false;
  bool direct = true;
  write_and_check(b, temp_path("open.bin"), direct);
  refuse_direct_open = false;
  EXPECT_FALSE(direct);
  for (const Call& c : calls) EXPECT_FALSE(c.direct);
  EXPECT_TRUE(writes_from(b, 4096)) << "a large block through the page cache is written from its memory";
}

TEST(ShardFile, a_file_system_that_refuses_a_direct_write_goes_on_through_the_page_cache) {
  Blocks b;
  refuse_direct_open = false;
  refuse_direct_write = true;
  bool direct = true;
  write_and_check(b, temp_path("write.bin"), direct);
  refuse_direct_write = false;
  if (calls.empty() || !calls.front().direct) GTEST_SKIP() << "this temporary folder's file system refuses O_DIRECT";
  EXPECT_FALSE(direct);
  EXPECT_FALSE(calls.back().direct);
}

TEST(ShardFile, a_failing_write_is_reported_with_its_errno) {
  const std::string path = temp_path("full.bin");
  ShardFile f(path, {recording_open, [](int, const void*, size_t, off_t) -> ssize_t {
                       errno = ENOSPC;
                       return -1;
                     }});
  ASSERT_TRUE(f.ok());
  std::vector<char> bytes(size_t(3) << 20, 'x');
  uint32_t crc = 0;
  errno = 0;
  const bool appended = f.append(bytes.data(), bytes.size(), crc) && f.finish();
  EXPECT_FALSE(appended);
  EXPECT_EQ(errno, ENOSPC);
  fs::remove(path);
}
