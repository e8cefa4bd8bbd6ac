#include "runtime/parallel/dist_train.h"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/parallel/batch_source.h"
#include "runtime/parallel/dist_trainer.h"
#include "runtime/parallel/process_groups.h"
#include "runtime/parallel/rehearsal_report.h"
#include "report/html_page.h"
#include "report/output_file.h"
#include "runtime/engine/perf.h"
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

bool wants_distributed(const OptionValues& values) {
  if (launched_by_mpi()) return true;
  for (const char* name : {"tp", "pp", "dp", "cp", "ep"}) {
    auto v = values.get_string(name);
    if (v && *v != "1") return true;
  }
  return false;
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_NTASKS"})
    if (std::getenv(v)) return true;
  return false;
}

void read_dist_train_options(const OptionValues& values, DistTrainSettings& s, Problems& problems) {
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

void check_dist_run(const DistTrainSettings& s, Problems& problems) {
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

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

void print_problems(const InputError& e) {
  std::fprintf(stderr, "trident train: %zu problem%s\n", e.problems().size(), e.problems().size() == 1 ? "" : "s");
  for (const auto& p : e.problems()) std::fprintf(stderr, "  - %s\n    fix: %s\n", p.what.c_str(), p.fix.c_str());
}

int train(const DistTrainSettings& s) {
  const int rank = world_rank();
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  {
    Problems problems;
    check_dist_run(s, problems);
    if (world != s.run.layout.world_size())
      problems.add("mpirun started " + std::to_string(world) + " ranks but the layout " + s.run.layout.describe() +
                       " needs " + std::to_string(s.run.layout.world_size()),
                   "run mpirun -np " + std::to_string(s.run.layout.world_size()) +
                       ", or change --dp/--tp/--pp so their product is " + std::to_string(world),
                   "world-size-matches-layout");
    problems.throw_if_any();  // every rank sees the same problems: all stop before any work
  }
  Mesh mesh(s.run.layout, std::max<int64_t>(s.run.cluster.gpus_per_node, 1));
  auto ctx = std::make_shared<comm::CommContext>();
  ctx->timeout_s = s.comm_timeout_s;
  ctx->trace = s.trace_comm;
  ProcessGroups groups = make_process_groups(mesh, ctx);
  auto data = s.data_path.empty() ? synthetic_source(s.run.model.vocab, s.run.model.seq_len, s.seed)
                                  : token_file_source(s.data_path, s.run.model.seq_len, s.seed);
  TrainerOptions o;
  o.adamw = s.adamw;
  o.seed = s.seed;
  o.stage_layers = s.stage_layers;
  o.bucket_floats = std::max<int64_t>(1, int64_t(s.bucket_mib * (1 << 20) / 4));
  // The ranks on this node share its cores (OpenMPI tells how many ranks run here).
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int64_t local_ranks = local ? std::max(1LL, std::atoll(local)) : 1;
  o.kernel_threads = int(std::max<int64_t>(1, int64_t(std::thread::hardware_concurrency()) / local_ranks));
  DistTrainer trainer(s.run, groups, *data, o);

  RehearsalData report;
  report.run = s.run;
  report.warmup = s.warmup_steps >= 0 ? std::min(s.warmup_steps, s.steps - 1) : std::min<int64_t>(2, s.steps / 4);
  report.pp_message_s = trainer.pp_message_s();
  if (rank == 0 && !s.quiet)
    std::printf("trident train: %s on %d MPI ranks, %s, data: %s\n", s.run.layout.describe().c_str(), world,
                to_string(s.run.exec.schedule).c_str(), data->describe().c_str());
  const int fields = 7;
  for (int64_t step = 0; step < s.steps; ++step) {
    if (s.before_step) s.before_step(step, rank);
    const double loss = trainer.step(step);
    const PhaseTimes& t = trainer.last_times();
    float mine[fields] = {float(t.compute), float(t.tp), float(t.pp), float(t.bubble), float(t.dp_exposed),
                          float(t.optimizer), float(t.total)};
    std::vector<float> all(size_t(fields) * world);
    groups.world->all_gather(mine, all.data(), fields, comm::DType::F32);
    report.losses.push_back(loss);
    if (rank == 0) {
      std::vector<PhaseTimes> row(world);
      for (int r = 0; r < world; ++r) {
        const float* x = &all[size_t(r) * fields];
        row[r] = PhaseTimes{x[0], x[1], x[2], x[3], x[4], x[5], x[6]};
      }
      report.times.push_back(row);
      if (!s.quiet)
        std::printf("step %4lld/%lld  loss %.6f  grad norm %.4f  lr %.3g  %.1f ms\n", (long long)step,
                    (long long)s.steps, loss, trainer.last_grad_norm(), engine::learning_rate(s.adamw, step),
                    t.total * 1e3);
      std::fflush(stdout);
    }
  }
  float mem[2] = {float(trainer.allocated_bytes()), float(engine::peak_rss_bytes())};
  std::vector<float> mems(size_t(2) * world);
  groups.world->all_gather(mem, mems.data(), 2, comm::DType::F32);
  if (rank == 0) {
    for (int r = 0; r < world; ++r)
      report.ranks.push_back({r, mesh.coords_of(r), mems[size_t(r) * 2], mems[size_t(r) * 2 + 1]});
    try {
      std::ifstream probe(s.prediction_cluster);
      if (!probe) report.prediction_missing = "no cluster file '" + s.prediction_cluster + "': run `trident bench` first";
      else report.prediction = predict(s.run, s.prediction_cluster, std::max(1u, std::thread::hardware_concurrency()));
    } catch (const std::exception& e) {
      report.prediction_missing = std::string("planner failed: ") + e.what();
    }
    std::printf("%s", rehearsal_text(report).c_str());
    if (!s.report_path.empty()) {
      std::ofstream out(s.report_path);
      out << rehearsal_json(report).dump(2) << "\n";
      if (!out) std::fprintf(stderr, "trident train: could not write the report to %s\n", s.report_path.c_str());
      else std::printf("rehearsal report written to %s\n", s.report_path.c_str());
    }
    if (!s.html_path.empty()) {
      write_output_file(s.html_path, html_page(rehearsal_page(rehearsal_json(report).dump())), "--html");
      std::printf("rehearsal report page written to %s\n", s.html_path.c_str());
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int run_distributed_training(const DistTrainSettings& s) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  }
  int code = 0;
  try {
    code = train(s);
  } catch (const InputError& e) {
    if (world_rank() == 0) print_problems(e);
    code = 2;
  } catch (const std::exception& e) {
    char host[256] = "?";
    gethostname(host, sizeof host);
    std::fprintf(stderr, "trident train: rank %d (host %s, pid %d) failed: %s\n", world_rank(), host, int(getpid()),
                 e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);  // the other ranks stop instead of waiting on this one
    return 1;
  }
  MPI_Finalize();
  return code;
}

}  // namespace trident::parallel
