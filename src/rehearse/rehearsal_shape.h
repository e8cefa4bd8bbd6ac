// The rehearsal of a plan: the planned run made small enough for this machine's CPU ranks, kept
// alike where it matters for the time shares (`trident rehearse`).
//
//   model:  width (hidden, heads, kv-heads, ffn) and layers times --scale; heads and kv-heads
//           multiples of the rehearsal's tp (their ratio kept), an even head size; the sequence
//           in proportion to the width (at least 32); the vocabulary so that the embedding keeps
//           its share of the parameters (at least the token file's vocabulary); a mixture of
//           experts keeps its experts and top-k, their MLP width scaled as ffn.
//   layout: degrees (ep among them, dividing dp x cp and the experts) no larger than the plan's, multiplying to --ranks, chosen so that the same
//           groups cross hosts (--hosts emulated hosts of ranks / hosts each) as on the plan's
//           cluster, then keeping as many of the plan's dimensions as possible; the rank order kept.
//   batch:  micro-batches per pipeline chosen so the pipeline bubble's share (p-1)/(v m + p-1)
//           is the plan's, as near as the schedule allows.
//   stack:  what CPU ranks cannot run is replaced and named (capability/rehearsal_check.h), never refused.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/problems.h"
#include "core/run_spec.h"
#include "report/rehearsal_shape_report.h"

namespace trident::rehearse {

// Whether the groups of `dim` leave their host when `layout` is laid on hosts of `per_host` ranks.
bool crosses_hosts(const Layout& layout, Dim dim, int64_t per_host);

// A rank order of `layout` under which its TP groups cross hosts of `per_host` ranks, changing
// whether the other dimensions cross as little as it can; nullopt when none does (tp 1, or a
// host holds the whole world).
std::optional<std::string> tp_across_order(const Layout& layout, int64_t per_host);

// The default rank count: the fewest ranks (a multiple of `hosts`, from 2 up to `most`, at most the
// plan's world) whose rehearsal exercises every dimension and host crossing of the plan, or, when
// none does, the fewest that leave out the least (RehearsalShape::not_exercised names what).
struct RankChoice {
  int64_t ranks = 0;
  std::string why;  // how it was chosen, for the report
};
RankChoice default_ranks(const RunSpec& plan, int64_t hosts, int64_t most);

// The default width scale for this machine: a hidden size of 64 per core (64 .. 512).
double default_scale(const ModelSpec& model, int64_t cores);

// Derives the rehearsal of `plan` over `ranks` ranks on `hosts` hosts at width scale `scale`;
// `data_vocab` is the token file's vocabulary. Bad sizes are added to `problems`.
RehearsalShape derive_rehearsal(const RunSpec& plan, int64_t ranks, int64_t hosts, double scale, int64_t data_vocab,
                                Problems& problems);

}  // namespace trident::rehearse
