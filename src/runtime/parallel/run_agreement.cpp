#include "runtime/parallel/run_agreement.h"

#include <fmt/format.h>

#include <cstdint>
#include <map>

#include "core/problems.h"
#include "runtime/data/token_file.h"
#include "runtime/engine/run_meta.h"

namespace trident::parallel {

namespace {

std::string exact(double v) { return fmt::format("{}", v); }  // shortest text that reads back the same

uint64_t hash_of(const std::string& text) {
  return data::fnv1a64(reinterpret_cast<const unsigned char*>(text.data()), text.size());
}

// The token file by what it holds, so two nodes' copies compare equal and a stale copy does not
// (the file run_training opened, read again only when the settings name a file but hold none).
std::string data_identity(const TrainSettings& s) {
  if (s.data_path.empty()) return "synthetic sequences";
  try {  // a rank that throws here would leave the others waiting in the allgather
    const std::shared_ptr<const data::TokenFile> file =
        s.data ? s.data : std::make_shared<const data::TokenFile>(s.data_path);
    return fmt::format("vocab {}, {} tokens, tokenizer kind {}, FNV-1a 64 of the tokens {:#018x}", file->vocab(),
                       file->size(), file->tokenizer_kind(), file->payload_checksum());
  } catch (const std::exception& e) {
    return std::string("unreadable: ") + e.what();
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> run_fingerprint(const TrainSettings& s) {
  const ModelSpec& m = s.run.model;
  const Layout& l = s.run.layout;
  const ExecutionSpec& x = s.run.exec;
  const engine::AdamWConfig& o = s.adamw;
  std::string stages;
  for (int64_t k : s.stage_layers) stages += (stages.empty() ? "" : ",") + std::to_string(k);
  auto n = [](int64_t v) { return std::to_string(v); };
  return {
      {"model", engine::model_to_json(m).dump()},
      {"--tp", n(l.tp)}, {"--pp", n(l.pp)}, {"--dp", n(l.dp)}, {"--cp", n(l.cp)}, {"--ep", n(l.ep)},
      {"--order", l.order},
      {"--global-batch-size", n(x.global_batch_size)}, {"--micro-batch-size", n(x.micro_batch_size)},
      {"--schedule", to_string(x.schedule)}, {"--virtual-stages", n(x.virtual_stages)}, {"--zero", n(x.zero)},
      {"--recompute", to_string(x.recompute)}, {"--sequence-parallel", x.sequence_parallel ? "on" : "off"},
      {"--precision", to_string(x.precision)}, {"--grad-bits", n(x.grad_bits)},
      {"--attention", to_string(x.attention)}, {"--overlap", to_string(x.overlap)},
      {"--lr", exact(o.lr)}, {"--min-lr", exact(o.min_lr)}, {"--warmup", n(o.warmup_steps)},
      {"decay steps", n(o.decay_steps)}, {"beta1", exact(o.beta1)}, {"beta2", exact(o.beta2)}, {"eps", exact(o.eps)},
      {"--weight-decay", exact(o.weight_decay)}, {"--grad-clip", exact(o.grad_clip)},
      {"--steps", n(s.steps)}, {"--stop-at", n(s.stop_at)}, {"--seed", std::to_string(s.seed)},
      {"--eval-every", n(s.eval_every)}, {"--eval-batches", n(s.eval_batches)}, {"--log-every", n(s.log_every)},
      {"--checkpoint", s.checkpoint_path}, {"--checkpoint-every", n(s.checkpoint_every)},
      {"--resume", s.resume_path}, {"--init-from", s.init_from_path}, {"--device", s.device}, {"--comm-timeout", exact(s.comm_timeout_s)},
      {"--bucket-mib", exact(s.bucket_mib)}, {"--stage-layers", stages},
      {"--trace-comm", s.trace_comm ? "on" : "off"},
      {"the token file's contents", data_identity(s)},
      {"the tokenizer", s.tokenizer.dump()},
  };
}

void check_ranks_agree(const std::vector<std::pair<std::string, std::string>>& fingerprint, comm::World& ranks) {
  const int world = ranks.size();
  const int k = int(fingerprint.size());  // the same on every rank: the list above is fixed
  std::vector<uint64_t> mine(k), all(size_t(k) * world);
  for (int i = 0; i < k; ++i) mine[i] = hash_of(fingerprint[i].second);
  ranks.all_gather(mine.data(), all.data(), size_t(k) * sizeof(uint64_t));
  std::vector<int> differ;
  for (int i = 0; i < k; ++i)
    for (int r = 1; r < world; ++r)
      if (all[size_t(r) * k + i] != all[i]) {
        differ.push_back(i);
        break;
      }
  if (differ.empty()) return;

  // Some differ: gather every rank's values of those settings, so each rank reports the same.
  // One line per differing setting, shortened for the message (a BPE tokenizer is thousands of merges).
  std::string text;
  for (int i : differ) {
    std::string value = fingerprint[i].second;
    for (char& c : value)
      if (c == '\n') c = ' ';
    if (value.size() > 160) value = fmt::format("{}... (FNV-1a {:#018x})", value.substr(0, 120), mine[i]);
    text += value + '\n';
  }
  const std::vector<std::string> gathered = comm::all_gather_strings(ranks, text);
  Problems problems;
  for (size_t d = 0; d < differ.size(); ++d) {
    // Ranks grouped by the value they hold, in rank order.
    std::map<std::string, std::vector<int>> ranks_of;
    std::vector<std::string> order;
    for (int r = 0; r < world; ++r) {
      const std::string& lines = gathered[size_t(r)];
      size_t at = 0;
      for (size_t skip = 0; skip < d; ++skip) at = lines.find('\n', at) + 1;
      const std::string value = lines.substr(at, lines.find('\n', at) - at);
      if (!ranks_of.count(value)) order.push_back(value);
      ranks_of[value].push_back(r);
    }
    std::string held;
    for (const std::string& value : order) {
      std::string ranks;
      for (int r : ranks_of[value]) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
      held += fmt::format("{}'{}' on rank{} {}", held.empty() ? "" : "; ", value,
                          ranks_of[value].size() > 1 ? "s" : "", ranks);
    }
    problems.add(fmt::format("the ranks resolved different runs: {} is {}", fingerprint[differ[d]].first, held),
                 "give every rank the same flags, --config file, environment and token file (check the launcher "
                 "script and each node's copy of the data)",
                 "ranks-disagree");
  }
  problems.throw_if_any();
}

}  // namespace trident::parallel
