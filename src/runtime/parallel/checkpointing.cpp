#include "runtime/parallel/checkpointing.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "runtime/checkpoint/logical_tensors.h"
#include "runtime/engine/run_meta.h"
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
// first into one reused buffer) and syncs it; `released` runs once the blocks' memory is no longer
// read (every add() returned: written, or held in the writer's own buffer), before the sync.
// Runs on the save's own thread: it touches nothing but the blocks' memory and the files.
template <class Released>
void write_shard(const std::string& dir, int rank, const std::vector<Block>& blocks, Released&& released) {
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
  released();
  w.finish();
}

}  // namespace

struct AsyncSaver::Flight {
  nlohmann::json meta;
  std::chrono::steady_clock::time_point t0;
  std::vector<std::vector<float>> copies;  // gathered copies (GPU, ZeRO): the save's own where the trainer has no whole buffer
  std::vector<Block> blocks;               // what this rank writes
  bool writer = false;                     // this rank writes a shard
  std::thread thread;
  bool ok = true;  // the thread's result, read after the join
  Failure fail;
  std::atomic<bool> done{false};  // the thread has finished (poll() asks without waiting)
  // The blocks' memory no longer read (start() waits for it where that is the trainer's own).
  std::mutex mutex;
  std::condition_variable wake;
  bool released = false;
  void release() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      released = true;
    }
    wake.notify_all();
  }
  std::chrono::steady_clock::time_point finished;  // when (its shard synced), read after the join
};

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

void AsyncSaver::begin(const nlohmann::json& meta, double loss, bool background) {
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
  // them whole (CPU, no ZeRO sharding), written from in place (a background save returns once
  // they are read); elsewhere copies gathered over DP (a collective: every DP rank takes part),
  // the save's own. Replica 0 writes them.
  const int64_t chunks = t.chunks();
  f->copies.reserve(size_t(3 * chunks));
  std::vector<const float*> source[3];  // [which + 1][chunk]
  bool live = false;                    // some block is in the trainer's own buffers
  auto whole = [&](int64_t c, int which) {
    const float* p = t.host_whole(c, which);
    if (!p) {
      f->copies.push_back(which < 0 ? t.whole_params(c) : t.whole_moment(c, which));
      p = f->copies.back().data();
    } else {
      live = live || f->writer;
    }
    source[which + 1].push_back(p);
  };
  bool finite = true;
  for (int64_t c = 0; c < chunks; ++c) {
    whole(c, -1);
    const float* p = source[0].back();
    double sq = 0;
    const int64_t n = t.chunk_layout(c).total();
    // The trainer's own host buffer: summed by the CPU kernels' threads, idle between steps (one
    // core took 50 ms of the save for 51 M weights).
    if (p == t.host_whole(c, -1)) sq = t.kernels().sum_squares(p, size_t(n));
    else
      for (int64_t i = 0; i < n; ++i) sq += double(p[i]) * double(p[i]);
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
    fl->ok = caught(fl->writer, fl->fail, dir, [&] { write_shard(dir, rank, fl->blocks, [fl] { fl->release(); }); });
    fl->release();  // also when it failed or wrote nothing
    fl->finished = std::chrono::steady_clock::now();
    fl->done = true;
  });
  if (background && live) {  // training may change the trainer's buffers once they are read
    std::unique_lock<std::mutex> lock(f->mutex);
    f->wake.wait(lock, [fl] { return fl->released; });
  }
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
