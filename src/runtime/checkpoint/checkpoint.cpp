// Checkpoint directories: shard writers, manifest, atomic swap and the reader (see checkpoint.h).
#include "runtime/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "core/input_file.h"
#include "core/output_path.h"
#include "core/problems.h"
#include "runtime/checkpoint/checksum.h"
#include "runtime/checkpoint/manifest_check.h"
#include "runtime/checkpoint/shard_file.h"

namespace trident::checkpoint {

namespace fs = std::filesystem;

namespace {

const char* kManifest = "manifest.json";

[[noreturn]] void fail(const std::string& what, const std::string& fix, const std::string& code) {
  Problems p;
  p.add(what, fix, code);
  p.throw_if_any();
  throw std::logic_error("unreachable");
}

const std::string kRedo = "use an intact checkpoint directory written by `trident train --checkpoint DIR`";

// Writes `bytes` to `path` and fsyncs it; false on any error.
bool write_file(const std::string& path, const void* bytes, size_t n) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  bool ok = n == 0 || std::fwrite(bytes, 1, n, f) == n;
  ok = std::fflush(f) == 0 && ok;
  ok = ::fsync(fileno(f)) == 0 && ok;
  return std::fclose(f) == 0 && ok;
}

std::string shard_name(int rank, const char* ext) { return fmt::format("shard-{:05d}.{}", rank, ext); }

// A save owns DIR.saving only when this file is in it: it writes the marker first thing and
// never removes a DIR.saving without one (a user's own folder or file of that name). The marker
// stays in the saved checkpoint, so the previous checkpoint, swapped to DIR.saving, carries it too.
const char* kMarker = ".trident-save";

bool owned_by_a_save(const std::string& tmp) {
  std::error_code ec;
  return fs::is_directory(fs::symlink_status(tmp, ec)) && fs::is_regular_file(fs::symlink_status(fs::path(tmp) / kMarker, ec));
}

// Large slices are read in pieces spread over threads: reading from the page cache, and the
// checksum, are CPU work, so a core each goes as fast as the memory does. Below a piece's size
// a thread is not worth it.
constexpr size_t kPieceBytes = size_t(4) << 20;

size_t pieces_of(size_t n) { return std::clamp<size_t>(n / kPieceBytes, 1, 256); }

size_t threads_for(size_t pieces) {
  return std::min<size_t>({pieces, std::max<size_t>(std::thread::hardware_concurrency(), 1), 8});
}

// Direct reads need the memory address, the file offset and the length on this boundary
// (every device's logical block; as shard_file.h's writes).
constexpr size_t kDirectAlign = 4096;

// Reads n bytes at `offset` of the file into `into`; the pieces' CRC-32Cs are joined in order.
// Through `direct_fd` (O_DIRECT, or -1) where a read is aligned: the disk writes straight into
// place, with no copy out of the page cache (a core's work, and fresh page-cache memory, which
// this project's VMs fault in slowly); else through `fd` in 1 MiB reads whose checksum runs while
// they are in the cache. False when the file ends early or a read fails.
bool read_checked(int fd, int direct_fd, char* into, size_t n, off_t offset, uint32_t& crc) {
  const size_t pieces = pieces_of(n), threads = threads_for(pieces);
  // Pieces start on the alignment, so that a direct read of each stays aligned.
  const size_t piece = ((n + pieces - 1) / pieces + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
  auto lo = [&](size_t k) { return std::min(n, k * piece); };
  std::vector<uint32_t> crcs(pieces, 0);
  std::vector<char> ok(pieces, 0);
  // OpenMP's threads persist between calls: a slice's read does not start (and join) a thread.
#pragma omp parallel for schedule(static, 1) num_threads(int(threads)) if (threads > 1)
  for (size_t k = 0; k < pieces; ++k) {
    uint32_t c = 0;
    size_t done = lo(k);
    while (done < lo(k + 1)) {
      const size_t left = lo(k + 1) - done, whole = left / kDirectAlign * kDirectAlign;
      ssize_t got = -1;
      errno = EINVAL;
      if (direct_fd >= 0 && whole > 0 && reinterpret_cast<uintptr_t>(into + done) % kDirectAlign == 0 &&
          size_t(offset + off_t(done)) % kDirectAlign == 0)
        got = ::pread(direct_fd, into + done, std::min(whole, kPieceBytes), offset + off_t(done));
      if (got < 0 && errno == EINVAL)  // not aligned, or refused: through the page cache
        got = ::pread(fd, into + done, std::min(left, size_t(1) << 20), offset + off_t(done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      c = crc32c(into + done, size_t(got), c);
      done += size_t(got);
    }
    crcs[k] = c;
    ok[k] = done == lo(k + 1);
  }
  crc = 0;
  for (size_t k = 0; k < pieces; ++k) {
    if (!ok[k]) return false;
    if (lo(k + 1) > lo(k)) crc = crc32c_combine(crc, crcs[k], lo(k + 1) - lo(k));
  }
  return true;
}

}  // namespace

std::string temporary_dir(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return d + ".saving";
}

void begin_save(const std::string& dir) {
  require_output({dir, "--checkpoint"}, {}, OutputKind::Directory);  // not a file, link or device
  const std::string tmp = temporary_dir(dir);
  Problems foreign;
  check_temporary_dir(dir, foreign);
  foreign.throw_if_any();
  std::error_code ec;
  fs::remove_all(tmp, ec);  // a save that crashed left it (it has the marker)
  const std::string marker = "a Trident checkpoint save made this folder; a later save may remove it\n";
  const bool made = fs::create_directories(tmp, ec) && !ec;
  if (!made || !write_file(tmp + "/" + kMarker, marker.data(), marker.size())) {
    const std::string why = ec ? ec.message() : std::strerror(errno);
    if (made) {
      abandon_save(dir);  // with a marker (partly written)
      fs::remove(tmp, ec);  // or without: the empty folder this call made
    }
    fail("cannot create the checkpoint's temporary directory '" + tmp + "': " + why,
         "check that the folder of --checkpoint exists and is writable, and free disk space", "checkpoint-write");
  }
}

void check_temporary_dir(const std::string& dir, Problems& problems) {
  const std::string tmp = temporary_dir(dir);
  std::error_code ec;
  if (fs::exists(fs::symlink_status(tmp, ec)) && !owned_by_a_save(tmp))
    problems.add("'" + tmp + "' exists and is not a temporary folder of a Trident save (it has no " + kMarker +
                     " marker); a save of --checkpoint '" + dir + "' needs that name and removes only what it made",
                 "move or remove '" + tmp + "' yourself, or give another --checkpoint", "checkpoint-path");
}

void abandon_save(const std::string& dir) {
  const std::string tmp = temporary_dir(dir);
  std::error_code ec;
  if (owned_by_a_save(tmp)) fs::remove_all(tmp, ec);
}

ShardWriter::ShardWriter(const std::string& dir, int rank)
    : dir_(temporary_dir(dir)), file_(shard_name(rank, "bin")), out_(std::make_unique<ShardFile>(dir_ + "/" + file_)) {
  if (!out_->ok()) failed_writing();
}

ShardWriter::~ShardWriter() = default;

void ShardWriter::failed_writing() const {
  fail("failed writing checkpoint shard '" + dir_ + "/" + file_ + "': " + std::strerror(errno) +
           " (the previous checkpoint, if any, is untouched)",
       "check free disk space and that the folder is writable", "checkpoint-write");
}

void ShardWriter::add(const std::string& name, int64_t logical_rows, int64_t logical_cols, int64_t row, int64_t col,
                      int64_t rows, int64_t cols, const float* data) {
  const size_t n = size_t(rows * cols) * sizeof(float);
  uint32_t crc = 0;  // computed as the bytes go to the file (the only pass over them)
  if (!out_->append(data, n, crc)) failed_writing();
  index_.push_back({{"name", name},
                    {"shape", logical_cols == 1 ? nlohmann::json{logical_rows} : nlohmann::json{logical_rows, logical_cols}},
                    {"offset", bytes_},
                    {"start", {row, col}},
                    {"extent", {rows, cols}},
                    {"crc32c", crc32c_hex(crc)}});
  crc_ = crc32c_combine(crc_, crc, n);
  bytes_ += int64_t(n);
}

void ShardWriter::finish() {
  if (!out_->finish()) failed_writing();  // the last bytes, the file's size, one fsync
  const nlohmann::json j = {{"file", file_}, {"bytes", bytes_}, {"crc32c", crc32c_hex(crc_)}, {"slices", index_}};
  const std::string index = j.dump();
  const std::string base = dir_ + "/" + file_.substr(0, file_.size() - 4);
  if (!write_file(base + ".json", index.data(), index.size())) failed_writing();
}

void finish_save(const std::string& dir, const nlohmann::json& meta) {
  const std::string tmp = temporary_dir(dir);
  nlohmann::json manifest = {{"format", "trident-checkpoint"}, {"version", kVersion}, {"meta", meta},
                             {"files", nlohmann::json::object()}, {"tensors", nlohmann::json::object()}};
  std::map<std::string, int64_t> covered;
  std::vector<fs::path> indexes;
  for (const auto& e : fs::directory_iterator(tmp))
    if (e.path().extension() == ".json") indexes.push_back(e.path());
  std::sort(indexes.begin(), indexes.end());
  for (const auto& path : indexes) {
    std::ifstream in(path);
    const nlohmann::json j = nlohmann::json::parse(in);
    manifest["files"][j["file"].get<std::string>()] = {{"bytes", j["bytes"]}, {"crc32c", j["crc32c"]}};
    for (const auto& s : j["slices"]) {
      const std::string name = s["name"];
      auto& t = manifest["tensors"][name];
      if (t.is_null()) t = {{"shape", s["shape"]}, {"dtype", "f32"}, {"slices", nlohmann::json::array()}};
      t["slices"].push_back({{"file", j["file"]}, {"offset", s["offset"]}, {"start", s["start"]}, {"extent", s["extent"]},
                             {"crc32c", s["crc32c"]}});
      covered[name] += s["extent"][0].get<int64_t>() * s["extent"][1].get<int64_t>();
    }
    fs::remove(path);
  }
  for (const auto& [name, t] : manifest["tensors"].items()) {
    int64_t want = 1;
    for (const auto& d : t["shape"]) want *= d.get<int64_t>();
    if (covered[name] != want)
      throw std::logic_error(fmt::format("checkpoint writer: tensor {} has {} of its {} elements", name, covered[name], want));
  }
  const std::string text = manifest.dump(1);
  // The shard files are fsynced by their writers; their names in the new directory and the
  // manifest's must be too before the swap makes the directory the checkpoint.
  if (!write_file(tmp + "/" + kManifest, text.data(), text.size()) || !sync_directory(tmp)) {
    const int err = errno;
    abandon_save(dir);  // a full disk: the partial folder goes, the previous checkpoint stays
    errno = err;
    fail("failed writing '" + tmp + "/" + kManifest + "': " + std::strerror(errno) + " (the previous checkpoint is untouched)",
         "check free disk space", "checkpoint-write");
  }
  // The swap: the new directory takes the old one's name in one step; the old one, now at the
  // temporary name, is removed afterwards.
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) != 0)
      fail("could not swap the new checkpoint into '" + dir + "': " + std::strerror(errno) +
               "; it is complete in '" + tmp + "' and the previous one is untouched",
           "move '" + tmp + "' to '" + dir + "' by hand", "checkpoint-write");
    fs::remove_all(tmp, ec);
  } else if (std::rename(tmp.c_str(), dir.c_str()) != 0) {
    fail("could not rename '" + tmp + "' to '" + dir + "': " + std::strerror(errno), "check the folder is writable",
         "checkpoint-write");
  }
  // The swap itself is a change of the parent folder: durable once that folder is synced.
  if (!sync_directory(parent_directory(dir)))
    fail("saved '" + dir + "' but could not sync its folder '" + parent_directory(dir) + "': " + std::strerror(errno),
         "check the file system (a crash now could leave the previous checkpoint under the name)", "checkpoint-write");
}

bool is_checkpoint(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / kManifest, ec);
}

CheckpointReader::CheckpointReader(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail("checkpoint '" + dir + "' is not a directory" + (fs::exists(dir, ec) ? "" : " (it does not exist)"),
         "give the directory written by `trident train --checkpoint DIR`", "checkpoint-open");
  const std::string path = dir + "/" + kManifest;
  if (special_file_kind(path) == "missing") fail("checkpoint '" + dir + "' has no " + kManifest, kRedo, "checkpoint-open");
  {
    // Before the open: a FIFO as the manifest would block it. A manifest lists each tensor's
    // slices: a few MiB for the largest models, so 1 GiB is no real model's.
    Problems p;
    check_input_file({path, "checkpoint manifest", "--checkpoint", "checkpoint-open"}, uint64_t(1) << 30, p);
    p.throw_if_any();
  }
  std::ifstream in(path);
  if (!in) fail("checkpoint '" + dir + "' has no readable " + kManifest, kRedo, "checkpoint-open");
  // Everything the manifest says is checked here, once (manifest_check.h): tensor() and the
  // callers of meta() then read only what holds together.
  Problems problems;
  manifest_ = parse_manifest(in, path, problems);
  if (problems.empty()) check_manifest(manifest_, dir, kVersion, problems);
  problems.throw_if_any();
  // Readers take meta()["model"]: absent (a checkpoint of bare tensors), it reads as null, which
  // the model reader refuses by name.
  if (!manifest_["meta"].contains("model")) manifest_["meta"]["model"] = nullptr;
}

std::vector<std::string> CheckpointReader::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : manifest_["tensors"].items()) out.push_back(name);
  return out;
}

void CheckpointReader::verify_file(const std::string& file) const {
  if (verified_.count(file)) return;
  std::ifstream in(dir_ + "/" + file, std::ios::binary);
  std::vector<char> buf(1 << 20);
  const nlohmann::json& entry = manifest_["files"][file];
  const bool crc = entry.contains("crc32c");  // else a checkpoint from before CRC-32C: FNV-1a 64
  uint32_t c = 0;
  uint64_t h = kFnv1aStart;
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    if (crc) c = crc32c(buf.data(), size_t(in.gcount()), c);
    else h = fnv1a64(buf.data(), size_t(in.gcount()), h);
  }
  if ((crc ? crc32c_hex(c) : fnv1a64_hex(h)) != entry.value(crc ? "crc32c" : "fnv1a64", ""))
    fail("checkpoint shard '" + dir_ + "/" + file + "' is corrupt (checksum mismatch)", kRedo, "checkpoint-hash");
  verified_.insert(file);
}

std::vector<int64_t> CheckpointReader::shape(const std::string& name) const {
  if (!has(name)) fail("checkpoint '" + dir_ + "' has no tensor '" + name + "'", kRedo, "checkpoint-tensor");
  return manifest_.at("tensors").at(name).at("shape").get<std::vector<int64_t>>();
}

void CheckpointReader::read_block(const std::string& name, int64_t row, int64_t col, int64_t rows, int64_t cols,
                                  float* out, int64_t stride) const {
  const std::vector<int64_t> sh = shape(name);
  const int64_t all_cols = sh.size() > 1 ? sh[1] : 1;
  if (row < 0 || col < 0 || rows < 0 || cols < 0 || row + rows > sh[0] || col + cols > all_cols)
    throw std::logic_error(fmt::format("read_block: [{}, {}] of [{}, {}] outside tensor {}", row, col, rows, cols, name));
  // The manifest was checked whole on opening: shape, dtype and every slice are in range and
  // cover the tensor exactly once, so the overlaps below fill the block exactly once.
  std::vector<float> block;
  for (const auto& s : manifest_.at("tensors").at(name).at("slices")) {
    const int64_t r0 = s.at("start").at(0), c0 = s.at("start").at(1), nr = s.at("extent").at(0),
                  nc = s.at("extent").at(1), offset = s.at("offset");
    const int64_t r_lo = std::max(row, r0), r_hi = std::min(row + rows, r0 + nr);
    const int64_t c_lo = std::max(col, c0), c_hi = std::min(col + cols, c0 + nc);
    if (r_lo >= r_hi || c_lo >= c_hi) continue;  // a slice this rank does not need: never read
    const std::string file = s.at("file");
    // A slice with its own checksum is checked alone (CRC-32C, or FNV-1a 64 in older
    // checkpoints); the oldest check the whole file.
    const bool crc = s.contains("crc32c"), fnv = s.contains("fnv1a64");
    if (!crc && !fnv) verify_file(file);
    // A slice that is the whole block, rows contiguous, is read straight into it.
    const bool direct = r_lo == r0 && r_hi == r0 + nr && c_lo == c0 && c_hi == c0 + nc && (nr == 1 || nc == stride);
    float* into = direct ? out + (r0 - row) * stride + (c0 - col) : nullptr;
    if (!direct) {
      block.resize(size_t(nr * nc));
      into = block.data();
    }
    const size_t n = size_t(nr * nc) * sizeof(float);
    // Straight from the file into place, in pieces that stay in the cache while their checksum
    // runs over them.
    const std::string path = dir_ + "/" + file;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    // A large slice also through O_DIRECT, where the file system takes it (read_checked).
    const int direct_fd = n >= (size_t(1) << 20) ? ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT) : -1;
    uint32_t c = 0;
    const bool read = fd >= 0 && read_checked(fd, direct_fd, reinterpret_cast<char*>(into), n, off_t(offset), c);
    if (fd >= 0) ::close(fd);
    if (direct_fd >= 0) ::close(direct_fd);
    if (!read) fail("could not read a slice of '" + name + "' from '" + dir_ + "/" + file + "'", kRedo, "checkpoint-size");
    if ((crc && crc32c_hex(c) != s.at("crc32c")) || (!crc && fnv && fnv1a64_hex(fnv1a64(into, n)) != s.at("fnv1a64")))
      fail(fmt::format("a slice of '{}' in checkpoint shard '{}/{}' is corrupt (checksum mismatch)", name, dir_, file),
           kRedo, "checkpoint-hash");
    if (direct) continue;
    for (int64_t r = r_lo; r < r_hi; ++r)
      std::copy(block.begin() + (r - r0) * nc + (c_lo - c0), block.begin() + (r - r0) * nc + (c_hi - c0),
                out + (r - row) * stride + (c_lo - col));
  }
}

CheckpointReader::Tensor CheckpointReader::tensor(const std::string& name) const {
  Tensor out;
  out.name = name;
  out.dtype = "f32";
  out.shape = shape(name);
  out.data.assign(size_t(out.rows() * out.cols()), 0.0f);
  read_block(name, 0, 0, out.rows(), out.cols(), out.data.data(), out.cols());
  return out;
}

}  // namespace trident::checkpoint
