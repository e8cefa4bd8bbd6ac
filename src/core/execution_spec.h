// ExecutionSpec: how a step runs, apart from the layout sizes: batch, schedule, memory
// savers and number formats. Kept apart from the model and the system, as Calculon does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/problems.h"

namespace trident {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved, ZeroBubbleH1 };
enum class Recompute { None, Selective, Full };
// Training recipe. bf16/fp16: 16-bit weights and activations with fp32 master weights and
// Adam moments; gradients in fp32 (Megatron's main grads) unless grad_bits says 16.
enum class Precision { BF16, FP16, FP32 };

std::string to_string(ScheduleKind s);  // "gpipe", "1f1b", "interleaved", "zb-h1"
std::string to_string(Recompute r);     // "none", "selective", "full"
std::string to_string(Precision p);     // "bf16", "fp16", "fp32"
bool parse_schedule(const std::string& text, ScheduleKind& out);
bool parse_recompute(const std::string& text, Recompute& out);
bool parse_precision(const std::string& text, Precision& out);
std::vector<std::string> schedule_names();
std::vector<std::string> recompute_names();
std::vector<std::string> precision_names();

struct ExecutionSpec {
  int64_t global_batch_size = 0;  // sequences per optimizer step; 0 = choose a default
  int64_t micro_batch_size = 1;   // sequences per micro-batch per pipeline
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  int64_t virtual_stages = 1;     // model chunks per GPU (interleaved schedule)
  int zero = 0;                   // ZeRO stage 0..3 (1 = distributed optimizer)
  Recompute recompute = Recompute::None;
  bool sequence_parallel = false;
  Precision precision = Precision::BF16;
  int grad_bits = 32;             // gradient element size in bits: 32 (Megatron main grads) or 16

  // Micro-batches per pipeline per step: B / (b * dp).
  int64_t micro_batches(int64_t dp) const { return global_batch_size / (micro_batch_size * dp); }
};

}  // namespace trident
