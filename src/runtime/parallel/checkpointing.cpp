#include "runtime/parallel/checkpointing.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "runtime/checkpoint/logical_tensors.h"
#include "runtime/nn/gpt.h"

namespace trident::parallel {

namespace {

const char* kMoment[2] = {"optimizer.m.", "optimizer.v."};

bool all_ok(ProcessGroups& g, bool ok) {
  double x = ok ? 1.0 : 0.0;
  all_reduce_f64(*g.world, &x, 1, comm::ReduceOp::Min);
  return x > 0.5;
}

}  // namespace

void save_checkpoint(DistTrainer& t, ProcessGroups& g, const std::string& dir, const nlohmann::json& meta, double loss) {
  const int64_t step = meta.value("step", int64_t(0));
  if (!std::isfinite(loss))
    throw SaveRefused(fmt::format("checkpoint not written at step {}: the loss is {} (the previous checkpoint in '{}', "
                                  "if any, is untouched); lower --lr or raise --warmup",
                                  step, loss, dir));
  // Whole parameters and moments of every chunk: the trainer's own host buffers where it holds
  // them whole (CPU, no ZeRO sharding: no copy, so the disk starts at once), else copies
  // gathered over DP (a collective: every DP rank takes part); replica 0 writes them.
  const int64_t chunks = t.chunks();
  std::vector<std::vector<float>> copies;
  copies.reserve(size_t(3 * chunks));
  std::vector<const float*> source[3];  // [which + 1][chunk]
  auto whole = [&](int64_t c, int which) {
    const float* p = t.host_whole(c, which);
    if (!p) {
      copies.push_back(which < 0 ? t.whole_params(c) : t.whole_moment(c, which));
      p = copies.back().data();
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

  // Phase 1: rank 0 makes the temporary directory. Phase 2: the writers fill it. Phase 3:
  // rank 0 writes the manifest and swaps. A failure anywhere stops every rank alike.
  std::string error, fix = "check free disk space and that the folder is writable", code = "checkpoint-write";
  bool swapping = false;
  auto phase = [&](bool mine, auto&& f) {
    bool ok = true;
    if (mine) {
      try {
        f();
      } catch (const InputError& e) {
        ok = false;
        error = e.problems().empty() ? e.what() : e.problems().front().what;
        if (!e.problems().empty()) fix = e.problems().front().fix, code = e.problems().front().code;
      } catch (const std::exception& e) {
        ok = false;
        error = fmt::format("writing checkpoint '{}' failed: {}", dir, e.what());
      }
    }
    if (!all_ok(g, ok)) {
      // A save that failed before its swap (a full disk) leaves no partial DIR.saving behind;
      // a failed swap keeps it (the new checkpoint is complete there, the error says so).
      if (g.world->rank() == 0 && !swapping) checkpoint::abandon_save(dir);
      Problems p;
      p.add(error.empty() ? fmt::format("another rank failed writing checkpoint '{}'", dir) : error, fix, code);
      p.throw_if_any();
    }
  };
  const bool rank0 = g.world->rank() == 0;
  phase(rank0, [&] { checkpoint::begin_save(dir); });

  // Moments are gathered over DP by every rank (a collective); replica 0 writes (its cp rank 0:
  // cp ranks hold the same weights), the experts' tensors the first rank of each EDP group (each
  // EP rank of replica 0 its own experts).
  for (int which = 0; which < 2; ++which)
    for (int64_t c = 0; c < chunks; ++c) whole(c, which);
  const bool dense_writer = g.dense_grads().rank() == 0;
  phase(g.expert_grads().rank() == 0, [&] {
    checkpoint::ShardWriter w(dir, g.world->rank());
    std::vector<float> block;  // a block of whole rows is written in place; others are gathered here
    for (int64_t c = 0; c < chunks; ++c) {
      const nn::ParamLayout& L = t.chunk_layout(c);
      for (const auto& view : L.tensors()) {
        const checkpoint::LogicalSlice s = checkpoint::logical_slice(L.shard(), view);
        if (!s.primary || !(view.expert || dense_writer)) continue;
        for (const auto& b : s.blocks) {
          for (int which = -1; which < 2; ++which) {
            const float* src = source[which + 1][size_t(c)] + view.offset + b.local_row * view.cols + b.local_col;
            const float* data = src;
            if (b.cols != view.cols) {  // a column block: its rows are strided in the tensor
              block.resize(size_t(b.rows * b.cols));
              for (int64_t r = 0; r < b.rows; ++r)
                std::copy(src + r * view.cols, src + r * view.cols + b.cols, block.data() + r * b.cols);
              data = block.data();
            }
            w.add(which < 0 ? s.name : kMoment[which] + s.name, s.rows, s.cols, b.row, b.col, b.rows, b.cols, data);
          }
        }
      }
    }
    w.finish();
  });
  swapping = true;
  phase(rank0, [&] { checkpoint::finish_save(dir, meta); });
}

void load_checkpoint(DistTrainer& t, const checkpoint::CheckpointReader& reader, bool weights_only) {
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
