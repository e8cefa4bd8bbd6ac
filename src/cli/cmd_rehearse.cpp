// trident rehearse: the plan -> small run -> measured -> verdict loop in one command. Reads a plan
// (the file `plan --emit FILE.toml` writes; flags override), derives its rehearsal for this
// machine (runtime/parallel/rehearsal_shape.h) and prints how, runs it through `trident train`
// under mpirun (on emulated hosts with shaped links with --hosts H), then judges the rehearsal
// report's measured terms against the planner's prediction for this run on these links.
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "cli/cli_options.h"
#include "cli/command.h"
#include "cli/runtime_commands.h"
#include "core/input_file.h"
#include "core/output_path.h"
#include "core/run_values.h"
#include "runtime/data/corpus.h"
#include "runtime/data/token_file.h"
#include "runtime/parallel/emulated_hosts.h"
#include "runtime/parallel/rehearsal_link.h"
#include "runtime/parallel/rehearsal_shape.h"
#include "runtime/parallel/rehearsal_verdict.h"
#include "runtime/parallel/resource_check.h"

namespace trident::cli {
namespace {

struct RehearseArgs {
  std::unique_ptr<CliOptions> options;
  int64_t ranks = 0, hosts = 1, steps = 8;
  double scale = 0, tolerance = 0.25, link_gbps = 0;
  std::string out = "rehearsal", bench;
  bool dry_run = false;
};

void check_args(const RehearseArgs& a, Problems& p) {
  if (a.hosts < 1 || a.hosts > 8) p.add(fmt::format("--hosts {} is outside 1 .. 8", a.hosts), "use e.g. --hosts 2", "rehearse-hosts");
  if (a.ranks < 0 || a.ranks > 64) p.add(fmt::format("--ranks {} is outside 1 .. 64", a.ranks), "use e.g. --ranks 8", "rehearse-ranks");
  if (a.steps < 3 || a.steps > 1000)
    p.add(fmt::format("--steps {} is outside 3 .. 1000 (the first steps are warm-up)", a.steps), "use e.g. --steps 8", "rehearse-steps");
  if (!(a.tolerance > 0 && a.tolerance < 10))
    p.add(fmt::format("--tolerance {} is outside (0, 10)", a.tolerance), "use e.g. --tolerance 0.25", "rehearse-tolerance");
  if (!(a.link_gbps >= 0 && a.link_gbps <= 100))
    p.add(fmt::format("--link-gbytes-per-s {} is outside 0 .. 100", a.link_gbps), "use e.g. --link-gbytes-per-s 0.05",
          "rehearse-link");
  if (const std::string kind = a.bench.empty() ? "" : special_file_kind(a.bench); !kind.empty())
    p.add("--bench '" + a.bench + "' is " + (kind == "missing" ? "missing" : kind), "give the file `trident bench` wrote, or drop --bench "
          "(rehearse then measures this machine itself)", "rehearse-bench");
}

// `trident train`'s arguments for the rehearsal run: every setting of the derived RunSpec.
std::vector<std::string> train_arguments(const RunSpec& r, const RehearseArgs& a, const std::string& cluster_file) {
  const ModelSpec& m = r.model;
  std::vector<std::string> v = {"train", "--family", to_string(m.family), "--layers", std::to_string(m.layers),
                                "--hidden", std::to_string(m.hidden), "--heads", std::to_string(m.heads),
                                "--ffn-hidden", std::to_string(m.ffn_hidden), "--seq-len", std::to_string(m.seq_len),
                                "--vocab", std::to_string(m.vocab)};
  if (m.kv_heads > 0) v.insert(v.end(), {"--kv-heads", std::to_string(m.kv_heads)});
  for (const auto& [key, text] : run_option_texts(r)) {
    if (key == "nodes" || key == "gpus-per-node") continue;
    if (text == "true" || text == "false") v.push_back((text == "true" ? "--" : "--no-") + key);
    else v.insert(v.end(), {"--" + key, text});
  }
  v.insert(v.end(), {"--steps", std::to_string(a.steps), "--eval-every", "0", "--eval-batches", "1", "--log-every",
                     std::to_string(a.steps), "--report", a.out + "/report.json", "--html", a.out + "/report.html",
                     "--prediction-cluster", cluster_file});
  return v;
}

std::string shell_words(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& w : v) s += (s.empty() ? "" : " ") + w;
  return s;
}

std::vector<std::string> mpirun(int64_t np, const std::vector<std::string>& placement, const std::vector<std::string>& cmd) {
  std::vector<std::string> v = {"mpirun", "--oversubscribe", "--bind-to", "none", "-np", std::to_string(np)};
  v.insert(v.end(), placement.begin(), placement.end());
  v.push_back(parallel::self_executable());
  v.insert(v.end(), cmd.begin(), cmd.end());
  return v;
}

engine::MachineLoad probe_load() {
  const engine::LoadProbe probe(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  return probe.stop();
}

int interrupted(int sig) {
  std::fprintf(stderr, "trident rehearse: interrupted (signal %d); everything it made was removed\n", sig);
  return 128 + sig;
}

// Makes the links (emulated hosts with --hosts), runs the rehearsal, removes the hosts and judges
// the report into `verdict`. Returns 0, or the exit code of a failed or interrupted run.
int rehearse_on_links(const RunSpec& plan, const parallel::RehearsalShape& shape, const RehearseArgs& a, int64_t ranks,
                      const std::vector<std::string>& train, parallel::Verdict& verdict, nlohmann::json& links_json) {
  const parallel::RehearsalLinks links = parallel::prepare_links(plan, shape, a.bench, a.out, a.link_gbps * 1e9, mpirun);
  std::printf("%s", links.text.c_str());
  links_json = links.json;
  const auto placement = links.hosts ? links.hosts->mpirun_options() : std::vector<std::string>{};
  const auto launch = mpirun(ranks, placement, train);
  verdict.load_start = probe_load();
  std::printf("running the rehearsal: %s\n", shell_words(launch).c_str());
  const int rc = parallel::run_launcher(launch);
  verdict.load_end = probe_load();
  if (links.hosts) {
    links.hosts->stop();
    std::printf("emulated hosts removed (%s-*)\n", links.hosts->prefix().c_str());
  }
  if (const int sig = parallel::interrupting_signal()) return interrupted(sig);
  if (rc != 0) {
    std::fprintf(stderr, "trident rehearse: the rehearsal's training run failed (exit %d; its output is above)\n", rc);
    return rc == 2 ? 2 : 1;
  }
  std::ifstream in(a.out + "/report.json");
  const nlohmann::json report = nlohmann::json::parse(in, nullptr, false);
  if (report.is_discarded()) throw std::runtime_error("cannot read the rehearsal report " + a.out + "/report.json");
  const parallel::Verdict judged = parallel::judge_rehearsal(report, a.tolerance);
  const auto start = verdict.load_start, end = verdict.load_end;
  verdict = judged;
  verdict.load_start = start, verdict.load_end = end;
  return 0;
}

int run_rehearse(RehearseArgs& a) {
  Problems p;
  OptionValues values = a.options->collect(p);
  check_args(a, p);
  p.throw_if_any();
  const RunSpec plan = resolve_run(values, true);
  const int64_t cores = std::max<int64_t>(1, int64_t(std::thread::hardware_concurrency()));
  // Default: one rank per core, 2 .. 8, a multiple of the hosts.
  const int64_t ranks = a.ranks > 0 ? a.ranks : std::max<int64_t>(2, std::min<int64_t>(8, cores)) / a.hosts * a.hosts +
                                                    (std::max<int64_t>(2, std::min<int64_t>(8, cores)) < a.hosts ? a.hosts : 0);
  const double scale = a.scale > 0 ? a.scale : parallel::default_scale(plan.model, cores);
  const data::TokenFile corpus(data::bundled_token_file(false));
  parallel::RehearsalShape shape = parallel::derive_rehearsal(plan, ranks, a.hosts, scale, corpus.vocab(), p);
  for (const auto& r : shape.refusals) p.add("not rehearsable: " + r.what, r.fix, r.code);
  if (a.hosts > 1 && !a.dry_run)
    if (auto why = parallel::emulated_hosts_unavailable()) p.add(*why, "run as root on Linux with iproute2, or use --hosts 1 (no emulated hosts)", "rehearse-hosts");
  p.throw_if_any();

  std::printf("Rehearsal of %s, %s on %s\n", plan.model.name.c_str(), plan.layout.describe().c_str(), plan.cluster.describe().c_str());
  std::printf("as %lld ranks on %lld %s host%s (%lld ranks each), width scale %.4g%s:\n", (long long)ranks,
              (long long)a.hosts, a.hosts > 1 ? "emulated" : "", a.hosts > 1 ? "s" : "", (long long)shape.ranks_per_host,
              scale, a.scale > 0 ? "" : fmt::format(" (default for {} cores: hidden about 64 per core)", cores).c_str());
  std::printf("%s", parallel::shape_table(shape).c_str());
  const std::string cluster_file = a.out + "/prediction-cluster.toml";
  const auto train = train_arguments(shape.run, a, cluster_file);
  std::printf("train: %s\n", shell_words(train).c_str());
  if (a.dry_run) return 0;

  std::filesystem::create_directories(a.out);
  parallel::Verdict verdict;
  nlohmann::json links_json;
  try {
    if (const int rc = rehearse_on_links(plan, shape, a, ranks, train, verdict, links_json); rc != 0) return rc;
  } catch (const std::runtime_error& e) {
    if (const int sig = parallel::interrupting_signal()) return interrupted(sig);
    if (dynamic_cast<const InputError*>(&e)) throw;
    std::fprintf(stderr, "trident rehearse: %s\n", e.what());
    return 1;
  }
  std::printf("%s", parallel::verdict_text(verdict).c_str());
  nlohmann::json j = parallel::verdict_json(verdict);
  j["links"] = links_json;
  write_text_atomically(a.out + "/verdict.json", j.dump(2) + "\n");
  std::printf("verdict written to %s/verdict.json (report: %s/report.json, %s/report.html)\n", a.out.c_str(),
              a.out.c_str(), a.out.c_str());
  return 0;
}

Runner setup_rehearse(CLI::App& cmd) {
  auto args = std::make_shared<RehearseArgs>();
  args->options = std::make_unique<CliOptions>(
      cmd, concat({model_options(), cluster_options(), layout_options(), execution_options(), cost_options()}));
  cmd.add_option("--ranks", args->ranks, "MPI ranks of the rehearsal (default: this machine's cores, 2 .. 8)")->type_name("INT");
  cmd.add_option("--hosts", args->hosts, "emulated hosts (network namespaces with shaped links; root); 1 = no emulation")
      ->type_name("INT");
  cmd.add_option("--scale", args->scale, "width and depth scale of the model (default: hidden about 64 per core)")
      ->type_name("NUM");
  cmd.add_option("--steps", args->steps, "training steps of the rehearsal (default 8; the first are warm-up)")->type_name("INT");
  cmd.add_option("--out", args->out, "folder for the report, the verdict and the files of the run (default rehearsal)")
      ->type_name("DIR");
  cmd.add_option("--bench", args->bench, "this machine's `trident bench` file (default: measured now, into --out)")
      ->type_name("FILE");
  cmd.add_option("--tolerance", args->tolerance, "a term holds within this share of its prediction (default 0.25)")
      ->type_name("NUM");
  cmd.add_option("--link-gbytes-per-s", args->link_gbps,
                 "bandwidth of each emulated host's link, GB/s (default: the plan's inside/between-host ratio, at most 0.1)")
      ->type_name("NUM");
  cmd.add_flag("--dry-run", args->dry_run, "print the rehearsal and its train command, run nothing");
  return [args] { return run_rehearse(*args); };
}

TRIDENT_COMMAND("rehearse", runtime_command_help("rehearse"), setup_rehearse);

}  // namespace
}  // namespace trident::cli
