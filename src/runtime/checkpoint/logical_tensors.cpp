#include "runtime/checkpoint/logical_tensors.h"

#include <map>

#include <fmt/format.h>

#include "core/problems.h"
#include "runtime/checkpoint/checkpoint.h"

namespace trident::checkpoint {

namespace {
bool ends_with(const std::string& s, const char* suffix) {
  const std::string x(suffix);
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}
}  // namespace

LogicalSlice logical_slice(const nn::Shard& s, const nn::TensorView& view) {
  LogicalSlice out;
  out.name = view.name == "head_wte" ? "wte" : view.name;
  out.rows = view.rows;
  out.cols = view.cols;
  out.primary = view.name != "head_wte" && (view.tp_sharded || s.tp_rank == 0);
  if (!view.tp_sharded) {
    out.blocks.push_back({0, 0, 0, 0, view.rows, view.cols});
    return out;
  }
  const int64_t tp = s.tp_size, r = s.tp_rank, A = s.attn_local(), F = s.ffn_local();
  if (out.name == "wte") {
    out.rows = s.model.vocab;
    out.blocks.push_back({0, 0, s.vocab_offset(), 0, view.rows, view.cols});
  } else if (ends_with(out.name, "qkv_w") || ends_with(out.name, "qkv_b")) {
    out.rows = 3 * A * tp;
    for (int64_t part = 0; part < 3; ++part)  // q, k, v: this rank's heads of each
      out.blocks.push_back({part * A, 0, part * A * tp + r * A, 0, A, view.cols});
  } else if (ends_with(out.name, "fc_w") || ends_with(out.name, "fc_b")) {
    out.rows = F * tp;
    out.blocks.push_back({0, 0, r * F, 0, view.rows, view.cols});
  } else if (ends_with(out.name, "attn_proj_w")) {
    out.cols = A * tp;
    out.blocks.push_back({0, 0, 0, r * A, view.rows, view.cols});
  } else if (ends_with(out.name, "fc_proj_w")) {
    out.cols = F * tp;
    out.blocks.push_back({0, 0, 0, r * F, view.rows, view.cols});
  } else {
    out.blocks.push_back({0, 0, 0, 0, view.rows, view.cols});
  }
  return out;
}

std::vector<float> read_shard(const CheckpointReader& reader, const nn::ParamLayout& layout, const std::string& prefix) {
  std::vector<float> image(size_t(layout.total()), 0.0f);
  std::map<std::string, CheckpointReader::Tensor> cache;  // wte serves the embedding and the head
  for (const auto& view : layout.tensors()) {
    const LogicalSlice s = logical_slice(layout.shard(), view);
    const std::string name = prefix + s.name;
    auto it = cache.find(name);
    if (it == cache.end()) {
      auto t = reader.tensor(name);
      if (t.rows() != s.rows || t.cols() != s.cols) {
        Problems p;
        p.add(fmt::format("tensor '{}' of checkpoint '{}' is {}x{}, this model's is {}x{}", name, reader.dir(), t.rows(),
                          t.cols(), s.rows, s.cols),
              "use the model the checkpoint was written for (drop the model options)", "resume-model");
        p.throw_if_any();
      }
      it = cache.emplace(name, std::move(t)).first;
    }
    const std::vector<float>& whole = it->second.data;
    for (const auto& b : s.blocks)
      for (int64_t r = 0; r < b.rows; ++r)
        std::copy_n(whole.begin() + (b.row + r) * s.cols + b.col, b.cols,
                    image.begin() + view.offset + (b.local_row + r) * view.cols + b.local_col);
  }
  return image;
}

}  // namespace trident::checkpoint
