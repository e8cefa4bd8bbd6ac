#include "runtime/checkpoint/logical_tensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "core/problems.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/engine/run_meta.h"

namespace trident::checkpoint {

LogicalSlice logical_slice(const nn::Shard& s, const nn::TensorView& view) {
  // The row-by-row mapping is the layout's (ParamLayout::global_index); consecutive local rows
  // that land on consecutive logical rows at the same column form one block.
  const nn::ParamLayout::Global g0 = nn::ParamLayout::global_index(s, view, 0, 0);
  LogicalSlice out;
  out.name = g0.name;
  out.rows = g0.rows;
  out.cols = g0.cols;
  out.primary = view.name != "head_wte" && view.primary(s);
  for (int64_t r = 0; r < view.rows; ++r) {
    const nn::ParamLayout::Global g = r == 0 ? g0 : nn::ParamLayout::global_index(s, view, r, 0);
    if (g.row >= g.rows) break;  // vocabulary padding (the last rows of wte / head_w): not stored, read back as zero
    if (!out.blocks.empty()) {
      Block& b = out.blocks.back();
      if (g.row == b.row + b.rows && g.col == b.col) {
        ++b.rows;
        continue;
      }
    }
    out.blocks.push_back({r, 0, g.row, g.col, 1, view.cols});
  }
  return out;
}

namespace {

// The one comparison of a stored tensor's shape with the one a model gives it; "" when equal.
std::string shape_mismatch(const CheckpointReader& reader, const std::string& name, int64_t rows, int64_t cols) {
  if (!reader.has(name)) return fmt::format("no tensor '{}' ({}x{} in this model)", name, rows, cols);
  const std::vector<int64_t> shape = reader.shape(name);
  const int64_t r = shape[0], c = shape.size() > 1 ? shape[1] : 1;
  if (r == rows && c == cols) return "";
  return fmt::format("tensor '{}' is {}x{}, this model's is {}x{}", name, r, c, rows, cols);
}

const char* kMoments[] = {"optimizer.m.", "optimizer.v."};

}  // namespace

void check_model_tensors(const CheckpointReader& reader, const ModelSpec& m, Problems& problems) {
  const nn::ParamLayout layout(nn::Shard::whole(m));
  std::set<std::string> expected;
  std::vector<std::string> wrong;
  const bool moments = reader.has(std::string(kMoments[0]) + "wte");
  // The parameters first, then the AdamW moments (their problems repeat the parameters').
  for (const char* prefix : {"", kMoments[0], kMoments[1]}) {
    if (*prefix && !moments) break;
    for (const auto& view : layout.tensors()) {
      const LogicalSlice s = logical_slice(layout.shard(), view);
      if (!expected.insert(prefix + s.name).second) continue;  // GPT's head: a view of wte
      const std::string what = shape_mismatch(reader, prefix + s.name, s.rows, s.cols);
      if (!what.empty()) wrong.push_back(what);
    }
  }
  for (const std::string& name : reader.names())
    if (!expected.count(name)) wrong.push_back(fmt::format("a tensor '{}', which this model does not have", name));
  if (wrong.empty()) return;
  // One problem: the model the meta claims, then the first mismatches (a wrong hidden size
  // touches every tensor).
  std::string list;
  const size_t shown = std::min<size_t>(wrong.size(), 4);
  for (size_t i = 0; i < shown; ++i) list += (i ? "; " : "") + wrong[i];
  if (wrong.size() > shown) list += fmt::format("; and {} more", wrong.size() - shown);
  problems.add(fmt::format("the meta of checkpoint '{}' describes a model its tensors are not ({} {} layers, hidden {}, "
                           "heads {}, kv-heads {}, ffn {}, seq-len {}, vocab {}): {}",
                           reader.dir(), to_string(m.family), m.layers, m.hidden, m.heads, m.kv_heads, m.ffn_hidden, m.seq_len,
                           m.vocab, list),
               "use the checkpoint as `trident train` wrote it (its meta.model must describe its tensors)",
               "checkpoint-meta");
}

ModelSpec checked_model(const CheckpointReader& reader) {
  const ModelSpec m = engine::model_from_json(reader.meta()["model"]);
  Problems p;
  check_model_tensors(reader, m, p);
  p.throw_if_any();
  return m;
}

std::vector<float> read_shard(const CheckpointReader& reader, const nn::ParamLayout& layout, const std::string& prefix) {
  std::vector<float> image(size_t(layout.total()));
  read_shard_into(reader, layout, prefix, image.data());
  return image;
}

void read_shard_into(const CheckpointReader& reader, const nn::ParamLayout& layout, const std::string& prefix,
                     float* image) {
  std::fill(image, image + layout.total(), 0.0f);  // what no block covers (vocabulary padding) is zero
  for (const auto& view : layout.tensors()) {
    const LogicalSlice s = logical_slice(layout.shard(), view);
    const std::string name = prefix + s.name;
    const std::string what = shape_mismatch(reader, name, s.rows, s.cols);
    if (!what.empty())
      throw InputError({{"checkpoint '" + reader.dir() + "': " + what, "use the model the checkpoint was written for (drop the model options)", "resume-model"}});
    // Only this shard's blocks are read, never the whole logical tensor.
    for (const auto& b : s.blocks)
      reader.read_block(name, b.row, b.col, b.rows, b.cols,
                        image + view.offset + b.local_row * view.cols + b.local_col, view.cols);
  }
}

}  // namespace trident::checkpoint
