#include "runtime/parallel/checkpointing.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "runtime/checkpoint/logical_tensors.h"
#include "runtime/engine/run_meta.h"
#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/nn/gpt.h"

namespace trident::parallel {

namespace {

const char* kMoment[2] = {"optimizer.m.", "optimizer.v."};

bool all_ok(ProcessGroups& g, bool ok) {
  double x = ok ? 1.0 : 0.0;
  all_reduce_f64(*g.world, &x, 1, comm::ReduceOp::Min);
  return x > 0.5;
}

// A failure on this rank, in the terms every rank reports.
struct Failure {
  std::string error, fix = "check free disk space and that the folder is writable", code = "checkpoint-write";
};

// Runs f where `mine`, catching its error into `fail`; false when it failed.
template <class F>
bool caught(bool mine, Failure& fail, const std::string& dir, F&& f) {
  if (!mine) return true;
  try {
    f();
    return true;
  } catch (const InputError& e) {
    fail.error = e.problems().empty() ? e.what() : e.problems().front().what;
    if (!e.problems().empty()) fail.fix = e.problems().front().fix, fail.code = e.problems().front().code;
  } catch (const std::exception& e) {
    fail.error = fmt::format("writing checkpoint '{}' failed: {}", dir, e.what());
  }
  return false;
}

// Every rank learns whether every rank succeeded; a failure stops every rank alike. A save that
// failed before its swap (a full disk) leaves no partial DIR.saving behind; a failed swap keeps it
// (the new checkpoint is complete there, the error says so).
void agree(ProcessGroups& g, bool ok, const Failure& fail, const std::string& dir, bool swapping) {
  if (all_ok(g, ok)) return;
  if (g.world->rank() == 0 && !swapping) checkpoint::abandon_save(dir);
  Problems p;
  p.add(fail.error.empty() ? fmt::format("another rank failed writing checkpoint '{}'", dir) : fail.error, fail.fix,
        fail.code);
  p.throw_if_any();
}

// One slice block to write: `rows` rows of `cols` floats at `src`, `stride` floats apart.
struct Block {
  std::string name;
  int64_t logical_rows, logical_cols, row, col, rows, cols, stride;
  const float* src;
};

// Writes the blocks to this rank's shard (a column block, strided in its tensor, is gathered
// first into one reused buffer) and syncs it. Runs on the save's own thread: it touches nothing
// but the blocks' memory and the files.
void write_shard(const std::string& dir, int rank, const std::vector<Block>& blocks) {
  checkpoint::ShardWriter w(dir, rank);
  std::vector<float> gathered;
  for (const Block& b : blocks) {
    const float* data = b.src;
    if (b.cols != b.stride) {
      gathered.resize(size_t(b.rows * b.cols));
      for (int64_t r = 0; r < b.rows; ++r)
        std::copy(b.src + r * b.stride, b.src + r * b.stride + b.cols, gathered.data() + r * b.cols);
      data = gathered.data();
    }
    w.add(b.name, b.logical_rows, b.logical_cols, b.row, b.col, b.rows, b.cols, data);
  }
  w.finish();
}

// Copies n floats with the OpenMP threads the trainer's kernels use (idle while it saves).
void parallel_copy(const float* from, float* to, int64_t n) {
  constexpr int64_t kPiece = int64_t(1) << 20;  // floats
  const int64_t pieces = (n + kPiece - 1) / kPiece;
#pragma omp parallel for schedule(static) if (pieces > 1)
  for (int64_t k = 0; k < pieces; ++k)
    std::copy(from + k * kPiece, from + std::min(n, (k + 1) * kPiece), to + k * kPiece);
}

}  // namespace

struct AsyncSaver::Flight {
  nlohmann::json meta;
  std::chrono::steady_clock::time_point t0;
  std::vector<std::vector<float>> copies;  // gathered copies (GPU, ZeRO): the snapshot where the trainer has no whole buffer
  std::vector<Block> blocks;               // what this rank writes
  bool writer = false;                     // this rank writes a shard
  std::thread thread;
  bool ok = true;  // the thread's result, read after the join
  Failure fail;
  std::atomic<bool> done{false};  // the thread has finished (poll() asks without waiting)
  std::chrono::steady_clock::time_point finished;  // when (its shard synced), read after the join
};

AsyncSaver::Snapshot::Snapshot(int64_t count)
    : data(static_cast<float*>(kernels::host_alloc(size_t(count) * sizeof(float)))), n(count) {}

AsyncSaver::Snapshot::~Snapshot() { kernels::host_free(data, size_t(n) * sizeof(float)); }

AsyncSaver::Snapshot& AsyncSaver::Snapshot::operator=(Snapshot&& o) noexcept {
  std::swap(data, o.data);
  std::swap(n, o.n);
  return *this;
}

AsyncSaver::AsyncSaver(DistTrainer& trainer, ProcessGroups& groups, std::string dir)
    : trainer_(trainer), groups_(groups), dir_(std::move(dir)) {}

AsyncSaver::~AsyncSaver() {
  if (!flight_) return;
  if (flight_->thread.joinable()) flight_->thread.join();
  // Never swapped in: the previous checkpoint stays; the partial folder goes.
  if (groups_.world->rank() == 0) checkpoint::abandon_save(dir_);
}

bool AsyncSaver::in_flight() const { return flight_ != nullptr; }

void AsyncSaver::start(const nlohmann::json& meta, double loss) { begin(meta, loss, true); }

void AsyncSaver::save_now(const nlohmann::json& meta, double loss) {
  begin(meta, loss, false);
  complete();
}

void AsyncSaver::begin(const nlohmann::json& meta, double loss, bool snapshot) {
  complete();
  DistTrainer& t = trainer_;
  ProcessGroups& g = groups_;
  const std::string& dir = dir_;
  const int64_t step = meta.value("step", int64_t(0));
  if (!std::isfinite(loss))
    throw SaveRefused(fmt::format("checkpoint not written at step {}: the loss is {} (the previous checkpoint in '{}', "
                                  "if any, is untouched); lower --lr or raise --warmup",
                                  step, loss, dir));
  auto f = std::make_unique<Flight>();
  f->meta = meta;
  // DeepSeek-V3's expert bias: no parameter, the same on every rank; logical (per MoE layer and
  // expert), so any layout reads it back. JSON numbers hold fp32 values exactly.
  if (!t.expert_bias().empty()) f->meta["router"]["expert_bias"] = t.expert_bias();
  f->t0 = std::chrono::steady_clock::now();
  // The first rank of each EDP group writes its experts, of each dp x cp group its dense tensors
  // (with experts folded over tp the two need not coincide).
  const bool expert_writer = g.expert_grads().rank() == 0, dense_writer = g.dense_grads().rank() == 0;
  f->writer = expert_writer || dense_writer;
  // Whole parameters and moments of every chunk: the trainer's own host buffers where it holds
  // them whole (CPU, no ZeRO sharding), copied into the snapshot when training goes on during
  // the write (else written in place); elsewhere copies gathered over DP (a collective: every
  // DP rank takes part), themselves the snapshot. Replica 0 writes them.
  const int64_t chunks = t.chunks();
  f->copies.reserve(size_t(3 * chunks));
  std::vector<const float*> source[3];  // [which + 1][chunk]
  size_t own = 0;                       // snapshot buffers used
  auto whole = [&](int64_t c, int which) {
    const float* p = t.host_whole(c, which);
    if (!p) {
      f->copies.push_back(which < 0 ? t.whole_params(c) : t.whole_moment(c, which));
      p = f->copies.back().data();
    } else if (snapshot && f->writer) {
      const int64_t n = t.chunk_layout(c).total();
      if (snapshot_.size() <= own) snapshot_.emplace_back();
      Snapshot& copy = snapshot_[own++];
      // The first save's allocation: huge pages, faulted in at once (4 KiB pages faulted one by
      // one by the copy took 5 s for 608 MB on a busy VM; faulted by the copy's threads, 3.3 s).
      if (copy.n != n) copy = Snapshot(n);
      parallel_copy(p, copy.data, n);
      p = copy.data;
    }
    source[which + 1].push_back(p);
  };
  bool finite = true;
  for (int64_t c = 0; c < chunks; ++c) {
    whole(c, -1);
    const float* p = source[0].back();
    double sq = 0;
    for (int64_t i = 0, n = t.chunk_layout(c).total(); i < n; ++i) sq += double(p[i]) * double(p[i]);
    finite = finite && std::isfinite(sq);
  }
  if (!all_ok(g, finite))
    throw SaveRefused(fmt::format("checkpoint not written at step {}: some weights are not finite (the previous "
                                  "checkpoint in '{}', if any, is untouched); lower --lr or raise --warmup",
                                  step, dir));

  // Rank 0 makes the temporary directory (a failure anywhere stops every rank alike).
  const bool rank0 = g.world->rank() == 0;
  Failure fail;
  agree(g, caught(rank0, fail, dir, [&] { checkpoint::begin_save(dir); }), fail, dir, false);

  // Moments are gathered over DP by every rank (a collective); replica 0 writes (its cp rank 0:
  // cp ranks hold the same weights), the experts' tensors the first rank of each EDP group (each
  // EP rank of replica 0 its own experts).
  for (int which = 0; which < 2; ++which)
    for (int64_t c = 0; c < chunks; ++c) whole(c, which);
  if (f->writer)
    for (int64_t c = 0; c < chunks; ++c) {
      const nn::ParamLayout& L = t.chunk_layout(c);
      for (const auto& view : L.tensors()) {
        const checkpoint::LogicalSlice s = checkpoint::logical_slice(L.shard(), view);
        if (!s.primary || !(view.expert ? expert_writer : dense_writer)) continue;
        for (const auto& b : s.blocks)
          for (int which = -1; which < 2; ++which)
            f->blocks.push_back({which < 0 ? s.name : kMoment[which] + s.name, s.rows, s.cols, b.row, b.col, b.rows,
                                 b.cols, view.cols,
                                 source[which + 1][size_t(c)] + view.offset + b.local_row * view.cols + b.local_col});
      }
    }
  // The shard is written by its own thread (joined by complete() or the destructor).
  Flight* fl = f.get();
  const int rank = g.world->rank();
  f->thread = std::thread([fl, dir, rank] {
    fl->ok = caught(fl->writer, fl->fail, dir, [&] { write_shard(dir, rank, fl->blocks); });
    fl->finished = std::chrono::steady_clock::now();
    fl->done = true;
  });
  flight_ = std::move(f);
}

bool AsyncSaver::poll() {
  if (!flight_) return false;
  if (!all_ok(groups_, flight_->done)) return false;  // every rank asks at the same step
  complete();
  return true;
}

void AsyncSaver::complete() {
  if (!flight_) return;
  std::unique_ptr<Flight> f = std::move(flight_);
  f->thread.join();  // started by begin() before it set flight_
  // Every writer's shard is synced (or one failed: every rank throws, DIR.saving removed);
  // then rank 0 writes the manifest and swaps the folder in.
  agree(groups_, f->ok, f->fail, dir_, false);
  Failure fail;
  agree(groups_, caught(groups_.world->rank() == 0, fail, dir_, [&] { checkpoint::finish_save(dir_, f->meta); }),
        fail, dir_, true);
  // This rank's shard durable (the manifest and swap take milliseconds more).
  last_durable_s_ = std::chrono::duration<double>(f->finished - f->t0).count();
}

void save_checkpoint(DistTrainer& t, ProcessGroups& g, const std::string& dir, const nlohmann::json& meta, double loss) {
  AsyncSaver(t, g, dir).save_now(meta, loss);
}

void load_checkpoint(DistTrainer& t, const checkpoint::CheckpointReader& reader, bool weights_only) {
  // The expert bias chooses the experts: part of the model, loaded with its weights (--init-from too).
  if (!t.expert_bias().empty())
    t.set_expert_bias(engine::expert_bias_from_json(reader.meta(), int64_t(t.expert_bias().size()),
                                                    int64_t(t.expert_bias().front().size())));
  for (int64_t c = 0; c < t.chunks(); ++c) {
    const nn::ParamLayout& L = t.chunk_layout(c);
    // Straight into the trainer's own host buffers where it holds them whole (CPU, no ZeRO
    // sharding), as the save writes from them; else through a whole copy it keeps its part of.
    if (float* own = t.host_whole(c, -1)) {
      checkpoint::read_shard_into(reader, L, "", own);
      t.chunk_stage(c).params_updated();
    } else {
      t.set_whole_params(c, checkpoint::read_shard(reader, L, "").data());
    }
    if (weights_only) continue;
    for (int which = 0; which < 2; ++which) {
      if (float* own = t.host_whole(c, which)) checkpoint::read_shard_into(reader, L, kMoment[which], own);
      else t.set_whole_moment(c, which, checkpoint::read_shard(reader, L, kMoment[which]).data());
    }
  }
}

}  // namespace trident::parallel
