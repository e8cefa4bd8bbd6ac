#include "core/input_file.h"

#include <sys/stat.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace trident {

std::string special_file_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno == ENOENT || errno == ENOTDIR ? "missing" : std::strerror(errno);
  if (S_ISREG(st.st_mode)) return "";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISFIFO(st.st_mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "a special file";
}

std::string size_text(uint64_t bytes) {
  if (bytes >= (uint64_t(1) << 30) && bytes % (uint64_t(1) << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes >= (uint64_t(1) << 20) && bytes % (uint64_t(1) << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{} bytes", bytes);
}

std::optional<uint64_t> check_input_file(const InputFile& f, uint64_t max_bytes, Problems& problems) {
  const std::string named = f.what + " '" + f.path + "'";
  const std::string kind = special_file_kind(f.path);
  if (kind == "missing") {
    problems.add("cannot read " + named + ": it does not exist", "check the path given to " + f.flag, f.code);
    return std::nullopt;
  }
  if (!kind.empty()) {
    const bool errno_text = kind.rfind("a ", 0) != 0;  // stat failed: the reason, e.g. permission denied
    problems.add(errno_text ? "cannot read " + named + ": " + kind : named + " is " + kind + ", not a regular file",
                 "give " + f.flag + " the path of a regular file", f.code);
    return std::nullopt;
  }
  struct stat st {};
  ::stat(f.path.c_str(), &st);
  const uint64_t bytes = uint64_t(st.st_size);
  if (bytes > max_bytes) {
    problems.add(fmt::format("{} is {:.3g} MiB, above the {} a {} may have", named, double(bytes) / double(1 << 20),
                             size_text(max_bytes), f.what),
                 "give " + f.flag + " a smaller file", f.code);
    return std::nullopt;
  }
  return bytes;
}

std::optional<std::string> read_input_file(const InputFile& f, uint64_t max_bytes, Problems& problems) {
  const auto bytes = check_input_file(f, max_bytes, problems);
  if (!bytes) return std::nullopt;
  std::ifstream in(f.path, std::ios::binary);
  if (!in) {
    problems.add("cannot read " + f.what + " '" + f.path + "': " + std::strerror(errno), "check the file is readable",
                 f.code);
    return std::nullopt;
  }
  std::string text(size_t(*bytes), '\0');
  in.read(text.data(), std::streamsize(text.size()));
  text.resize(size_t(in.gcount()));  // shrunk since the stat: what is there; grown: the size it had
  return text;
}

}  // namespace trident
