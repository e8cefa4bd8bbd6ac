// `trident train --elastic` (see elastic_supervisor.h).
#include "train_app/elastic_supervisor.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/options.h"
#include "core/run_spec.h"
#include "plan/survivor_replan.h"
#include "rehearse/rehearsal_prediction.h"
#include "report/launch_config.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/measure/emulated_hosts.h"
#include "runtime/parallel/elastic_failure.h"

namespace trident::train_app {

using namespace trident::parallel;  // the failure reading and the train settings it launches

namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The step lines an attempt's ranks wrote (rank 0's --metrics file).
struct AttemptSteps {
  std::vector<std::string> lines;
  int64_t first = -1, last = -1;      // steps
  double first_start = 0, last_end = 0;  // unix seconds: when its first step began, its last ended
  std::vector<std::pair<int64_t, double>> step_s;  // step, seconds
};

AttemptSteps read_attempt(const std::string& path) {
  AttemptSteps a;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step")) continue;  // a line cut by the failure
    a.lines.push_back(line);
    const int64_t step = j["step"].get<int64_t>();
    const double s = j.value("step_s", 0.0), t = j.value("unix_time", 0.0);
    if (a.first < 0) a.first = step, a.first_start = t - s;
    a.last = step, a.last_end = t;
    a.step_s.emplace_back(step, s);
  }
  return a;
}

// The step the last checkpoint holds, or nullopt when none was written yet.
std::optional<int64_t> checkpoint_step(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return std::nullopt;
  try {
    const checkpoint::CheckpointReader reader(dir);
    return reader.meta().value("step", int64_t(0));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string join(const std::vector<int>& xs) {
  std::string s;
  for (int x : xs) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}

// The run the replan searches from: this run as the rehearsal's prediction sees it (fp32, the
// runtime's overlaps: prediction_run) on a cluster of its nodes, ranks_per_node "GPUs" each, of
// the prediction cluster's GPU (not shared: the survivors' count is what is searched).
RunSpec replan_base(const ElasticSetup& e, const TrainSettings& s, const RunSpec& current) {
  RunSpec r = rehearse::prediction_run(current, s.prediction_cluster, int64_t(std::thread::hardware_concurrency()),
                             s.prediction_cost);
  r.cluster.gpu = e.gpu;
  r.cluster.gpus_per_node = e.ranks_per_node;
  r.cluster.nodes = current.layout.world_size() / e.ranks_per_node;
  return r;
}

// The survivors' run: the replan's layout and the settings the search chose (micro-batch,
// schedule, ZeRO, recomputation, sequence parallel); the rest of the run as it was.
RunSpec survivors_run(const RunSpec& current, const RunSpec& best) {
  RunSpec r = current;
  r.layout = best.layout;
  r.exec.micro_batch_size = best.exec.micro_batch_size;
  r.exec.global_batch_size = best.exec.global_batch_size;
  r.exec.schedule = best.exec.schedule;
  r.exec.virtual_stages = best.exec.virtual_stages;
  r.exec.zero = best.exec.zero;
  r.exec.recompute = best.exec.recompute;
  r.exec.sequence_parallel = best.exec.sequence_parallel;
  return r;
}

std::string layout_text(const RunSpec& r) {
  return fmt::format("{}, micro-batch {}, zero {}, schedule {}", r.layout.describe(), r.exec.micro_batch_size,
                     r.exec.zero, to_string(r.exec.schedule));
}

}  // namespace

void read_elastic_options(const OptionValues& values, ElasticSetup& e, Problems& p) {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(v)) {
      p.add(std::string("--elastic starts the ranks itself, but this process is a rank (") + v + " is set)",
            "run `trident train --elastic ...` without mpirun or srun", "elastic-under-launcher");
      break;
    }
  const TrainSettings& s = e.settings;
  if (s.checkpoint_path.empty() || s.checkpoint_every == 0)
    p.add("--elastic resumes from the last checkpoint, but " +
              std::string(s.checkpoint_path.empty() ? "--checkpoint is not given" : "--checkpoint-every is not given"),
          "add --checkpoint DIR --checkpoint-every N (or auto)", "elastic-checkpoint");
  const bool slurm = std::getenv("SLURM_JOB_ID") != nullptr;
  if (auto n = values.get_int("ranks-per-node", p)) {
    e.ranks_per_node = *n;
  } else if (const char* t = std::getenv("SLURM_NTASKS_PER_NODE"); slurm && t && std::atoll(t) > 0) {
    e.ranks_per_node = std::atoll(t);
  }
  const int64_t world = s.run.layout.world_size();
  if (e.ranks_per_node < 1 || world % e.ranks_per_node != 0)
    p.add(fmt::format("--ranks-per-node {} does not divide the {} ranks of {}", e.ranks_per_node, world,
                      s.run.layout.describe()),
          "give a divisor of the rank count (the ranks each node runs)", "elastic-ranks-per-node");
  // The replan needs this machine's description: the file train's prediction reads.
  std::error_code ec;
  if (s.prediction_cluster.empty() || !std::filesystem::is_regular_file(s.prediction_cluster, ec)) {
    p.add("--elastic re-plans for the ranks left with the planner, which needs this machine's cluster file, but " +
              (s.prediction_cluster.empty() ? std::string("--prediction-cluster is not given")
                                            : "'" + s.prediction_cluster + "' is not there"),
          "run `mpirun -np 2 trident bench` (writes trident-cluster.toml), or give --prediction-cluster FILE",
          "elastic-cluster");
  } else {
    try {
      const RunSpec r = rehearse::prediction_run(s.run, s.prediction_cluster, int64_t(std::thread::hardware_concurrency()),
                                       s.prediction_cost);
      e.gpu = r.cluster.gpu;
      // The GPU as the file describes it: prediction_run shares its rate among the ranks of this run.
      Problems ignored;
      std::vector<OptionDef> defs = cluster_options();
      OptionValues values(defs);
      values.load_toml_file(s.prediction_cluster, ignored);
      e.gpu = resolve_cluster(values, ignored).gpu;
    } catch (const InputError& x) {
      for (const auto& q : x.problems())
        p.add("--prediction-cluster '" + s.prediction_cluster + "': " + q.what, q.fix, "elastic-cluster");
    }
  }
  e.launcher = split_words(values.get_string("launcher").value_or(slurm ? "srun" : "mpirun"));
  if (e.launcher.empty())
    p.add("--launcher is empty", "give the launcher, e.g. --launcher mpirun or --launcher 'mpirun --oversubscribe'",
          "elastic-launcher");
}

int run_elastic(const ElasticSetup& e) {
  const TrainSettings& s = e.settings;
  const std::string folder = s.checkpoint_path + "-elastic";  // the attempts' config and metrics files
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) {
    std::fprintf(stderr, "trident train: error: --elastic cannot make its folder %s: %s\n", folder.c_str(),
                 ec.message().c_str());
    return 1;
  }
  std::ofstream metrics;
  if (!s.metrics_path.empty()) {
    metrics.open(s.metrics_path, std::ios::trunc);
    if (!metrics) {
      std::fprintf(stderr, "trident train: error: cannot write the metrics file '%s'\n", s.metrics_path.c_str());
      return 1;
    }
  }
  auto write_metrics = [&](const std::string& line) {
    if (!metrics.is_open()) return true;
    metrics << line << "\n";
    metrics.flush();
    return bool(metrics);
  };
  const std::string launcher_name = std::filesystem::path(e.launcher[0]).filename().string();
  RunSpec run = s.run;
  nlohmann::json events = nlohmann::json::array();
  std::optional<size_t> restart_pending;  // the event whose restart time the next attempt gives
  double failed_exit_time = 0;
  for (int attempt = 1;; ++attempt) {
    // The ranks' run: the user's options with this attempt's layout, its own metrics file, and
    // from the second attempt on --resume of the checkpoint.
    OptionValues values = e.values;
    const std::string attempt_metrics = fmt::format("{}/attempt-{}-metrics.jsonl", folder, attempt);
    values.set("metrics", attempt_metrics, "--elastic");
    const std::optional<int64_t> resume_step = attempt > 1 ? checkpoint_step(s.checkpoint_path) : std::nullopt;
    std::set<std::string> skip = {"elastic", "ranks-per-node", "launcher", "config"};  // evict-stragglers goes on
    if (resume_step) skip.insert("init-from"), skip.insert("resume");
    const std::string config = fmt::format("{}/attempt-{}.toml", folder, attempt);
    {
      std::ofstream out(config, std::ios::trunc);
      out << config_toml(e.defs, values, run, skip,
                         {fmt::format("Written by trident train --elastic: attempt {} on {}.", attempt,
                                      layout_text(run))});
      if (!out) {
        std::fprintf(stderr, "trident train: error: --elastic cannot write %s\n", config.c_str());
        return 1;
      }
    }
    std::vector<std::string> argv = e.launcher;
    argv.push_back(launcher_name == "srun" ? "-n" : "-np");
    argv.push_back(std::to_string(run.layout.world_size()));
    argv.push_back(measure::self_executable());
    argv.push_back("train");
    argv.push_back("--config");
    argv.push_back(config);
    if (resume_step) argv.push_back("--resume"), argv.push_back(s.checkpoint_path);
    std::printf("elastic: attempt %d: %s ranks on %lld nodes, %s%s\n", attempt, std::to_string(run.layout.world_size()).c_str(),
                (long long)(run.layout.world_size() / e.ranks_per_node), layout_text(run).c_str(),
                resume_step ? fmt::format(", resuming at step {}", *resume_step + 1).c_str() : "");
    std::fflush(stdout);
    // Marks the ranks as this supervisor's (they take its --evict-stragglers).
    setenv("TRIDENT_ELASTIC_ATTEMPT", std::to_string(attempt).c_str(), 1);
    std::string said;
    const int code = measure::run_launcher(argv, 0, &said);
    const double exit_time = unix_now();
    const AttemptSteps steps = read_attempt(attempt_metrics);
    std::filesystem::remove(attempt_metrics, ec);
    // The restart of the previous failure ends when this attempt's first step begins.
    if (restart_pending && steps.first >= 0) {
      nlohmann::json& ev = events[*restart_pending];
      ev["restart_s"] = steps.first_start - failed_exit_time;
      ev["time_lost_s"] = ev["lost_work_s"].get<double>() + ev["detection_s"].get<double>() + ev["restart_s"].get<double>();
      std::printf("elastic: back at step %lld %.2f s after the failure was seen; time lost %.2f s = lost work %.2f s + "
                  "detection %.2f s + restart %.2f s\n",
                  (long long)steps.first, ev["restart_s"].get<double>(), ev["time_lost_s"].get<double>(),
                  ev["lost_work_s"].get<double>(), ev["detection_s"].get<double>(), ev["restart_s"].get<double>());
      if (!write_metrics(nlohmann::json{{"event", "elastic_back"}, {"attempt", attempt}, {"step", steps.first},
                                        {"restart_s", ev["restart_s"]}, {"time_lost_s", ev["time_lost_s"]}}
                             .dump())) {
        std::fprintf(stderr, "trident train: error: cannot write the metrics file '%s'\n", s.metrics_path.c_str());
        return 1;
      }
      restart_pending.reset();
    }
    for (const auto& line : steps.lines)
      if (!write_metrics(line)) {
        std::fprintf(stderr, "trident train: error: cannot write the metrics file '%s'\n", s.metrics_path.c_str());
        return 1;
      }
    if (code == 0 || code == 2 || measure::interrupting_signal()) {
      if (code == 0 && !events.empty() && !s.report_path.empty()) {
        std::ifstream in(s.report_path);
        nlohmann::json report = nlohmann::json::parse(in, nullptr, false);
        if (!report.is_discarded()) {
          report["elastic"] = events;
          std::ofstream out(s.report_path, std::ios::trunc);
          out << report.dump(2) << "\n";
        }
      }
      if (code == 0)
        std::printf("elastic: finished after %d attempt(s), %zu restart(s)\n", attempt, events.size());
      std::fflush(stdout);
      return code;
    }
    // Failed: which ranks, which nodes.
    const LostRanks lost = lost_ranks_from_output(said);
    if (lost.ranks.empty()) {
      std::fprintf(stderr,
                   "trident train: --elastic: attempt %d failed (launcher exit %d) and no rank was reported lost: "
                   "not restarted (the output above says why)\n",
                   attempt, code);
      return 1;
    }
    const std::vector<int64_t> lost_nodes = nodes_of_ranks(lost.ranks, e.ranks_per_node);
    const RunSpec base = replan_base(e, s, run);
    std::vector<std::string> names;
    std::vector<int> lost_node_ids;
    for (int64_t n : lost_nodes) names.push_back(fmt::format("node{}", n)), lost_node_ids.push_back(int(n));
    Problems q;
    const plan::Survivors survivors = plan::survivors_from_lost_nodes(names, base.cluster, q);
    if (!q.empty()) {
      std::fprintf(stderr, "trident train: --elastic: attempt %d lost rank(s) %s on node(s) %s: %s; not restarted\n",
                   attempt, join(lost.ranks).c_str(), join(lost_node_ids).c_str(), q.list().front().what.c_str());
      return 1;
    }
    const plan::SurvivorPlan plan = plan::replan_for_survivors(base, survivors, plan::BatchPolicy::Keep,
                                                               plan::LrRule::Linear, cost_table(base), 0.0, 1);
    if (!plan.best) {
      std::string why;
      for (const auto& [reason, count] : plan.search.rejected) why += fmt::format("\n  {} x {}", count, reason);
      std::fprintf(stderr,
                   "trident train: --elastic: no layout of the run fits the %lld node(s) left (%lld searched, "
                   "rejected:%s): not restarted\n",
                   (long long)survivors.nodes, (long long)plan.search.enumerated, why.c_str());
      return 1;
    }
    const std::optional<int64_t> saved = checkpoint_step(s.checkpoint_path);
    const int64_t from = saved.value_or(0);
    double lost_work = 0;
    for (const auto& [step, sec] : steps.step_s)
      if (step > from) lost_work += sec;
    const double detection = steps.last >= 0 ? exit_time - steps.last_end : 0;
    const RunSpec next = survivors_run(run, plan.best->run);
    nlohmann::json ev = {{"event", "elastic_restart"},
                         {"attempt", attempt},
                         {"launcher_exit", code},
                         {"lost_ranks", lost.ranks},
                         {"lost_nodes", lost_node_ids},
                         {"evidence", lost.evidence},
                         {"failed_after_step", steps.last},
                         {"checkpoint_step", saved ? nlohmann::json(*saved) : nlohmann::json(nullptr)},
                         {"lost_steps", std::max<int64_t>(0, steps.last - from)},
                         {"lost_work_s", lost_work},
                         {"detection_s", detection},
                         {"nodes_before", base.cluster.nodes},
                         {"nodes_after", plan.nodes_used},
                         {"layout_before", layout_text(run)},
                         {"layout_after", layout_text(next)},
                         {"dp", next.layout.dp},
                         {"tp", next.layout.tp},
                         {"pp", next.layout.pp},
                         {"micro_batch_size", next.exec.micro_batch_size},
                         {"predicted_step_ratio", plan.step_ratio}};
    std::printf("elastic: attempt %d lost rank(s) %s (node(s) %s of %lld, %lld rank(s) each), after step %lld; "
                "the last checkpoint holds step %s: %lld step(s) lost (%.2f s of work), the failure seen %.2f s after "
                "the last step\n"
                "elastic: replan (batch keep) on %lld node(s) left: %s, predicted step time x%.3f of the layout before; "
                "using %lld of them\n",
                attempt, join(lost.ranks).c_str(), join(lost_node_ids).c_str(), (long long)base.cluster.nodes,
                (long long)e.ranks_per_node, (long long)steps.last, saved ? std::to_string(*saved).c_str() : "none",
                (long long)std::max<int64_t>(0, steps.last - from), lost_work, detection, (long long)survivors.nodes,
                layout_text(next).c_str(), plan.step_ratio, (long long)plan.nodes_used);
    std::fflush(stdout);
    if (!write_metrics(ev.dump())) {
      std::fprintf(stderr, "trident train: error: cannot write the metrics file '%s'\n", s.metrics_path.c_str());
      return 1;
    }
    events.push_back(ev);
    restart_pending = events.size() - 1;
    failed_exit_time = exit_time;
    run = next;
  }
}

}  // namespace trident::train_app
