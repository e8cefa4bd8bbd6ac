#include "runtime/checkpoint/logical_tensors.h"

#include <fmt/format.h>

#include "core/problems.h"
#include "runtime/checkpoint/checkpoint.h"

namespace trident::checkpoint {

LogicalSlice logical_slice(const nn::Shard& s, const nn::TensorView& view) {
  // The row-by-row mapping is the layout's (ParamLayout::global_index); consecutive local rows
  // that land on consecutive logical rows at the same column form one block.
  const nn::ParamLayout::Global g0 = nn::ParamLayout::global_index(s, view, 0, 0);
  LogicalSlice out;
  out.name = g0.name;
  out.rows = g0.rows;
  out.cols = g0.cols;
  out.primary = view.name != "head_wte" && view.tp_primary(s.tp_rank);
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

std::vector<float> read_shard(const CheckpointReader& reader, const nn::ParamLayout& layout, const std::string& prefix) {
  std::vector<float> image(size_t(layout.total()), 0.0f);
  for (const auto& view : layout.tensors()) {
    const LogicalSlice s = logical_slice(layout.shard(), view);
    const std::string name = prefix + s.name;
    const std::vector<int64_t> shape = reader.shape(name);
    const int64_t rows = shape[0], cols = shape.size() > 1 ? shape[1] : 1;
    if (rows != s.rows || cols != s.cols) {
      Problems p;
      p.add(fmt::format("tensor '{}' of checkpoint '{}' is {}x{}, this model's is {}x{}", name, reader.dir(), rows, cols,
                        s.rows, s.cols),
            "use the model the checkpoint was written for (drop the model options)", "resume-model");
      p.throw_if_any();
    }
    // Only this shard's blocks are read, never the whole logical tensor.
    for (const auto& b : s.blocks)
      reader.read_block(name, b.row, b.col, b.rows, b.cols,
                        image.data() + view.offset + b.local_row * view.cols + b.local_col, view.cols);
  }
  return image;
}

}  // namespace trident::checkpoint
