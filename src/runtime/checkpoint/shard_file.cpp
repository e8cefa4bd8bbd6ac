// One shard file written with O_DIRECT where it can be, else through the page cache (shard_file.h).
#include "runtime/checkpoint/shard_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "runtime/checkpoint/checksum.h"

namespace trident::checkpoint {

ShardFile::Io ShardFile::system_io() {
  return {[](const char* path, int flags, mode_t mode) { return ::open(path, flags, mode); }, ::pwrite};
}

ShardFile::ShardFile(const std::string& path, Io io) : io_(io) {
  const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  fd_ = io_.open(path.c_str(), flags | O_DIRECT, 0644);
  direct_ = fd_ >= 0;
  if (fd_ < 0 && errno == EINVAL) fd_ = io_.open(path.c_str(), flags, 0644);  // no O_DIRECT here
  if (fd_ < 0) return;
  bounce_ = static_cast<char*>(std::aligned_alloc(kAlign, kPiece));
  if (!bounce_) {
    ::close(fd_);
    fd_ = -1;
    errno = ENOMEM;
  }
}

ShardFile::~ShardFile() {
  if (fd_ >= 0) ::close(fd_);
  std::free(bounce_);
}

bool ShardFile::write_at(const char* p, size_t n, off_t offset) {
  while (n > 0) {
    const ssize_t w = io_.pwrite(fd_, p, n, offset);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EINVAL && direct_) {
      // The file system took O_DIRECT at the open but refuses this write: the page cache from here on.
      const int flags = ::fcntl(fd_, F_GETFL);
      if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_DIRECT) != 0) return false;
      direct_ = false;
      continue;
    }
    if (w < 0) return false;
    if (w == 0) {
      errno = EIO;
      return false;
    }
    // Through the page cache: start the disk on these bytes now, not at finish()'s fsync (advice
    // only: the fsync still makes them durable and reports errors).
    if (!direct_) ::sync_file_range(fd_, offset, w, SYNC_FILE_RANGE_WRITE);
    p += w;
    n -= size_t(w);
    offset += off_t(w);
  }
  return true;
}

bool ShardFile::flush_bounce(bool final) {
  if (held_ == 0) return true;
  size_t n = held_;
  if (direct_ && n % kAlign != 0) {
    // Only the file's last block can be partial (append flushes at block boundaries): padded
    // here, cut back to the file's size by finish().
    if (!final) {
      errno = EINVAL;
      return false;
    }
    const size_t padded = (n + kAlign - 1) / kAlign * kAlign;
    std::memset(bounce_ + n, 0, padded - n);
    n = padded;
  }
  if (!write_at(bounce_, n, written_)) return false;
  written_ += off_t(held_);
  held_ = 0;
  return true;
}

bool ShardFile::append(const void* bytes, size_t n, uint32_t& crc) {
  if (fd_ < 0) {
    errno = EBADF;
    return false;
  }
  const char* p = static_cast<const char*>(bytes);
  crc = 0;
  bytes_ += int64_t(n);
  while (n > 0) {
    // A large run goes straight from the caller's memory: with O_DIRECT when it starts on a block
    // and the bounce buffer ends on one (written first), through the page cache always.
    const bool aligned = reinterpret_cast<uintptr_t>(p) % kAlign == 0 && held_ % kAlign == 0;
    if (n >= kDirectMin && (aligned || !direct_)) {
      if (!flush_bounce(false)) return false;
      const size_t m = direct_ ? std::min(n / kAlign * kAlign, kPiece) : std::min(n, kPiece);
      crc = crc32c(p, m, crc);  // just before the write, while the piece is in the CPU's cache
      if (!write_at(p, m, written_)) return false;
      written_ += off_t(m);
      p += m;
      n -= m;
      continue;
    }
    const size_t m = std::min(n, kPiece - held_);
    crc = crc32c(p, m, crc);
    std::memcpy(bounce_ + held_, p, m);
    held_ += m;
    p += m;
    n -= m;
    if (held_ == kPiece && !flush_bounce(false)) return false;
  }
  return true;
}

bool ShardFile::finish() {
  if (fd_ < 0) {
    errno = EBADF;
    return false;
  }
  const bool padded = direct_ && held_ % kAlign != 0;
  if (!flush_bounce(true)) return false;
  if (padded && ::ftruncate(fd_, off_t(bytes_)) != 0) return false;
  if (::fsync(fd_) != 0) return false;
  const int fd = fd_;
  fd_ = -1;
  return ::close(fd) == 0;
}

}  // namespace trident::checkpoint
