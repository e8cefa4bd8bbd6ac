#include "runtime/parallel/dist_train.h"


#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "schedule/schedule.h"

namespace trident::parallel {

namespace {
std::vector<OptionDef> run_options() {
  return {
      {"trace-comm", "distributed", "log every send, receive and collective with step and rank", true, "", "off"},
      {"report", "distributed", "write the rehearsal report as JSON to this file", false, "FILE", "none"},
      {"html", "distributed", "write the rehearsal report as one self-contained HTML page (rank 0)", false, "FILE", "none"},
      {"comm-timeout", "distributed", "seconds a rank waits on one communication before failing (default 300)", false, "NUM", "300"},
      {"stage-layers", "distributed", "explicit pipeline split, layers per stage: 2,3,3", false, "LIST", "even split"},
      {"prediction-cluster", "distributed", "cluster TOML from `trident bench` for the planner's prediction", false, "FILE", "none"},
      {"bucket-mib", "distributed", "data-parallel gradient bucket, MiB (default 4)", false, "NUM", "4"},
  };
}

int64_t launcher_world_size() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"})
    if (const char* x = std::getenv(v)) return std::max(1LL, std::atoll(x));
  return 1;
}
}  // namespace

std::vector<OptionDef> dist_train_options() {
  std::vector<OptionDef> out = layout_options();
  for (const auto& d : execution_options())
    if (d.name == "schedule" || d.name == "virtual-stages" || d.name == "zero" || d.name == "sequence-parallel")
      out.push_back(d);
  for (auto& d : run_options()) out.push_back(d);
  return out;
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_NTASKS"})
    if (std::getenv(v)) return true;
  return false;
}

void read_dist_train_options(const OptionValues& values, TrainSettings& s, Problems& problems) {
  Layout& L = s.run.layout;
  if (auto v = values.get_int("tp", problems)) L.tp = *v;
  if (auto v = values.get_int("pp", problems)) L.pp = *v;
  if (auto v = values.get_int("cp", problems)) L.cp = *v;
  if (auto v = values.get_int("ep", problems)) L.ep = *v;
  if (auto v = values.get_string("order")) L.order = *v;
  else L.order = default_order(L.cp, L.ep);
  if (auto v = values.get_int("dp", problems)) L.dp = *v;
  else if (L.tp > 0 && L.pp > 0 && launcher_world_size() % (L.tp * L.pp) == 0)
    L.dp = std::max<int64_t>(1, launcher_world_size() / (L.tp * L.pp));
  validate_layout(L, problems);
  ExecutionSpec& x = s.run.exec;
  if (auto v = values.get_string("schedule"))
    if (!parse_schedule(*v, x.schedule))
      problems.add("--schedule '" + *v + "' is unknown", "use one of " + join_choices(schedule_names()));
  if (auto v = values.get_int("virtual-stages", problems)) x.virtual_stages = *v;
  if (auto v = values.get_int("zero", problems)) x.zero = int(*v);
  if (auto v = values.get_bool("sequence-parallel", problems)) x.sequence_parallel = *v;
  if (auto v = values.get_bool("trace-comm", problems)) s.trace_comm = *v;
  if (auto v = values.get_string("report")) s.report_path = *v;
  if (auto v = values.get_string("html")) s.html_path = *v;
  if (auto v = values.get_double("comm-timeout", problems)) {
    if (*v <= 0) problems.add("--comm-timeout " + std::to_string(*v) + " is not positive", "give seconds, e.g. 300");
    else s.comm_timeout_s = *v;
  }
  if (auto v = values.get_string("stage-layers")) {
    std::stringstream in(*v);
    std::string item;
    while (std::getline(in, item, ',')) {
      try {
        s.stage_layers.push_back(std::stoll(item));
      } catch (...) {
        problems.add("--stage-layers '" + *v + "': '" + item + "' is not a whole number",
                     "list layers per stage separated by commas, e.g. 2,3,3");
      }
    }
  }
  if (auto v = values.get_string("prediction-cluster")) s.prediction_cluster = *v;
  if (auto v = values.get_double("bucket-mib", problems)) {
    if (*v <= 0) problems.add("--bucket-mib must be positive", "give e.g. 4");
    else s.bucket_mib = *v;
  }
}

void check_dist_run(const TrainSettings& s, Problems& problems) {
  const RunSpec& r = s.run;
  const auto& m = r.model;
  const auto& L = r.layout;
  auto n = [](int64_t x) { return std::to_string(x); };
  if (m.family != ModelFamily::GPT)
    problems.add("the CPU distributed runtime trains GPT-family models, not " + to_string(m.family),
                 "use --family gpt or a gpt2-*/gpt3-* preset", "dist-family");
  // The planner models context and expert parallelism; the runtime does not train them yet.
  if (L.cp > 1)
    problems.add("context parallel (cp " + n(L.cp) + ") is not trained by the runtime yet (plan, lint, topo and "
                 "simulate model it)", "use --cp 1 for train", "dist-cp");
  if (L.ep > 1)
    problems.add("expert parallel (ep " + n(L.ep) + ") is not trained by the runtime yet (plan, lint, topo and "
                 "simulate model it)", "use --ep 1 for train", "dist-ep");
  if (m.is_moe())
    problems.add("mixture-of-experts models (" + m.name + ", " + n(m.experts) + " experts) are not trained by the "
                 "runtime yet", "train a dense model (--experts 0 or a gpt2-*/gpt3-* preset)", "dist-moe");
  if (m.vocab % L.tp != 0)
    problems.add("vocabulary (" + n(m.vocab) + ") is not divisible by tp (" + n(L.tp) + ")",
                 "use a vocabulary that is a multiple of " + n(L.tp) + " (pad it) or --tp dividing " + n(m.vocab),
                 "tp-divides-vocab");
  if (m.heads % L.tp != 0)
    problems.add("heads (" + n(m.heads) + ") not divisible by tp (" + n(L.tp) + ")", "use a --tp that divides " + n(m.heads),
                 "tp-divides-heads");
  if (m.ffn_hidden % L.tp != 0)
    problems.add("ffn hidden (" + n(m.ffn_hidden) + ") not divisible by tp (" + n(L.tp) + ")",
                 "use a --tp that divides " + n(m.ffn_hidden), "tp-divides-ffn");
  const int64_t v = r.exec.schedule == ScheduleKind::Interleaved ? r.exec.virtual_stages : 1;
  if (L.pp * v > m.layers)
    problems.add("pp (" + n(L.pp) + ") x virtual stages (" + n(v) + ") exceeds the " + n(m.layers) + " layers",
                 "use --pp at most " + n(m.layers / v), "pp-above-layers");
  const int64_t per = r.exec.micro_batch_size * L.dp;
  if (r.exec.global_batch_size <= 0 || r.exec.global_batch_size % per != 0)
    problems.add("global batch (" + n(r.exec.global_batch_size) + ") is not a multiple of micro-batch (" +
                     n(r.exec.micro_batch_size) + ") x dp (" + n(L.dp) + ")",
                 "use --global-batch-size " + n(std::max<int64_t>(1, r.exec.global_batch_size / per) * per),
                 "batch-divisible");
  else
    check_schedule_shape(r.exec.schedule, L.pp, r.exec.micro_batches(L.dp), v, problems);
  if (r.exec.zero > 1)
    problems.add("ZeRO stage " + std::to_string(r.exec.zero) + " is not implemented by the CPU runtime",
                 "use --zero 0 or 1", "zero-stage");
  if (r.exec.sequence_parallel && L.tp > 1 && m.seq_len % L.tp != 0)
    problems.add("sequence parallel splits each sequence across the TP group, but seq_len (" + n(m.seq_len) +
                     ") is not divisible by tp (" + n(L.tp) + ")",
                 "use a --seq-len that is a multiple of " + n(L.tp) + ", or drop --sequence-parallel",
                 "sp-divides-seq");
  if (s.steps < 1) problems.add("steps (" + n(s.steps) + ") must be at least 1", "give --steps 20");
  Problems split;
  // Stage split: reuse the trainer's check.
  if (!s.stage_layers.empty()) {
    int64_t sum = 0;
    for (int64_t x : s.stage_layers) sum += x;
    if (int64_t(s.stage_layers.size()) != L.pp * v || sum != m.layers)
      problems.add("--stage-layers gives " + n(int64_t(s.stage_layers.size())) + " stages summing to " + n(sum) +
                       " layers; the run has " + n(L.pp * v) + " stages and " + n(m.layers) + " layers",
                   "give " + n(L.pp * v) + " counts adding up to " + n(m.layers), "stage-split");
  }
}

}  // namespace trident::parallel
