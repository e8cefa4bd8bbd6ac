// trident rehearse: the plan -> small run -> measured -> verdict loop in one command. Reads a plan
// (the file `plan --emit FILE.toml` writes; flags override), derives its rehearsal for this
// machine (rehearse/rehearsal_shape.h) and prints how, runs it through `trident train`
// under mpirun (on emulated hosts with shaped links with --hosts H), then judges the rehearsal
// report's measured terms against the planner's prediction for this run on these links, fits the
// cost table to them (rehearsal_calibration.h) and makes the full-scale plan again with what
// transfers (rehearsal_replan.h).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "cli/cli_options.h"
#include "cli/command.h"
#include "cli/rehearse_links.h"
#include "cli/runtime_commands.h"
#include "core/input_file.h"
#include "core/output_path.h"
#include "core/run_values.h"
#include "plan/plan_options.h"
#include "rehearse/rehearsal_calibration.h"
#include "rehearse/rehearsal_link.h"
#include "rehearse/rehearsal_prediction.h"
#include "rehearse/rehearsal_replan.h"
#include "rehearse/rehearsal_shape.h"
#include "rehearse/rehearsal_summary.h"
#include "rehearse/rehearsal_verdict.h"
#include "report/html_page.h"
#include "report/rehearsal_calibration_report.h"
#include "report/rehearsal_replan_report.h"
#include "report/rehearsal_shape_report.h"
#include "report/rehearsal_verdict_report.h"
#include "runtime/data/corpus.h"
#include "runtime/data/token_file.h"
#include "runtime/engine/machine_load.h"
#include "runtime/measure/emulated_hosts.h"
#include "runtime/parallel/dist_train.h"
#include "runtime/parallel/resource_check.h"
#include "train_app/planning.h"

namespace trident::cli {
namespace {

struct RehearseArgs {
  std::unique_ptr<CliOptions> options;
  int64_t ranks = 0, hosts = 1, steps = 8;
  double scale = 0, tolerance = 0.25, link_gbps = 0;
  std::string out = "rehearsal", bench;
  bool dry_run = false, tp_across = false;
  CLI::Option *ranks_given = nullptr, *scale_given = nullptr, *link_given = nullptr;  // given, or the default
};

// The default rank count looks no further than this: 8 ranks oversubscribe a small machine's
// cores (mpirun --oversubscribe) and still measure; more only slow the rehearsal down.
constexpr int64_t kDefaultMostRanks = 8;

// plan's --overhead-gib: the memory the plan made again keeps free per GPU.
std::vector<OptionDef> overhead_option() {
  for (const auto& d : plan::plan_options())
    if (d.name == "overhead-gib") return {d};
  return {};
}

void check_args(const RehearseArgs& a, Problems& p) {
  if (a.hosts < 1 || a.hosts > 8) p.add(fmt::format("--hosts {} is outside 1 .. 8", a.hosts), "use e.g. --hosts 2", "rehearse-hosts");
  if (a.ranks_given->count() && (a.ranks < 1 || a.ranks > 64))
    p.add(fmt::format("--ranks {} is outside 1 .. 64", a.ranks), "use e.g. --ranks 8, or drop it for the default", "rehearse-ranks");
  if (a.scale_given->count() && !(a.scale > 0 && a.scale <= 1))  // also refuses NaN
    p.add(fmt::format("--scale {} is outside (0, 1]", a.scale), "give e.g. --scale 0.01, or drop it for the default",
          "rehearse-scale");
  if (a.steps < 3 || a.steps > 1000)
    p.add(fmt::format("--steps {} is outside 3 .. 1000 (the first steps are warm-up)", a.steps), "use e.g. --steps 8", "rehearse-steps");
  if (!(a.tolerance > 0 && a.tolerance < 10))
    p.add(fmt::format("--tolerance {} is outside (0, 10)", a.tolerance), "use e.g. --tolerance 0.25", "rehearse-tolerance");
  if (a.link_given->count() && !(a.link_gbps > 0 && a.link_gbps <= 100))
    p.add(fmt::format("--link-gbytes-per-s {} is outside (0, 100]", a.link_gbps), "use e.g. --link-gbytes-per-s 0.05",
          "rehearse-link");
  else if (a.link_given->count() && a.hosts < 2)
    p.add("--link-gbytes-per-s shapes the link between emulated hosts, and --hosts is 1 (no link)",
          "add --hosts 2 or more, or drop --link-gbytes-per-s", "rehearse-link");
  if (const std::string kind = a.bench.empty() ? "" : special_file_kind(a.bench); !kind.empty())
    p.add("--bench '" + a.bench + "' is " + (kind == "missing" ? "missing" : kind), "give the file `trident bench` wrote, or drop --bench "
          "(rehearse then measures this machine itself)", "rehearse-bench");
}

// One training run of the rehearsal: its layout and the folder of its report.
struct RehearsalRun {
  std::string label;  // "", or "TP across hosts"
  RunSpec run;
  std::string dir;
  Verdict verdict;
  std::optional<TpAcross> comparison;  // the TP-across run against the first
};

// `trident train`'s arguments for a rehearsal run: every setting of the derived RunSpec.
std::vector<std::string> train_arguments(const RehearsalRun& rr, const RehearseArgs& a, const std::string& cluster_file) {
  const RunSpec& r = rr.run;
  const ModelSpec& m = r.model;
  std::vector<std::string> v = {"train", "--family", to_string(m.family), "--layers", std::to_string(m.layers),
                                "--hidden", std::to_string(m.hidden), "--heads", std::to_string(m.heads),
                                "--ffn-hidden", std::to_string(m.ffn_hidden), "--seq-len", std::to_string(m.seq_len),
                                "--vocab", std::to_string(m.vocab)};
  if (m.kv_heads > 0) v.insert(v.end(), {"--kv-heads", std::to_string(m.kv_heads)});
  if (m.is_moe())
    v.insert(v.end(), {"--experts", std::to_string(m.experts), "--experts-per-token", std::to_string(m.experts_per_token),
                       "--expert-ffn-hidden", std::to_string(m.expert_ffn_hidden), "--shared-experts",
                       std::to_string(m.shared_experts), "--moe-dense-layers", std::to_string(m.moe_dense_layers),
                       "--moe-layer-freq", std::to_string(m.moe_layer_freq),
                       "--capacity-factor", fmt::format("{}", m.capacity_factor)});
  for (const auto& [key, text] : run_option_texts(r)) {
    if (key == "nodes" || key == "gpus-per-node") continue;
    if (text == "true" || text == "false") v.push_back((text == "true" ? "--" : "--no-") + key);
    else v.insert(v.end(), {"--" + key, text});
  }
  v.insert(v.end(), {"--steps", std::to_string(a.steps), "--eval-every", "0", "--eval-batches", "1", "--log-every",
                     std::to_string(a.steps), "--report", rr.dir + "/report.json", "--html", rr.dir + "/report.html",
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
  v.push_back(measure::self_executable());
  v.insert(v.end(), cmd.begin(), cmd.end());
  return v;
}

MachineLoad probe_load() {
  const engine::LoadProbe probe(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  return probe.stop();
}

int interrupted(int sig) {
  std::fprintf(stderr, "trident rehearse: interrupted (signal %d); everything it made was removed\n", sig);
  return 128 + sig;
}

// Runs one rehearsal run through `mpirun ... trident train`, with the load probed just before and after.
int run_one(RehearsalRun& rr, const RehearseArgs& a, int64_t ranks, const std::vector<std::string>& placement,
            const std::string& cluster_file) {
  std::filesystem::create_directories(rr.dir);
  const auto launch = mpirun(ranks, placement, train_arguments(rr, a, cluster_file));
  // Bounded: ten times the predicted steps and two minutes to start, past which the run is stopped.
  const int64_t cores = std::max<int64_t>(1, int64_t(std::thread::hardware_concurrency()));
  const double limit_s = 120 + 10 * double(a.steps) * rehearse::predict(rr.run, cluster_file, cores).step_s;
  const auto start = probe_load();
  std::printf("running the rehearsal%s: %s\n", rr.label.empty() ? "" : (" (" + rr.label + ")").c_str(),
              shell_words(launch).c_str());
  const int rc = measure::run_launcher(launch, limit_s);
  const auto end = probe_load();
  if (rc == measure::kLauncherTimedOut)
    std::fprintf(stderr, "trident rehearse: the training run did not finish within %.0f s (120 s + 10 x its %lld "
                 "predicted steps) and was stopped\n", limit_s, (long long)a.steps);
  if (measure::interrupting_signal() || rc != 0) return rc == 0 ? 1 : rc;
  std::ifstream in(rr.dir + "/report.json");
  const nlohmann::json report = nlohmann::json::parse(in, nullptr, false);
  if (report.is_discarded()) throw std::runtime_error("cannot read the rehearsal report " + rr.dir + "/report.json");
  rr.verdict = rehearse::judge_rehearsal(report, a.tolerance);
  rr.verdict.load_start = start, rr.verdict.load_end = end;
  // The self-calibration predicts the run again: with the load imbalance train's prediction took
  // (the one its steps measured), so its step and EP wait are the verdict's.
  if (report.contains("predicted") && report["predicted"].is_object())
    rr.run.model.moe_load_imbalance = report["predicted"].value("ep_load_imbalance", rr.run.model.moe_load_imbalance);
  return 0;
}

// Makes the links (emulated hosts with --hosts), runs every rehearsal run on them, removes the
// hosts. Returns 0, or the exit code of a failed or interrupted run.
int rehearse_on_links(const RunSpec& plan, const RehearsalShape& shape, const RehearseArgs& a, int64_t ranks,
                      std::vector<RehearsalRun>& runs, nlohmann::json& links_json, std::string& links_text) {
  const RehearsalLinks links = prepare_links(plan, shape, a.bench, a.out, a.link_gbps * 1e9, a.steps,
                                                                         int64_t(runs.size()), mpirun);
  std::printf("%s", links.text.c_str());
  links_json = links.json;
  links_text = links.text;
  const auto placement = links.hosts ? links.hosts->mpirun_options() : std::vector<std::string>{};
  int rc = 0;
  for (auto& rr : runs)
    if ((rc = run_one(rr, a, ranks, placement, links.cluster_file)) != 0) break;
  if (links.hosts) {
    links.hosts->stop();
    std::printf("emulated hosts removed (%s-*)\n", links.hosts->prefix().c_str());
  }
  if (const int sig = measure::interrupting_signal()) return interrupted(sig);
  if (rc != 0) {
    std::fprintf(stderr, "trident rehearse: the rehearsal's training run failed (exit %d; its output is above)\n", rc);
    return rc == 2 ? 2 : 1;
  }
  return 0;
}

// One page: the verdict (and the TP comparison), the derivation, the links, then train's own
// rehearsal report of the first run (measured beside predicted shares, ranks, losses).
void write_page(const RehearsalShape& shape, const std::vector<RehearsalRun>& runs, const RehearseArgs& a,
                const std::string& links_text, const std::vector<HtmlSection>& calibration, const std::string& full_scale) {
  std::ifstream in(runs[0].dir + "/report.json");
  std::stringstream report;
  report << in.rdbuf();
  HtmlPage page = rehearsal_page(report.str());
  page.title = "trident rehearse: " + shape.run.model.name;
  page.sections.push_back(HtmlSection{"full-scale", "For the full-scale plan", {full_scale}, std::nullopt});
  page.sections.push_back(verdict_section(runs[0].verdict, "verdict", "Verdict"));
  if (runs.size() > 1 && runs[1].comparison) {
    page.sections.push_back(tp_across_section(*runs[1].comparison, runs[0].run.layout.order, runs[1].run.layout.order));
    page.sections.push_back(verdict_section(runs[1].verdict, "verdict-tp-across", "Verdict, " + runs[1].label));
  }
  for (const auto& sec : calibration) page.sections.push_back(sec);
  page.sections.push_back(shape_section(shape));
  HtmlSection links{"links", "Links", {}, std::nullopt};
  std::stringstream lines(links_text);
  for (std::string line; std::getline(lines, line);) links.lines.push_back(line);
  page.sections.push_back(links);
  write_text_atomically(a.out + "/rehearsal.html", html_page(page));
}

// After the runs: the verdict of each, the TP comparison, the self-calibration (fitted on the
// first run, tested on the second), the plan made again with what transfers, the JSON and the page.
int conclude(const RunSpec& plan, const RehearsalShape& shape, std::vector<RehearsalRun>& runs,
             const RehearseArgs& a, const nlohmann::json& links_json, const std::string& links_text, int64_t cores,
             double overhead_bytes) {
  std::printf("%s", verdict_text(runs[0].verdict).c_str());
  nlohmann::json j = verdict_json(runs[0].verdict);
  j["links"] = links_json;
  if (runs.size() > 1) {
    std::printf("\n%s:%s", runs[1].label.c_str(), verdict_text(runs[1].verdict).c_str());
    const TpAcross cmp = rehearse::compare_tp_across(runs[0].verdict, runs[1].verdict, a.tolerance);
    runs[1].comparison = cmp;
    std::printf("%s", tp_across_text(cmp, shape.run.layout.order, runs[1].run.layout.order).c_str());
    j["tp_across"] = {{"order", runs[1].run.layout.order}, {"verdict", verdict_json(runs[1].verdict)},
                      {"comparison", tp_across_json(cmp)}};
  }
  std::vector<rehearse::CalibrationRun> calibration_runs;
  for (const auto& rr : runs) calibration_runs.push_back({rr.run.layout.describe(), rr.run, &rr.verdict});
  std::optional<Calibration> cal;
  try {
    cal = rehearse::calibrate(calibration_runs, a.out + "/prediction-cluster.toml", cores, a.out + "/fitted-cost.toml",
                              a.out + "/fitted-cluster.toml");
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "trident rehearse: the self-calibration failed: %s\n", e.what());
  }
  std::vector<HtmlSection> sections;
  std::optional<Replan> back;
  if (cal) {
    std::printf("%s", calibration_text(*cal).c_str());
    if (runs.size() < 2) std::printf("  (no second layout to test the fit out of sample: add --tp-across)\n");
    j["calibration"] = calibration_json(*cal);
    sections = calibration_sections(*cal);
    back = rehearse::replan(plan, cal->fit, cal->checks, overhead_bytes);
    std::printf("%s", replan_text(*back).c_str());
    j["back_to_the_plan"] = replan_json(*back);
    sections.push_back(replan_section(*back));
  }
  // One plain sentence on the full-scale plan, last in the text and first on the page.
  const std::string full_scale = rehearse::full_scale_sentence(plan, shape, runs[0].verdict, back ? &*back : nullptr);
  std::printf("\nFor the full-scale plan: %s\n", full_scale.c_str());
  j["full_scale"] = full_scale;

  write_text_atomically(a.out + "/verdict.json", j.dump(2) + "\n");
  write_page(shape, runs, a, links_text, sections, full_scale);
  std::printf("verdict written to %s/verdict.json and %s/rehearsal.html (train's report: %s/report.json)\n",
              a.out.c_str(), a.out.c_str(), a.out.c_str());
  return cal ? 0 : 1;
}

// The one run check of `trident train` on a rehearsal run (no output paths: the rehearsal's own
// are checked above), so that --dry-run refuses what the run would.
void check_train_run(const RunSpec& run, const RehearseArgs& a, const std::shared_ptr<const data::TokenFile>& corpus,
                     const std::string& corpus_path, const std::string& label, Problems& p) {
  parallel::TrainSettings s;
  s.planning = train_app::planning();  // the run check reads the prediction's files with it
  s.run = run;
  s.steps = a.steps, s.eval_every = 0, s.eval_batches = 1, s.log_every = a.steps;
  s.data_path = corpus_path, s.data = corpus;
  s.prediction_cluster.clear();
  Problems train;
  parallel::check_trainable(s, train);
  for (const Problem& x : train.list()) p.add("not rehearsable" + label + ": " + x.what, x.fix, x.code);
}

// Checks of the inputs before anything runs: the arguments, the bench file, no output over an
// input (--out a folder, none of its files one the rehearsal reads).
void check_inputs(const RehearseArgs& a, const OptionValues& values, Problems& p) {
  check_args(a, p);
  if (!a.bench.empty() && special_file_kind(a.bench).empty()) rehearse::check_bench_file(a.bench, "--bench", p);
  std::vector<NamedPath> inputs = a.options->input_paths(values);
  add_input(inputs, {a.bench, "--bench"});
  std::error_code ec;
  const auto same = std::find_if(inputs.begin(), inputs.end(), [&](const NamedPath& in) {
    return !in.path.empty() && std::filesystem::equivalent(a.out, in.path, ec);
  });
  if (same != inputs.end())  // the folder would be made over the input
    p.add("--out '" + a.out + "' is " + same->what + " '" + same->path + "', which this command reads",
          "give --out a folder of its own for the rehearsal's files, e.g. --out rehearsal", "output-path");
  else
    check_outputs({{a.out, "--out"}}, inputs, p, OutputKind::Directory);
  std::vector<NamedPath> outputs;
  for (const char* f : {"machine.toml", "link.toml", "placement.json", "prediction-cluster.toml", "fitted-cost.toml",
                        "fitted-cluster.toml", "verdict.json", "rehearsal.html", "report.json", "report.html",
                        "tp-across/report.json", "tp-across/report.html"})
    // A folder not made yet holds no input: its files are checked once it exists (another run's --out).
    if ((a.bench.empty() || std::string(f) != "machine.toml") &&
        std::filesystem::is_directory(parent_directory(a.out + "/" + f)))
      outputs.push_back({a.out + "/" + f, "--out's " + std::string(f)});
  check_outputs(outputs, inputs, p);
}

int run_rehearse(RehearseArgs& a) {
  Problems p;
  OptionValues values = a.options->collect(p);
  check_inputs(a, values, p);
  const double overhead_bytes = plan::resolve_output(values, p).overhead_bytes;  // the plan's, made again
  p.throw_if_any();
  const RunSpec plan = resolve_run(values, true);
  const int64_t cores = std::max<int64_t>(1, int64_t(std::thread::hardware_concurrency()));
  const rehearse::RankChoice choice = a.ranks_given->count()
                                          ? rehearse::RankChoice{a.ranks, "--ranks " + std::to_string(a.ranks)}
                                          : rehearse::default_ranks(plan, a.hosts, kDefaultMostRanks);
  const int64_t ranks = choice.ranks;
  const double scale = a.scale_given->count() ? a.scale : rehearse::default_scale(plan.model, cores);
  const std::string corpus_path = data::bundled_token_file(false);
  const auto corpus = std::make_shared<const data::TokenFile>(corpus_path);
  RehearsalShape shape = rehearse::derive_rehearsal(plan, ranks, a.hosts, scale, corpus->vocab(), p);
  shape.ranks_why = choice.why;
  for (const auto& r : shape.refusals) p.add("not rehearsable: " + r.what, r.fix, r.code);
  std::vector<RehearsalRun> runs = {{"", shape.run, a.out, {}, {}}};
  if (a.tp_across && p.empty()) {
    const auto order = rehearse::tp_across_order(shape.run.layout, shape.ranks_per_host);
    if (a.hosts < 2 || !order) {
      p.add("--tp-across: no rank order of " + shape.run.layout.describe() + " puts its TP groups across hosts of " +
                std::to_string(shape.ranks_per_host) + " ranks",
            "use --hosts 2 or more with a rehearsal whose tp is above 1, or drop --tp-across", "rehearse-tp-across");
    } else {
      RunSpec across = shape.run;
      across.layout.order = *order;
      runs.push_back({"TP across hosts, order " + *order, across, a.out + "/tp-across", {}, {}});
    }
  }
  if (p.empty())
    for (const auto& rr : runs) check_train_run(rr.run, a, corpus, corpus_path, rr.label.empty() ? "" : " (" + rr.label + ")", p);
  if (p.empty() && !a.bench.empty())
    rehearse::check_link_time(plan, shape, a.bench, a.link_gbps * 1e9, a.steps, int64_t(runs.size()), cores, p);
  if (a.hosts > 1 && !a.dry_run)
    if (auto why = measure::emulated_hosts_unavailable()) p.add(*why, "run as root on Linux with iproute2, or use --hosts 1 (no emulated hosts)", "rehearse-hosts");
  p.throw_if_any();

  std::printf("Rehearsal of %s, %s on %s\n", plan.model.name.c_str(), plan.layout.describe().c_str(), plan.cluster.describe().c_str());
  std::printf("as %lld ranks on %lld %s host%s (%lld ranks each), width scale %.4g%s:\n", (long long)ranks,
              (long long)a.hosts, a.hosts > 1 ? "emulated" : "", a.hosts > 1 ? "s" : "", (long long)shape.ranks_per_host,
              scale, a.scale_given->count() ? "" : fmt::format(" (default for {} cores: hidden about 64 per core)", cores).c_str());
  std::printf("%s", shape_table(shape).c_str());
  for (const auto& rr : runs)
    std::printf("train%s: %s\n", rr.label.empty() ? "" : (" (" + rr.label + ")").c_str(),
                shell_words(train_arguments(rr, a, a.out + "/prediction-cluster.toml")).c_str());
  if (a.dry_run) return 0;

  std::filesystem::create_directories(a.out);
  nlohmann::json links_json;
  std::string links_text;
  try {
    if (const int rc = rehearse_on_links(plan, shape, a, ranks, runs, links_json, links_text); rc != 0) return rc;
  } catch (const std::runtime_error& e) {
    if (const int sig = measure::interrupting_signal()) return interrupted(sig);
    if (dynamic_cast<const InputError*>(&e)) throw;
    std::fprintf(stderr, "trident rehearse: %s\n", e.what());
    return 1;
  }
  return conclude(plan, shape, runs, a, links_json, links_text, cores, overhead_bytes);
}

Runner setup_rehearse(CLI::App& cmd) {
  auto args = std::make_shared<RehearseArgs>();
  args->options = std::make_unique<CliOptions>(
      cmd, concat({model_options(), cluster_options(), layout_options(), execution_options(), cost_options(),
                   overhead_option()}));
  args->ranks_given = cmd.add_option("--ranks", args->ranks,
                                     "MPI ranks of the rehearsal (default: the fewest, up to 8, that exercise every "
                                     "dimension and host crossing of the plan, or the most of them)")
                          ->type_name("INT");
  cmd.add_option("--hosts", args->hosts, "emulated hosts (network namespaces with shaped links; root); 1 = no emulation")
      ->type_name("INT");
  args->scale_given = cmd.add_option("--scale", args->scale,
                                     "width and depth scale of the model, in (0, 1] (default: hidden about 64 per core)")
                          ->type_name("NUM");
  cmd.add_option("--steps", args->steps, "training steps of the rehearsal (default 8; the first are warm-up)")->type_name("INT");
  cmd.add_option("--out", args->out, "folder for the report, the verdict and the files of the run (default rehearsal)")
      ->type_name("DIR");
  cmd.add_option("--bench", args->bench, "this machine's `trident bench` file (default: measured now, into --out)")
      ->type_name("FILE");
  cmd.add_option("--tolerance", args->tolerance, "a term holds within this share of its prediction (default 0.25)")
      ->type_name("NUM");
  args->link_given = cmd.add_option("--link-gbytes-per-s", args->link_gbps,
                 "bandwidth of each emulated host's link, GB/s (default: the plan's inside/between-host ratio, at most 0.1)")
      ->type_name("NUM");
  cmd.add_flag("--tp-across", args->tp_across,
               "also rehearse the layout with its TP groups across the emulated hosts, and compare with the prediction");
  cmd.add_flag("--dry-run", args->dry_run, "print the rehearsal and its train command, run nothing");
  return [args] { return run_rehearse(*args); };
}

TRIDENT_COMMAND("rehearse", runtime_command_help("rehearse"), setup_rehearse);

}  // namespace
}  // namespace trident::cli
