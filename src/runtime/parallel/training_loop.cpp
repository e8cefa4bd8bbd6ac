// The training loop (see training_loop.h).
#include "runtime/parallel/training_loop.h"

#include "runtime/parallel/training_loop_parts.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "core/dimensions.h"
#include "core/input_file.h"
#include "core/vocab_padding.h"
#include "core/step_terms.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/logical_tensors.h"
#include "runtime/engine/machine_load.h"
#include "runtime/engine/machine_rates.h"
#include "runtime/engine/perf.h"
#include "runtime/engine/run_meta.h"
#include "runtime/parallel/batch_source.h"
#include "runtime/parallel/checkpointing.h"
#include "runtime/parallel/dist_train.h"
#include "runtime/parallel/dist_trainer.h"
#include "runtime/parallel/metrics_writer.h"
#include "runtime/parallel/process_groups.h"
#include "runtime/parallel/resource_check.h"
#include "runtime/parallel/save_interval.h"
#include "runtime/parallel/straggler_watch.h"
#include "launch/blas_core.h"
#include "launch/fma_peak.h"
#include "launch/openmp_wait.h"
#include "runtime/parallel/resumed_run.h"
#include "runtime/parallel/run_agreement.h"

namespace trident::parallel {

namespace {

using namespace loop_detail;

void print_problems(const InputError& e) {
  std::fprintf(stderr, "trident train: %zu problem%s\n", e.problems().size(), e.problems().size() == 1 ? "" : "s");
  for (const auto& p : e.problems()) {
    std::fprintf(stderr, "  - %s\n    fix: %s\n", p.what.c_str(), p.fix.c_str());
    if (!p.code.empty()) std::fprintf(stderr, "    code: %s\n", p.code.c_str());
  }
}

// Validation micro-batches: the token file's validation split, or synthetic sequences of
// another seed.
std::unique_ptr<BatchSource> validation_source(const TrainSettings& s) {
  const auto& m = s.run.model;
  return s.data ? token_file_validation_source(s.data, m.seq_len, s.seed)
                : synthetic_source(m.vocab, m.seq_len, s.seed + 1);
}

// The inputs the run check reads, opened once: the token file (unless the command opened it)
// and the checkpoint to resume. A file that cannot be read is a problem among the others.
std::optional<checkpoint::CheckpointReader> open_inputs(TrainSettings& s, Problems& problems) {
  std::optional<checkpoint::CheckpointReader> resume;
  try {
    if (!s.data && !s.data_path.empty()) s.data = std::make_shared<const data::TokenFile>(s.data_path);
  } catch (const InputError& e) {
    for (const auto& p : e.problems()) problems.add(p.what, p.fix, p.code);
  }
  try {
    if (!s.resume_path.empty()) {
      resume.emplace(s.resume_path);
      if (s.resume_meta.is_null()) s.resume_meta = resume->meta();
      checkpoint::checked_model(*resume);  // its tensors are the model its meta describes
    } else if (!s.init_from_path.empty()) {  // the weights of a new run
      resume.emplace(s.init_from_path);
      if (s.init_from_meta.is_null()) s.init_from_meta = resume->meta();
      checkpoint::checked_model(*resume);
    }
  } catch (const InputError& e) {
    for (const auto& p : e.problems()) problems.add(p.what, p.fix, p.code);
  }
  return resume;
}

// The one run check, on every rank before any work: the problems found while parsing, the
// inputs, check_trainable and the world size, all reported together. Returns the checkpoint to
// resume from (opened once, with the token file, into s).
std::optional<checkpoint::CheckpointReader> check_on_every_rank(TrainSettings& s, const Problems& parsed, bool mpi,
                                                                comm::World& ranks,
                                                                int world) {
  Problems problems = parsed;
  std::optional<checkpoint::CheckpointReader> resume = open_inputs(s, problems);
  check_trainable(s, problems);
  const int64_t need = s.run.layout.world_size();
  if (world != need) {
    if (mpi)
      problems.add("mpirun started " + std::to_string(world) + " ranks but the layout " + s.run.layout.describe() +
                       " needs " + std::to_string(need),
                   "run mpirun -np " + std::to_string(need) + ", or change --dp/--tp/--cp/--pp so their product is " +
                       std::to_string(world),
                   "world-size-matches-layout");
    else
      problems.add("the layout " + s.run.layout.describe() + " needs " + std::to_string(need) +
                       " ranks, but this is one process (not started by mpirun)",
                   "run mpirun -np " + std::to_string(need) + " trident train ..., or drop --dp/--tp/--cp/--pp",
                   "world-size-matches-layout");
  }
  // Every rank resolved the same run and found the same problems (else each would check and
  // train its own, or one would stop while the others wait for it).
  if (mpi && world > 1) {
    auto fingerprint = run_fingerprint(s);
    std::string found;
    for (const auto& p : problems.list()) found += p.code + ": " + p.what + "\n";
    fingerprint.push_back({"the problems found", found.empty() ? "none" : found});
    check_ranks_agree(fingerprint, ranks);
  }
  problems.throw_if_any();  // every rank holds the same problems: all stop before any work
  return resume;
}

// Loads the checkpoint into the trainer on every rank; returns the step it holds (--init-from:
// its weights only, and step 0 of the new run) and in `seconds` the time the load took.
int64_t resume_from(DistTrainer& trainer, ProcessGroups& groups, checkpoint::CheckpointReader& resume,
                    const TrainSettings& s, double& seconds) {
  const bool weights_only = s.resume_path.empty();
  // A checkpoint that does not fit is found by some ranks only: all agree before going on.
  std::optional<InputError> error;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    load_checkpoint(trainer, resume, weights_only);
  } catch (const InputError& e) {
    error = e;
  }
  double ok = error ? 0 : 1;
  all_reduce_f64(*groups.world, &ok, 1, comm::ReduceOp::Min);
  if (error) throw *error;
  if (ok < 0.5) {
    Problems p;
    p.add("checkpoint '" + resume.dir() + "' does not fit this model on another rank", "see rank 0's message",
          "resume-model");
    p.throw_if_any();
  }
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();  // every rank's part read
  return weights_only ? 0 : resume.meta().value("step", int64_t(0));
}

// Every rank's activation memory and its stage, for rank 0's start-up table.
std::vector<RankActivations> gather_activations(DistTrainer& trainer, ProcessGroups& groups, const Mesh& mesh,
                                                int world) {
  std::vector<RankActivations> activations(static_cast<size_t>(world));
  const ActivationMemory a = trainer.activation_memory();
  const float mine[3] = {float(a.slots), float(a.slot_bytes), float(a.scratch_bytes)};
  std::vector<float> all(size_t(3) * world);
  groups.world->all_gather(mine, all.data(), 3, comm::DType::F32);
  for (int r = 0; r < world; ++r)
    activations[size_t(r)] = {mesh.coords_of(r).pp(),
                              {int64_t(all[size_t(r) * 3]), double(all[size_t(r) * 3 + 1]), double(all[size_t(r) * 3 + 2])}};
  return activations;
}

// Thrown on every rank at the same step when --evict-stragglers stops the run for a straggler.
struct StragglersEvicted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What the trainer takes from the settings, on the device's kernels.
TrainerOptions trainer_options(const TrainSettings& s, kernels::Kernels& kernels) {
  TrainerOptions o;
  o.adamw = s.adamw;
  o.seed = s.seed;
  o.stage_layers = s.stage_layers;
  o.bucket_floats = std::max<int64_t>(1, int64_t(s.bucket_mib * (1 << 20) / 4));
  o.kernels = &kernels;
  o.compute = s.run.exec.precision == Precision::BF16 ? kernels::DType::BF16 : kernels::DType::F32;
  o.moe = s.moe;
  o.mtp_loss_scaling = s.mtp_loss_scaling;
  return o;
}

// Every rank's phase times of the step (one all-gather: the step's total, then each term of
// core/step_terms.h's table, so a new term is gathered without a change here) and the step's
// seconds: the slowest rank's.
std::vector<PhaseTimes> gather_phase_times(const PhaseTimes& t, ProcessGroups& groups, int world, double& seconds) {
  const std::vector<StepTerm>& terms = step_time_terms();
  const size_t fields = 1 + terms.size();
  std::vector<float> mine{float(t.total)};
  for (const StepTerm& term : terms) mine.push_back(float(t.*term.measured));
  std::vector<float> all(fields * size_t(world));
  groups.world->all_gather(mine.data(), all.data(), fields, comm::DType::F32);
  std::vector<PhaseTimes> row(world);
  seconds = 0;
  for (int r = 0; r < world; ++r) {
    const float* x = &all[size_t(r) * fields];
    row[r].total = x[0];
    for (size_t k = 0; k < terms.size(); ++k) row[r].*terms[k].measured = x[1 + k];
    seconds = std::max(seconds, double(x[0]));
  }
  seconds = world == 1 ? t.total : seconds;
  return row;
}

// The load over the steps on rank 0's node: every rank's CPU time against the node's busy time
// (ranks on several nodes: not separable from one node's /proc/stat, so not reported).
std::optional<MachineLoad> node_load(const engine::LoadProbe& load_probe, ProcessGroups& groups,
                                     const ResourceView& resources, int world, int threads) {
  MachineLoad load = load_probe.stop();
  double ranks_cpu_s = load.self_cpu_s;
  all_reduce_f64(*groups.world, &ranks_cpu_s, 1, comm::ReduceOp::Sum);
  if (resources.own_node_ranks != world || !load.known) return std::nullopt;
  load.self_cpu_s = ranks_cpu_s;
  load.threads = std::max(1, std::min(load.cores, world * threads));
  return load;
}

// This rank's communicators of the run (MPI groups, wrapped for the device).
ProcessGroups open_groups(const TrainSettings& s, const Mesh& mesh, bool mpi, comm::World& world, kernels::Kernels& k) {
  auto ctx = std::make_shared<comm::CommContext>();
  ctx->timeout_s = s.comm_timeout_s;
  ctx->trace = s.trace_comm;
  const GroupWrap wrap = s.device_groups ? s.device_groups(k) : GroupWrap{};
  return mpi ? make_process_groups(mesh, ctx, world, wrap) : make_single_process_groups(ctx);
}

void warn_stop_without_checkpoint(const TrainSettings& s) {
  if (s.stop_at >= 0 && s.stop_at < s.steps && s.checkpoint_path.empty())
    std::fprintf(stderr,
                 "trident train: warning: --stop-at %lld ends the run before its %lld steps, but without --checkpoint "
                 "nothing is saved to resume from: add --checkpoint DIR (then --resume DIR continues)\n",
                 (long long)s.stop_at, (long long)s.steps);
}

// Every rank's trainer buffers and peak resident bytes, as pairs (one all-gather).
std::vector<float> gather_memory(const DistTrainer& trainer, ProcessGroups& groups, int world) {
  float mem[2] = {float(trainer.allocated_bytes()), float(engine::peak_rss_bytes())};
  std::vector<float> mems(size_t(2) * world);
  groups.world->all_gather(mem, mems.data(), 2, comm::DType::F32);
  return mems;
}

// What a run did, for its last lines.
struct RunTotals {
  int64_t steps = 0;
  double total_s = 0;
  std::vector<double> timed;  // seconds of the steps after the first
  double measured_peak = 0, peak_flops = 0;
  bool peak_raised = false;
  std::string peak_which;  // which peak: Peak::which
  double last_val = 0;
};

// Rank 0's last lines: speed (the median step), MFU against the peak, memory against the plan.
void print_summary(const TrainSettings& s, const RunTotals& r, const std::vector<float>& mems) {
  const std::vector<double>& timed = r.timed;
  const double total_s = r.total_s;
  // The median step: one step stalled by the machine (another job, a page-in) moves a mean of
  // few steps far from what the steps take (22 tokens/s after lines of 3,844).
  const double step_s = timed.empty() ? total_s : median(timed);
  const double mean_s = timed.empty() ? total_s : std::accumulate(timed.begin(), timed.end(), 0.0) / double(timed.size());
  const double slowest = timed.empty() ? total_s : *std::max_element(timed.begin(), timed.end());
  const Mfu mfu = s.planning.mfu(s.run.model, s.run.exec.global_batch_size, step_s, r.peak_flops);
  const int64_t tokens_per_step = s.run.exec.global_batch_size * s.run.model.seq_len;
  std::printf("done: %lld steps in %s; %.0f tokens/s, %s: median of the %zu steps after the first, %.4g s (mean "
              "%.4g s, slowest %.4g s), against a peak of %.1f GFLOP/s (%s)%s; validation loss %.4f\n",
              (long long)r.steps, duration(total_s).c_str(), double(tokens_per_step) / step_s,
              mfu_text(mfu).c_str(), timed.size(), step_s, mean_s, slowest, r.peak_flops / 1e9, r.peak_which.c_str(),
              r.peak_raised ? fmt::format(" (raised from the measured {:.1f}: a step ran faster than it)", r.measured_peak / 1e9).c_str()
                            : "",
              r.last_val);
  std::printf("peak memory: %s resident (getrusage, rank 0) vs %s trainer buffers vs %s planner prediction\n",
              mib(mems[1]).c_str(), mib(mems[0]).c_str(), mib(planned_bytes(s)).c_str());
}

// One step's line of the log; per_step (the median so far) gives the time left.
void print_step(const TrainSettings& s, int64_t done, double loss, double lr, double tps, const Mfu& mfu,
                double per_step, const std::optional<double>& v, const std::vector<double>& mtp) {
  std::string mtp_text;  // Megatron's "mtp_1 loss": each multi-token-prediction depth's own
  for (size_t k = 0; k < mtp.size(); ++k) mtp_text += fmt::format(" | mtp_{} loss {:.4f}", k + 1, mtp[k]);
  std::printf("step %5lld/%lld | loss %.4f%s | lr %.2e | %8.0f tok/s | MFU %5.1f%% | ETA %s%s\n", (long long)done,
              (long long)s.steps, loss, mtp_text.c_str(), lr, tps, 100.0 * mfu.full(),
              duration(per_step * double(s.steps - done)).c_str(), v ? fmt::format(" | val loss {:.4f}", *v).c_str() : "");
  std::fflush(stdout);
}

int train(const TrainSettings& settings, const Problems& parsed, bool mpi, comm::World& ranks) {
  const int rank = ranks.rank(), world = ranks.size();
  TrainSettings s = settings;
  std::optional<checkpoint::CheckpointReader> resume = check_on_every_rank(s, parsed, mpi, ranks, world);
  Problems problems;
  // What the machine has, before anything is allocated (gathered: the same view on every rank).
  Mesh mesh(s.run.layout, std::max<int64_t>(s.run.cluster.gpus_per_node, 1));
  const ResourceView resources = gather_resources(s, ranks, mesh.coords_of(rank).pp());
  check_resources(s, resources, problems);
  problems.throw_if_any();
  const ThreadChoice threads = choose_threads(s, resources.own_node_ranks, affinity_cores(),
                                              std::max(1u, std::thread::hardware_concurrency()));
  const int64_t stop_at = s.stop_at < 0 ? s.steps : std::min(s.stop_at, s.steps);
  const int64_t eval_every = s.eval_every >= 0 ? s.eval_every : std::max<int64_t>(1, s.steps / 5);
  const int64_t log_every = s.log_every > 0 ? s.log_every : std::max<int64_t>(1, s.steps / 20);

  // The device first: its ranks' groups may talk through it (NCCL on the kernels' stream).
  std::unique_ptr<kernels::Kernels> kernels =
      s.make_device_kernels ? s.make_device_kernels() : kernels::make_cpu_kernels(threads.threads);
  ProcessGroups groups = open_groups(s, mesh, mpi, ranks, *kernels);
  auto data = s.data ? token_file_source(s.data, s.run.model.seq_len, s.seed)
                     : synthetic_source(s.run.model.vocab, s.run.model.seq_len, s.seed);
  auto val = validation_source(s);
  TrainerOptions o = trainer_options(s, *kernels);
  if (s.compute_slowdown) o.compute_slowdown = s.compute_slowdown(rank);
  DistTrainer trainer(s.run, groups, *data, o);
  double load_s = 0;
  const int64_t first = resume ? resume_from(trainer, groups, *resume, s, load_s) : 0;

  MetricsWriter metrics;
  open_metrics(metrics, rank, s, groups);

  const Peak peak = measure_peak(s, *kernels, *groups.world, threads.threads, resources.own_node_ranks);
  // The model FLOPs of a step (plan::model_flops_per_step, through the caller's mfu).
  const double step_flops = s.planning.mfu(s.run.model, s.run.exec.global_batch_size, 1.0, 1.0).model_flops;
  // MFU never passes 100%: a step faster than the peak means the peak was measured low, and it is
  // raised to that step's rate (the summary says so).
  double peak_flops = peak.flops;
  bool peak_raised = false;
  const int64_t tokens_per_step = s.run.exec.global_batch_size * s.run.model.seq_len;
  const std::vector<RankActivations> activations = gather_activations(trainer, groups, mesh, world);
  if (rank == 0) {
    print_startup(s, world, trainer, *data, kernels->device_name(),
                  s.make_device_kernels ? ""
                  : launch::openmp_wait_note().empty() ? threads.note
                                               : threads.note + "; " + launch::openmp_wait_note(),
                  peak, step_flops, first, activations);
    warn_stop_without_checkpoint(s);
    if (resume) std::printf("checkpoint: %s loaded in %.2f s\n", resume->dir().c_str(), load_s), std::fflush(stdout);
  }
  const int64_t run_steps = stop_at - first;
  RunStart start;
  start.run = s.run, start.run_steps = run_steps, start.first_step = first;
  start.pp_message_s = trainer.pp_message_s(), start.cp_block_s = trainer.cp_block_s();
  start.ep_clock_error_s = trainer.ep_clock_error_s();
  StragglerWatch watch = world > 1 ? s.planning.straggler_watch(s, mesh, world, start.straggler_off) : StragglerWatch();
  if (watch.active()) start.straggler_rule = watch.rule().text();
  if (rank == 0 && world > 1) {
    if (watch.active()) {
      std::string per_stage;
      for (int r = 0; r < world; ++r)
        if (mesh.coords_of(r).tp() == 0 && mesh.coords_of(r).dp() == 0 && mesh.coords_of(r)[Dim::CP] == 0)
          per_stage += fmt::format("{}stage {} {:.2f} ms", per_stage.empty() ? "" : ", ", mesh.coords_of(r).pp(),
                                   watch.predicted(r) * 1e3);
      std::printf("stragglers  %s (the first step not judged); predicted compute per step: %s\n",
                  start.straggler_rule.c_str(), per_stage.c_str());
    } else {
      std::printf("stragglers  not watched: %s\n", start.straggler_off.c_str());
    }
  }
  if (s.evict_stragglers && !watch.active()) {
    Problems p;
    p.add("--evict-stragglers evicts ranks slower than their stage's prediction, but there is none: " +
              start.straggler_off,
          "give --prediction-cluster FILE (`trident bench` writes it), or drop --evict-stragglers", "evict-stragglers");
    p.throw_if_any();
  }
  const std::unique_ptr<StepSink> sink = s.planning.report(s);  // the run's step records go there
  sink->start(start);

  int64_t saved_at = -1;
  int64_t every = s.checkpoint_every;  // auto: set after the first save, from its measured time
  // Saves during the run overlap the next steps (the run waits for the state's copy only); the
  // last one, and one before a stop, the run waits for whole. Declared after the trainer: a save
  // in flight is joined (and, not completed, removed) before the trainer goes.
  AsyncSaver saver(trainer, groups, s.checkpoint_path);
  int64_t in_flight_step = -1;
  // wait: until the save in flight is in place; else only if every writer is done (after each step).
  auto complete_in_flight = [&](bool wait = true) {
    if (!saver.in_flight()) return;
    if (wait) saver.complete();
    else if (!saver.poll()) return;
    if (rank == 0)
      std::printf("checkpoint: %s in place (the save of step %lld, written in the background: durable %.2f s after "
                  "it began)\n",
                  s.checkpoint_path.c_str(), (long long)in_flight_step, saver.last_durable_seconds()),
          std::fflush(stdout);
  };
  // background: the run goes on while the shard is written (else it returns once the save is in place).
  auto save = [&](double loss, int64_t done, bool background = false) {
    complete_in_flight();
    const auto t0 = std::chrono::steady_clock::now();
    if (background) saver.start(checkpoint_meta(s, done), loss), in_flight_step = done;
    else saver.save_now(checkpoint_meta(s, done), loss);
    saved_at = done;
    // The time the run waited for it: whole (every rank's slices written, synced, and the directory
    // swapped in), or in the background until the state has left the trainer's buffers.
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rank == 0 && !background)
      std::printf("checkpoint: %s (step %lld) saved in %.2f s\n", s.checkpoint_path.c_str(), (long long)done, took),
          std::fflush(stdout);
    else if (rank == 0)
      std::printf("checkpoint: %s (step %lld) state taken in %.2f s (the run's wait); finishing it in the background\n",
                  s.checkpoint_path.c_str(), (long long)done, took),
          std::fflush(stdout);
  };
  // A write error on the metrics file (a full disk) stops every rank at that step, after saving
  // the checkpoint there, so the steps done are kept and the run resumes from them.
  std::string metrics_error;  // rank 0's
  auto stop_if_metrics_failed = [&](double loss, int64_t done) {
    if (s.metrics_path.empty()) return;
    double ok = metrics_error.empty() ? 1 : 0;
    all_reduce_f64(*groups.world, &ok, 1, comm::ReduceOp::Min);
    if (ok > 0.5) return;
    std::string kept = "no --checkpoint was given: the steps are lost";
    if (!s.checkpoint_path.empty()) {
      if (saved_at != done) save(loss, done);
      else complete_in_flight();  // the save at this step, started in the background, put in place
      kept = fmt::format("the checkpoint '{}' holds step {}: continue with --resume {}", s.checkpoint_path, done,
                         s.checkpoint_path);
    }
    throw_metrics_write(s, metrics_error, done, kept);
  };
  const auto t_start = std::chrono::steady_clock::now();
  const engine::LoadProbe load_probe(threads.threads);
  double last_val = NAN, last_loss = NAN;
  std::vector<double> timed;  // seconds of the steps after the first
  for (int64_t step = first; step < stop_at; ++step) {
    if (s.before_step) s.before_step(step, rank);
    const double loss = last_loss = trainer.step(step);
    const int64_t done = step + 1;  // steps counted from 1
    double seconds = 0;
    const std::vector<PhaseTimes> row = gather_phase_times(trainer.last_times(), groups, world, seconds);
    StepRecord record;
    record.step = done, record.loss = loss, record.times = row, record.cp_blocks = trainer.cp_blocks_per_step();
    record.ep_load_imbalance = trainer.routing_stats().ep_load_imbalance;
    std::vector<Straggler> named;
    if (watch.active() && done > first + 1) named = watch.observe(done, row);
    for (const Straggler& x : named) {
      record.stragglers.push_back(x.text());
      if (rank == 0) std::printf("straggler: %s\n", x.text().c_str()), std::fflush(stdout);
    }
    if (done > first + 1 || stop_at - first == 1) timed.push_back(seconds);  // the first step warms caches
    if (step_flops / seconds > peak_flops) peak_flops = step_flops / seconds, peak_raised = true;
    std::optional<double> v;
    if ((eval_every > 0 && done % eval_every == 0) || done == stop_at)
      v = last_val = trainer.evaluate(*val, s.eval_batches);
    record.val_loss = v;
    sink->step(record);
    if (rank == 0) {
      const Mfu mfu = s.planning.mfu(s.run.model, s.run.exec.global_batch_size, seconds, peak_flops);
      const double tps = double(tokens_per_step) / seconds;
      const double lr = engine::learning_rate(s.adamw, step);
      if (done % log_every == 0 || done == first + 1 || done == stop_at || v)
        print_step(s, done, loss, lr, tps, mfu, timed.empty() ? seconds : median(timed), v, trainer.mtp_losses());
      if (metrics.is_open()) {
        nlohmann::json j =
            metrics_line(done, loss, lr, tps, mfu.full(), trainer.last_grad_norm(), seconds, v, row, world);
        j["mfu_causal_halved"] = mfu.causal();
        // When the step ended (wall clock): `train --elastic` measures the time a failure lost from it.
        j["unix_time"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        add_routing(j, trainer.routing_stats());
        for (size_t k = 0; k < trainer.mtp_losses().size(); ++k)
          j["mtp_" + std::to_string(k + 1) + "_loss"] = trainer.mtp_losses()[k];
        if (watch.active() && done > first + 1) {
          const auto& ratios = watch.ratios();
          const auto worst = std::max_element(ratios.begin(), ratios.end());
          j["compute_vs_predicted"] = {{"median", watch.median_ratio()}, {"max", *worst},
                                       {"max_rank", worst - ratios.begin()}};
          if (!named.empty()) {
            std::vector<int> ranks;
            for (const Straggler& x : named) ranks.push_back(x.rank);
            j["stragglers"] = ranks;
          }
        }
        write_metrics(metrics, j, metrics_error);
      }
    }
    complete_in_flight(false);  // a background save in place as soon as it is durable
    if (every == kCheckpointEveryAuto && done >= first + 2 && done < stop_at && !s.checkpoint_path.empty()) {
      // --checkpoint-every auto: save after the second step (the first warms caches), timed, then
      // at the Young/Daly interval.
      const auto t0 = std::chrono::steady_clock::now();
      save(loss, done, true);
      double measured[2] = {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), seconds};
      all_reduce_f64(*groups.world, measured, 2, comm::ReduceOp::Max);
      const AutoSaveInterval a = auto_save_interval(measured[0], measured[1], s.failures_per_1000_gpu_days, world);
      every = a.steps;
      if (rank == 0) std::printf("%s\n", auto_save_interval_text(a).c_str()), std::fflush(stdout);
    } else if (every > 0 && done % every == 0 && done < stop_at && !s.checkpoint_path.empty()) {
      save(loss, done, true);
    }
    if (done == stop_at && rank == 0) close_metrics(metrics, metrics_error);
    stop_if_metrics_failed(loss, done);
    if (s.evict_stragglers && !named.empty() && done < stop_at) {
      // Every rank named the same ranks at this step: save here (no step is lost) and stop, so the
      // supervisor (`train --elastic`) restarts without their nodes.
      if (!s.checkpoint_path.empty() && saved_at != done) save(loss, done);
      complete_in_flight();  // a background save of this step: in place before the stop
      std::string which;
      for (const Straggler& x : named) which += fmt::format("{}evicting straggler rank {}: {}", which.empty() ? "" : "; ", x.rank, x.text());
      throw StragglersEvicted(which);
    }
  }
  const std::optional<MachineLoad> load = node_load(load_probe, groups, resources, world, threads.threads);
  const std::vector<float> mems = gather_memory(trainer, groups, world);
  if (rank == 0) {
    const RunTotals totals{run_steps, std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count(),
                           timed, peak.flops, peak_flops, peak_raised, peak.which, last_val};
    print_summary(s, totals, mems);
    sink->finish(RunEnd{mesh, world, mems, load});
    std::fflush(stdout);
  }
  if (!s.checkpoint_path.empty() && run_steps > 0) save(last_loss, stop_at);
  return 0;
}

}  // namespace

int run_training(const TrainSettings& s, const Problems& parsed) {
  if (const std::string missing = s.planning.missing(); !missing.empty())
    throw std::invalid_argument("run_training: TrainSettings::planning lacks " + missing +
                                " (the caller sets it: train_app::planning())");
  const bool mpi = launched_by_mpi();
  std::unique_ptr<comm::World> world = comm::open_world(mpi);  // MPI starts here, or a world of one
  const int rank = world->rank();
  int code = 0;
  try {
    code = train(s, parsed, mpi, *world);
  } catch (const InputError& e) {
    if (rank == 0) print_problems(e);
    code = 2;
  } catch (const SaveRefused& e) {
    if (rank == 0) std::fprintf(stderr, "trident train: %s\n", e.what());
    code = 1;
  } catch (const StragglersEvicted& e) {
    if (rank == 0) std::fprintf(stderr, "trident train: %s\n", e.what()), std::fflush(stderr);
    code = 3;
  } catch (const std::exception& e) {
    if (!mpi) throw;
    char host[256] = "?";
    gethostname(host, sizeof host);
    std::fprintf(stderr, "trident train: rank %d (host %s, pid %d) failed: %s\n", rank, host, int(getpid()),
                 e.what());
    std::fflush(stderr);
    world->abort(1);  // the other ranks stop instead of waiting on this one
  }
  comm::close_world(std::move(world));
  return code;
}

}  // namespace trident::parallel
