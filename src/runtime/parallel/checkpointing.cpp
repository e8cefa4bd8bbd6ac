#include "runtime/parallel/checkpointing.h"

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
  // Whole parameters and moments of every chunk, gathered over DP where they are sharded (a
  // collective: every DP rank takes part); replica 0 writes them.
  std::vector<std::vector<float>> params, moments[2];
  bool finite = true;
  for (int64_t c = 0; c < t.chunks(); ++c) {
    params.push_back(t.whole_params(c));
    double sq = 0;
    for (float x : params.back()) sq += double(x) * double(x);
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
    for (int64_t c = 0; c < t.chunks(); ++c) moments[which].push_back(t.whole_moment(c, which));
  const bool dense_writer = g.dense_grads().rank() == 0;
  phase(g.expert_grads().rank() == 0, [&] {
    checkpoint::ShardWriter w(dir, g.world->rank());
    for (int64_t c = 0; c < t.chunks(); ++c) {
      const nn::ParamLayout& L = t.chunk_layout(c);
      for (const auto& view : L.tensors()) {
        const checkpoint::LogicalSlice s = checkpoint::logical_slice(L.shard(), view);
        if (!s.primary || !(view.expert || dense_writer)) continue;
        for (const auto& b : s.blocks) {
          std::vector<float> block(size_t(b.rows * b.cols));
          for (int which = -1; which < 2; ++which) {
            const float* src = which < 0 ? params[size_t(c)].data() : moments[which][size_t(c)].data();
            for (int64_t r = 0; r < b.rows; ++r)
              for (int64_t col = 0; col < b.cols; ++col)
                block[size_t(r * b.cols + col)] = src[view.offset + (b.local_row + r) * view.cols + b.local_col + col];
            w.add(which < 0 ? s.name : kMoment[which] + s.name, s.rows, s.cols, b.row, b.col, b.rows, b.cols,
                  block.data());
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
    t.set_whole_params(c, checkpoint::read_shard(reader, L, "").data());
    if (weights_only) continue;
    for (int which = 0; which < 2; ++which)
      t.set_whole_moment(c, which, checkpoint::read_shard(reader, L, kMoment[which]).data());
  }
}

}  // namespace trident::parallel
