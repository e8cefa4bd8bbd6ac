// The bytes of one shard file, appended in order and made durable, at the disk's speed.
//
// Written with O_DIRECT where the file system takes it: the disk reads the bytes straight from
// the caller's memory (the trainer's buffers or the save's snapshot), with no copy into the page
// cache. On this project's VMs that copy, and the fresh page-cache memory it needs, cost a core
// for longer than the disk took (buffered 0.9-3.9 s against direct 0.8-1.7 s for 608 MB under
// load), while training wants the cores. Direct writes need the memory address, the file offset
// and the length aligned (kAlign covers every device's logical block): the aligned middle of a
// large block goes straight from the caller's memory in kPiece writes; small blocks, unaligned
// heads and tails are gathered in an aligned bounce buffer and written with it, so there is no
// small write. The checksum of each piece is computed just before its write (one pass over the
// bytes). Where the file system refuses O_DIRECT (the open or a write says EINVAL) the file is
// written through the page cache instead, the same bytes. finish() writes the last partial block
// (padded, then the file cut to its size) and syncs the file once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <sys/types.h>

namespace trident::checkpoint {

class ShardFile {
 public:
  // The system calls it makes (tests give failing ones: a file system that refuses O_DIRECT).
  struct Io {
    int (*open)(const char* path, int flags, mode_t mode);
    ssize_t (*pwrite)(int fd, const void* bytes, size_t n, off_t offset);
  };
  static Io system_io();

  static constexpr size_t kAlign = 4096;            // address, offset and length of a direct write
  static constexpr size_t kPiece = size_t(8) << 20;  // one write (and its checksum)
  static constexpr size_t kDirectMin = size_t(1) << 20;  // smaller blocks go through the bounce buffer

  // Creates (truncates) `path`. False with errno set when it cannot (ok() then is false too).
  explicit ShardFile(const std::string& path, Io io = system_io());
  ~ShardFile();
  ShardFile(const ShardFile&) = delete;
  ShardFile& operator=(const ShardFile&) = delete;

  bool ok() const { return fd_ >= 0; }
  // Appends n bytes; `crc` receives their CRC-32C. False with errno set on an I/O error.
  bool append(const void* bytes, size_t n, uint32_t& crc);
  // Writes what is left, cuts the file to its size, syncs and closes it. False with errno set.
  bool finish();
  int64_t bytes() const { return bytes_; }
  bool direct() const { return direct_; }  // still writing with O_DIRECT (not fallen back)

 private:
  bool write_at(const char* p, size_t n, off_t offset);  // whole, retrying; falls back on EINVAL
  bool flush_bounce(bool final);
  Io io_;
  int fd_ = -1;
  bool direct_ = false;
  char* bounce_ = nullptr;  // kPiece bytes, kAlign-aligned
  size_t held_ = 0;         // bytes in the bounce buffer, which go at written_
  off_t written_ = 0;       // bytes on their way to the file before the bounce buffer's
  int64_t bytes_ = 0;       // appended
};

}  // namespace trident::checkpoint
