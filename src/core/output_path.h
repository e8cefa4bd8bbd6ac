// Output paths: the one check every writer runs before any work, and the one atomic writer.
//
// Every file Trident writes (--metrics, --checkpoint, --report, --svg, --trace, --html, --emit,
// `data prepare OUT`, `bench --out`, and any output a new command adds) goes through here:
//   1. check_outputs() at start-up, before any work: an output that is the same file as one of
//      the command's inputs (compared by device + inode, so links and "./x" are caught), a
//      directory, a device / FIFO / socket, a symbolic link, a file inside a folder the command
//      reads, or a path in a missing or unwritable folder is a Problem naming both paths.
//   2. write_file_atomically() / write_text_atomically(): the bytes go to a temp file in the same
//      folder whose name is unique per process and call, then rename() replaces the target, so a
//      reader never sees half a file and a failed write leaves the old file untouched. It
//      re-checks the target right before the rename and never replaces a special file.
//   3. OutputStream: for outputs written as the run goes (the metrics JSON lines). Opened with
//      O_NOFOLLOW on a regular file only; every write is checked, so a full disk stops the run
//      with a clear error instead of losing lines silently.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/problems.h"

namespace trident {

// A path and the name a user knows it by ("--data", "TEXT", "the checkpoint being resumed").
struct NamedPath {
  std::string path;
  std::string what;
};

enum class OutputKind {
  File,       // a regular file, replaced whole
  Directory,  // a folder the writer owns (a sharded checkpoint): may exist, must be a real folder
};

// The one list of a command's inputs that every output is checked against: each path it reads
// (--config, --cost, --data and its tokenizer, --resume / --checkpoint to read, ...). A path
// already in the list is not added twice, so each clash is reported once.
void add_input(std::vector<NamedPath>& inputs, const NamedPath& in);
// A folder the command reads (a checkpoint): the folder and every file in it, so an output that
// is one of those files by another name (a hard link) is caught too.
void add_folder_input(std::vector<NamedPath>& inputs, const NamedPath& folder);

// Adds a problem for every output that would replace or damage an input, a special file or
// another output; inputs that do not exist (yet) are skipped. Empty output paths are ignored.
void check_outputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs, Problems& problems,
                   OutputKind kind = OutputKind::File);
// Adds a problem for every path (an output or an input) that lies in `folder`, an output folder
// the command replaces whole (a checkpoint: each save swaps a new folder in), or that is or lies
// in `temporary`, the sibling a save clears and fills first.
void check_outside(const std::vector<NamedPath>& paths, const NamedPath& folder, const std::string& temporary,
                   Problems& problems);
// The same for one output; throws InputError when anything is wrong.
void require_output(const NamedPath& output, const std::vector<NamedPath>& inputs = {},
                    OutputKind kind = OutputKind::File);

// Writes `path` whole or not at all. `body` writes to the temp file and returns false on failure.
// Throws InputError (code "io") naming the path and the OS reason when anything fails.
void write_file_atomically(const std::string& path, const std::function<bool(std::FILE*)>& body);
void write_text_atomically(const std::string& path, const std::string& text);

// The temp name write_file_atomically uses: "PATH.tmp.PID.N", unique per process and call.
std::string unique_temp_path(const std::string& path);

// fsync of a directory, so the names created, renamed or removed in it survive a power cut (a
// file's own fsync makes its bytes durable, not its directory entry). False if it could not.
bool sync_directory(const std::string& dir);
// The directory that holds `path` ("." for a bare name).
std::string parent_directory(const std::string& path);

// An output written line by line (the metrics file): regular files only, every write checked.
class OutputStream {
 public:
  OutputStream() = default;
  explicit OutputStream(const std::string& path);  // throws InputError when it cannot be opened
  // For tests of the write-error path: adopt an open stream (e.g. /dev/full).
  OutputStream(std::FILE* adopted, std::string path) : f_(adopted), path_(std::move(path)) {}
  ~OutputStream();
  OutputStream(const OutputStream&) = delete;
  OutputStream& operator=(const OutputStream&) = delete;
  OutputStream(OutputStream&& o) noexcept : f_(o.f_), path_(std::move(o.path_)) { o.f_ = nullptr; }
  OutputStream& operator=(OutputStream&& o) noexcept {
    if (this != &o) {
      if (f_) std::fclose(f_);
      f_ = o.f_;
      path_ = std::move(o.path_);
      o.f_ = nullptr;
    }
    return *this;
  }

  bool is_open() const { return f_ != nullptr; }
  // Writes the text and flushes; throws InputError (code "io") naming the file and errno's reason.
  void write_line(const std::string& line);
  void close();  // checked as well

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
};

}  // namespace trident
