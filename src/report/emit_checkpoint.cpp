// Launches that survive failures (`plan --emit megatron|torchtitan|slurm`): they save at the
// Young/Daly interval of plan/goodput.h, resume from the last save, stop saving before the job's
// time limit, and an sbatch script asks Slurm to requeue the job when a node fails and requeues
// itself until the last step is saved.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <regex>

#include "report/launch_config.h"

namespace trident {

namespace {

// Most clusters' partitions stop a job after one or two days; a longer run is a chain of jobs.
constexpr int64_t kMaxDefaultLimitMin = 48 * 60;

// Slurm's --time forms: MM, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS (rounded up to whole minutes).
std::optional<int64_t> parse_slurm_time(const std::string& text) {
  std::smatch m;
  auto n = [&](int i) { return m[i].matched && m[i].length() > 0 ? std::stoll(m[i].str()) : 0LL; };
  if (text.size() > 20) return std::nullopt;
  if (std::regex_match(text, m, std::regex(R"((\d{1,6}))"))) return n(1);
  if (std::regex_match(text, m, std::regex(R"((\d{1,4}):(\d{2}):(\d{2}))")))
    return n(1) * 60 + n(2) + (n(3) > 0 ? 1 : 0);
  if (std::regex_match(text, m, std::regex(R"((\d{1,4})-(\d{1,2})(?::(\d{2}))?(?::(\d{2}))?)")))
    return n(1) * 1440 + n(2) * 60 + n(3) + (n(4) > 0 ? 1 : 0);
  return std::nullopt;
}

}  // namespace

std::string slurm_time(int64_t minutes) {
  return fmt::format("{}-{:02}:{:02}:00", minutes / 1440, (minutes % 1440) / 60, minutes % 60);
}

std::vector<OptionDef> launch_checkpoint_options() {
  return {
      {"checkpoint-dir", "launch",
       "where an emitted launch saves and loads its checkpoints (relative: under the folder the job starts in)", false,
       "DIR", "checkpoints"},
      {"time", "launch",
       "the sbatch job's time limit (MM, HH:MM:SS or D-HH:MM:SS); Megatron saves and exits before it and the script "
       "requeues itself until the last step is saved",
       false, "TIME", "the predicted time with failures, at most 2-00:00:00"},
  };
}

LaunchCheckpointOptions read_launch_checkpoint(const OptionValues& v, const std::string& emit, bool emit_is_file,
                                               Problems& p) {
  LaunchCheckpointOptions o;
  if (auto d = v.get_string("checkpoint-dir")) o.dir = *d;
  if (o.dir.empty() || o.dir.find_first_of("\n\r\"'$`\\") != std::string::npos)
    p.add("--checkpoint-dir '" + o.dir + "' is not a usable directory name (empty, or a quote, $, ` or \\ in it)",
          "give --checkpoint-dir DIR (e.g. checkpoints or /lustre/me/run1)", "checkpoint-dir");
  if (auto t = v.get_string("time")) {
    o.time_text = *t;
    o.time_limit_min = parse_slurm_time(*t);
    if (!o.time_limit_min || *o.time_limit_min <= 0)
      p.add(fmt::format("--time '{}' (from {}) is not a Slurm time limit", *t, v.source("time")),
            "give --time as MM, HH:MM:SS or D-HH:MM:SS, e.g. --time 1-00:00:00", "time");
  }
  const bool framework = !emit.empty() && !emit_is_file;
  if (!framework && !(emit_is_file && !emit.empty()))
    for (const char* name : {"checkpoint-dir", "time"})
      if (v.has(name))
        p.add(fmt::format("--{} (from {}) sets the checkpoints of an emitted launch, but nothing is emitted", name,
                          v.source(name)),
              "add --emit slurm (or megatron, torchtitan), or drop it", "launch-option-unused");
  if (framework && v.has("time") && emit.rfind("slurm", 0) != 0 && emit != "megatron")
    p.add(fmt::format("--time (from {}) is the time limit of an sbatch script or of Megatron's run, but --emit {} "
                      "writes neither",
                      v.source("time"), emit),
          "use --emit slurm-" + emit + ", or drop --time", "launch-option-unused");
  return o;
}

LaunchCheckpoint launch_checkpoint(const LaunchCheckpointOptions& given, int64_t interval_steps, double save_s,
                                   double seconds_per_step_with_failures, int64_t train_iters) {
  LaunchCheckpoint c;
  c.dir = given.dir;
  c.interval_steps = interval_steps;
  // Megatron stops this long before the limit: the save itself, twice over, and 5 minutes for the
  // step in progress and the exit.
  c.exit_margin_min = 5 + int64_t(std::ceil(2 * save_s / 60));
  const double predicted_min = seconds_per_step_with_failures * double(train_iters) / 60;
  std::string limit;
  if (given.time_limit_min) {
    c.time_limit_min = std::max(*given.time_limit_min, c.exit_margin_min + 1);
    limit = "--time " + given.time_text +
            (c.time_limit_min > *given.time_limit_min ? fmt::format(", raised to the {} minutes a save and exit need",
                                                                    c.time_limit_min)
                                                      : "");
  } else {
    // The predicted run, with failures, plus the exit margin, in whole hours; at most two days.
    const double wanted = std::ceil((predicted_min + double(c.exit_margin_min)) / 60) * 60;
    c.time_limit_min = int64_t(std::min<double>(std::max<double>(wanted, 60), kMaxDefaultLimitMin));
    limit = wanted > kMaxDefaultLimitMin ? fmt::format("the predicted {:.0f} h with failures, capped at 48 h: the job "
                                                       "requeues itself until the last step is saved",
                                                       predicted_min / 60)
                                         : fmt::format("the predicted {:.2f} h with failures, in whole hours",
                                                       predicted_min / 60);
  }
  c.why = fmt::format("saves every {} steps into {} (the Young/Daly interval of plan's time to train with failures); "
                      "time limit {} ({})",
                      c.interval_steps, c.dir, slurm_time(c.time_limit_min), limit);
  return c;
}

void add_checkpointing(FrameworkLaunch& f, const LaunchCheckpoint& c, int64_t train_iters) {
  f.comments.push_back(c.why);
  const bool megatron = f.framework == "Megatron-LM";
  if (megatron) {
    f.args.push_back("--save " + c.dir);
    f.args.push_back("--load " + c.dir);  // resumes from the latest save; starts afresh when there is none
    if (c.interval_steps > 0) f.args.push_back(fmt::format("--save-interval {}", c.interval_steps));
    f.args.push_back("--exit-signal-handler");  // SIGTERM (scancel, a preemption): save, then exit
    f.args.push_back(fmt::format("--exit-duration-in-mins {}", c.time_limit_min - c.exit_margin_min));
  }
  f.sbatch.push_back("--time=" + slurm_time(c.time_limit_min));
  f.sbatch.push_back("--requeue");  // Slurm requeues the job when one of its nodes fails
  f.sbatch.push_back("--open-mode=append");  // a requeued job appends to its log
  // The latest saved step: Megatron's tracker file, or torchtitan's step-N folders (under its
  // job.dump_folder, ./outputs, when the folder is relative). torchtitan has no save-and-exit
  // before a time limit: a job it stops is resubmitted by hand and resumes from the last interval.
  const std::string folder = megatron || c.dir.front() == '/' ? c.dir : "outputs/" + c.dir;
  const std::string latest =
      megatron ? fmt::format("cat \"{}/latest_checkpointed_iteration.txt\" 2>/dev/null || echo 0", folder)
               : fmt::format("ls \"{}\" 2>/dev/null | sed -n 's/^step-\\([0-9]*\\)$/\\1/p' | sort -n | tail -n 1", folder);
  f.after_run = fmt::format(
      "\n# Until the last step is saved, the job puts itself back in the queue and resumes from {}.\n"
      "LAST_SAVED=$({})\n"
      "if [[ \"$LAST_SAVED\" =~ ^[0-9]+$ ]] && (( LAST_SAVED < ${{TRAIN_ITERS:-{}}} )); then\n"
      "  scontrol requeue \"$SLURM_JOB_ID\"\n"
      "fi\n",
      folder, latest, train_iters);
}

}  // namespace trident
