// What the Hugging Face mappings share (hf_names.cpp, hf_deepseek.cpp): a list of pieces being
// built, and a layer's routed experts under Qwen-style names (mlp.gate, mlp.experts.j.*_proj) or
// Mixtral's (block_sparse_moe.gate, experts.j.w1/w2/w3).
#pragma once

#include <string>
#include <vector>

#include "runtime/checkpoint/hf_names.h"

namespace trident::checkpoint {

// The pieces of one logical tensor, appended in the order the export writes them.
struct Pieces {
  std::vector<HfPiece>& out;
  void whole(const std::string& name, const std::string& hf, std::vector<int64_t> shape,
             HfPiece::Op op = HfPiece::Op::Copy) {
    out.push_back({hf, std::move(shape), name, 0, op, 0});
  }
  void rows(const std::string& name, int64_t row, const std::string& hf, std::vector<int64_t> shape,
            HfPiece::Op op = HfPiece::Op::Copy, int64_t head_dim = 0) {
    out.push_back({hf, std::move(shape), name, row, op, head_dim});
  }
  void zeros(const std::string& hf, std::vector<int64_t> shape) {
    out.push_back({hf, std::move(shape), "", 0, HfPiece::Op::Zeros, 0});
  }
};

// Layer l's router and experts under cls's names (Mixtral's, else mlp.gate / mlp.experts.j.*).
void routed_experts(const ModelSpec& m, int64_t l, HfClass cls, Pieces& t);

}  // namespace trident::checkpoint
