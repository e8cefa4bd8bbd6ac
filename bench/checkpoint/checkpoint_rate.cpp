// Checkpoint save and load rates against the disk's own, measured side by side in one run:
// saving 1.5 GB of f32 tensors (the size of GPT-2-medium-like weights and AdamW moments) through
// ShardWriter / finish_save against `dd if=/dev/zero bs=16M conv=fdatasync` of the same bytes
// on the same folder, and reading them back with CheckpointReader (every slice's checksum
// checked) against `dd of=/dev/null` of the shard file (both from the page cache the save
// left). Best of 3 of each; prints the rates and the ratios. Reading from the page cache is CPU
// work (copies and the checksum), and the machine may be shared: the load comparison is also
// given in CPU seconds (this process's against dd's), which other processes do not inflate.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <filesystem>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include "runtime/checkpoint/checkpoint.h"

using namespace trident;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kTensors = 96, kRows = 2048, kCols = 2048;  // 96 x 16 MiB = 1.5 GiB

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// User + system CPU seconds of this process and of its waited-for children.
double cpu_seconds(int who) {
  rusage u{};
  getrusage(who, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

void shell(const std::string& cmd) {
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string root = argc > 1 ? argv[1] : fs::temp_directory_path().string();
  const std::string dir = root + "/trident-ckpt-bench-" + std::to_string(::getpid());
  const std::string dd_file = dir + ".dd";
  const double bytes = double(kTensors * kRows * kCols * 4);
  std::vector<float> data(size_t(kRows * kCols));
  for (size_t i = 0; i < data.size(); ++i) data[i] = float(i % 1000) * 0.001f;  // not all zero
  double save = 1e30, dd_write = 1e30, load = 1e30, dd_read = 1e30, load_cpu = 1e30, dd_read_cpu = 1e30;
  for (int round = 0; round < 3; ++round) {
    dd_write = std::min(dd_write, seconds_of([&] {
      shell(fmt::format("dd if=/dev/zero of={} bs=16M count={} conv=fdatasync status=none", dd_file, kTensors));
    }));
    fs::remove(dd_file);
    save = std::min(save, seconds_of([&] {
      checkpoint::begin_save(dir);
      checkpoint::ShardWriter w(dir, 0);
      for (int64_t t = 0; t < kTensors; ++t)
        w.add(fmt::format("t{}", t), kRows, kCols, 0, 0, kRows, kCols, data.data());
      w.finish();
      checkpoint::finish_save(dir, {{"step", round}});
    }));
    std::vector<float> out(data.size());
    for (int pass = 0; pass < 2; ++pass) {  // dd before and after the load: both see a warm cache
      double c0 = cpu_seconds(RUSAGE_CHILDREN);
      dd_read = std::min(dd_read, seconds_of([&] {
        shell(fmt::format("dd if={}/shard-00000.bin of=/dev/null bs=16M status=none", dir));
      }));
      dd_read_cpu = std::min(dd_read_cpu, cpu_seconds(RUSAGE_CHILDREN) - c0);
      if (pass == 1) break;
      c0 = cpu_seconds(RUSAGE_SELF);
      load = std::min(load, seconds_of([&] {
        const checkpoint::CheckpointReader r(dir);
        for (int64_t t = 0; t < kTensors; ++t) r.read_block(fmt::format("t{}", t), 0, 0, kRows, kCols, out.data(), kCols);
      }));
      load_cpu = std::min(load_cpu, cpu_seconds(RUSAGE_SELF) - c0);
    }
  }
  fs::remove_all(dir);
  const double mb = bytes / 1e6;
  fmt::print("checkpoint of {:.2f} GB in {} (best of 3 each)\n", bytes / 1e9, root);
  fmt::print("  save  {:8.0f} MB/s   dd conv=fdatasync {:8.0f} MB/s   save / dd   {:.2f} (goal 0.8 or more)\n",
             mb / save, mb / dd_write, dd_write / save);
  fmt::print("  load  {:8.0f} MB/s   dd read           {:8.0f} MB/s   load / read {:.2f} (goal 0.8 or more)\n",
             mb / load, mb / dd_read, dd_read / load);
  fmt::print("  load  {:8.0f} MB per CPU s  dd read {:8.0f} MB per CPU s  load / read {:.2f} (CPU time)\n", mb / load_cpu,
             mb / dd_read_cpu, dd_read_cpu / load_cpu);
  return 0;
}
