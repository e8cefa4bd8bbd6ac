// The output-path check and the atomic writer (see output_path.h).
#include "core/output_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace trident {

namespace {

std::string quoted(const NamedPath& p) { return p.what + " '" + p.path + "'"; }

std::string parent_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The absolute, symlink-free path of an existing file or folder; empty when it cannot be resolved.
std::string resolved(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) ? std::string(buf) : std::string();
}

// Where the output will land: its folder resolved, plus its own name (it may not exist yet).
std::string landing(const std::string& path) {
  const std::string dir = resolved(parent_of(path));
  return dir.empty() ? std::string() : (dir == "/" ? "" : dir) + "/" + base_of(path);
}

bool inside(const std::string& path, const std::string& folder) {
  return !path.empty() && !folder.empty() && path.size() > folder.size() && path.compare(0, folder.size(), folder) == 0 &&
         path[folder.size()] == '/';
}

[[noreturn]] void io_fail(const std::string& what, const std::string& fix) {
  Problems p;
  p.add(what, fix, "io");
  p.throw_if_any();
  throw std::logic_error("unreachable");
}

// The target of an atomic replace or a stream must be absent or a regular file.
void require_replaceable(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISREG(st.st_mode)) return;
  const char* kind = S_ISLNK(st.st_mode) ? "a symbolic link" : S_ISDIR(st.st_mode) ? "a directory" : "a special file";
  io_fail("refusing to write '" + path + "': it is " + kind, "give the path of a regular file (or a new one)");
}

void check_one(const NamedPath& out, const std::vector<NamedPath>& inputs, OutputKind kind, Problems& p) {
  const std::string name = quoted(out);
  struct stat lst {};
  const bool exists = ::lstat(out.path.c_str(), &lst) == 0;
  if (exists) {
    if (S_ISLNK(lst.st_mode)) {
      const std::string target = resolved(out.path);
      p.add(name + " is a symbolic link" + (target.empty() ? "" : " to '" + target + "'"),
            "give the real path of the file to write, or remove the link", "output-path");
      return;
    }
    if (S_ISDIR(lst.st_mode) && kind == OutputKind::File) {
      p.add(name + " is a directory", "give a file name, e.g. " + out.path + "/" + "out", "output-path");
      return;
    }
    if (S_ISREG(lst.st_mode) && kind == OutputKind::Directory) {
      p.add(name + " is a file, but this output is a folder", "give a new folder name, or remove the file",
            "output-path");
      return;
    }
    if (!S_ISREG(lst.st_mode) && !S_ISDIR(lst.st_mode)) {
      p.add(name + " is a device, FIFO or other special file, not a regular file",
            "give the path of a regular file (or a new one)", "output-path");
      return;
    }
  }
  const std::string dir = parent_of(out.path);
  struct stat dst {};
  if (::stat(dir.c_str(), &dst) != 0) {
    p.add("the folder '" + dir + "' of " + name + " does not exist",
          "create it (mkdir -p " + dir + ") or choose another path", "output-path");
    return;
  }
  if (!S_ISDIR(dst.st_mode)) {
    p.add("'" + dir + "' in " + name + " is not a folder", "choose a path inside an existing folder", "output-path");
    return;
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    p.add("the folder '" + dir + "' of " + name + " is not writable (" + std::strerror(errno) + ")",
          "choose a writable folder", "output-path");
    return;
  }
  const std::string where = landing(out.path);
  std::vector<std::string> clashed;  // folders already reported: the files in them are not reported again
  for (const NamedPath& in : inputs) {
    if (in.path.empty()) continue;
    struct stat ist {};
    if (::stat(in.path.c_str(), &ist) != 0) continue;  // a missing input is its reader's problem
    const std::string in_at = resolved(in.path);
    if (std::any_of(clashed.begin(), clashed.end(), [&](const std::string& f) { return inside(in_at, f); })) continue;
    const size_t before = p.size();
    struct stat ost {};
    const std::string clash = name + " is the same " + (S_ISDIR(ist.st_mode) ? "folder" : "file") + " as " + quoted(in);
    if (exists && ::stat(out.path.c_str(), &ost) == 0 && ost.st_dev == ist.st_dev && ost.st_ino == ist.st_ino) {
      p.add(clash + ": writing it would destroy the input", "write " + out.what + " to another path", "output-path");
      if (S_ISDIR(ist.st_mode)) clashed.push_back(in_at);
      continue;
    }
    if (S_ISDIR(ist.st_mode) && inside(where, in_at))
      p.add(name + " is inside the folder " + quoted(in) + " that this command reads",
            "write " + out.what + " outside '" + in.path + "'", "output-path");
    else if (kind == OutputKind::Directory && inside(in_at, where))
      p.add(quoted(in) + " is inside the folder " + name + " that this command replaces",
            "write " + out.what + " to another folder", "output-path");
    if (p.size() != before && S_ISDIR(ist.st_mode)) clashed.push_back(in_at);
  }
}

}  // namespace

void check_outputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs, Problems& problems,
                   OutputKind kind) {
  std::vector<std::pair<std::string, const NamedPath*>> seen;
  for (const NamedPath& out : outputs) {
    if (out.path.empty()) continue;
    const size_t before = problems.size();
    check_one(out, inputs, kind, problems);
    if (problems.size() != before) continue;
    const std::string where = landing(out.path);
    for (const auto& [other_at, other] : seen)
      if (!where.empty() && where == other_at)
        problems.add(quoted(out) + " is the same file as " + quoted(*other), "give each output its own path",
                     "output-path");
    seen.emplace_back(where, &out);
  }
}

void add_input(std::vector<NamedPath>& inputs, const NamedPath& in) {
  if (in.path.empty()) return;
  for (const NamedPath& x : inputs)
    if (x.path == in.path) return;
  inputs.push_back(in);
}

void add_folder_input(std::vector<NamedPath>& inputs, const NamedPath& folder) {
  add_input(inputs, folder);
  std::error_code ec;
  if (folder.path.empty() || !std::filesystem::is_directory(folder.path, ec)) return;
  for (const auto& e : std::filesystem::directory_iterator(folder.path, ec))
    if (e.is_regular_file(ec))
      add_input(inputs, {e.path().string(), "the " + folder.what + " file"});
}

void check_outside(const std::vector<NamedPath>& paths, const NamedPath& folder, const std::string& temporary,
                   Problems& problems) {
  if (folder.path.empty()) return;
  std::string dir = folder.path;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string at = landing(dir), tmp_at = landing(temporary);
  for (const NamedPath& out : paths) {
    if (out.path.empty()) continue;
    std::string path = out.path;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    const std::string where = landing(path);
    if (!where.empty() && where == tmp_at)
      problems.add(quoted(out) + " is the temporary folder each save to " + quoted(folder) + " creates and removes",
                   "move it to a name of its own first (mv '" + temporary + "' NEW) and give that", "output-path");
    else if (inside(where, at) || inside(where, tmp_at))
      problems.add(quoted(out) + " is inside " + quoted(folder) + ", a folder each save replaces whole (it would be "
                   "lost with the previous checkpoint)",
                   "keep " + out.what + " outside '" + folder.path + "'", "output-path");
  }
}

void require_output(const NamedPath& output, const std::vector<NamedPath>& inputs, OutputKind kind) {
  Problems p;
  check_outputs({output}, inputs, p, kind);
  p.throw_if_any();
}

bool sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  return ::close(fd) == 0 && ok;
}

std::string parent_directory(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

std::string unique_temp_path(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

void write_file_atomically(const std::string& path, const std::function<bool(std::FILE*)>& body) {
  const std::string fix = "check free disk space and that the folder is writable";
  require_replaceable(path);
  const std::string tmp = unique_temp_path(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) io_fail("cannot open '" + path + "' for writing (temp file '" + tmp + "'): " + std::strerror(errno), fix);
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    ::close(fd);
    ::unlink(tmp.c_str());
    io_fail("cannot write '" + tmp + "': " + std::strerror(errno), fix);
  }
  errno = 0;
  bool ok = body(f);
  ok = std::fflush(f) == 0 && ok;
  ok = ::fsync(::fileno(f)) == 0 && ok;
  const int err = errno;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    ::unlink(tmp.c_str());
    io_fail("failed writing '" + path + "'" + (err ? std::string(": ") + std::strerror(err) : std::string()) +
                " (the previous file, if any, is untouched)",
            fix);
  }
  try {
    require_replaceable(path);  // it may have changed while we wrote
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    io_fail("cannot replace '" + path + "': " + std::strerror(e), fix);
  }
  // The rename is durable only once the directory is: a crash now would otherwise find the
  // old file (or none) under the name.
  if (!sync_directory(parent_directory(path)))
    io_fail("wrote '" + path + "' but could not sync its folder: " + std::strerror(errno), fix);
}

void write_text_atomically(const std::string& path, const std::string& text) {
  write_file_atomically(path, [&](std::FILE* f) { return std::fwrite(text.data(), 1, text.size(), f) == text.size(); });
}

OutputStream::OutputStream(const std::string& path) : path_(path) {
  require_replaceable(path);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) io_fail("cannot write '" + path + "': " + std::strerror(errno), "check the folder exists and is writable");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    io_fail("refusing to write '" + path + "': not a regular file", "give the path of a regular file");
  }
  f_ = ::fdopen(fd, "w");
  if (!f_) {
    ::close(fd);
    io_fail("cannot write '" + path + "': " + std::strerror(errno), "check the folder exists and is writable");
  }
}

OutputStream::~OutputStream() {
  if (f_) std::fclose(f_);
}

void OutputStream::write_line(const std::string& line) {
  if (!f_) return;
  errno = 0;
  const bool ok = std::fputs(line.c_str(), f_) >= 0 && std::fputc('\n', f_) != EOF && std::fflush(f_) == 0;
  if (!ok) {
    const int e = errno;
    std::fclose(f_);
    f_ = nullptr;
    io_fail("cannot write to '" + path_ + "'" + (e ? std::string(": ") + std::strerror(e) : std::string()),
            "free disk space or choose another path");
  }
}

void OutputStream::close() {
  if (!f_) return;
  std::FILE* f = f_;
  f_ = nullptr;
  if (std::fclose(f) != 0)
    io_fail("cannot finish writing '" + path_ + "': " + std::strerror(errno), "free disk space or choose another path");
}

}  // namespace trident
