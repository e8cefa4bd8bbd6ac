// A small launcher of run_training for the multi-rank tests: the same entry point
// `trident train` calls, with a tiny GPT and fault injection (--kill R:S ends rank R abruptly at
// step S, --stall R:S makes it stop talking) to prove the others stop with an error naming it;
// --slow R:F makes rank R's compute F times as long (a slow GPU: the straggler watch names it).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "runtime/parallel/dist_train.h"
#include "schedule/schedule.h"
#include "train_app/planning.h"

using namespace trident;

int main(int argc, char** argv) {
  parallel::TrainSettings s;
  s.planning = train_app::planning();
  RunSpec& r = s.run;
  r.model.family = ModelFamily::GPT;
  r.model.layers = 4, r.model.hidden = 32, r.model.heads = 4, r.model.kv_heads = 4;
  r.model.ffn_hidden = 128, r.model.seq_len = 16, r.model.vocab = 64;
  r.exec.global_batch_size = 8, r.exec.micro_batch_size = 2, r.exec.precision = Precision::FP32;
  r.cluster.gpus_per_node = 8;
  s.adamw.lr = 3e-3, s.adamw.warmup_steps = 2, s.adamw.decay_steps = 20;
  s.steps = 6;
  s.prediction_cluster = "";
  int kill_rank = -1, kill_step = -1, stall_rank = -1, stall_step = -1, slow_rank = -1;
  double slow_factor = 1;
  for (int i = 1; i + 1 < argc + 1; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--tp") r.layout.tp = std::stoll(next());
    else if (a == "--dp") r.layout.dp = std::stoll(next());
    else if (a == "--pp") r.layout.pp = std::stoll(next());
    else if (a == "--order") r.layout.order = next();
    else if (a == "--schedule") parse_schedule(next(), r.exec.schedule);
    else if (a == "--zero") r.exec.zero = std::stoi(next());
    else if (a == "--steps") s.steps = std::stoll(next());
    else if (a == "--heads") r.model.heads = r.model.kv_heads = std::stoll(next());
    else if (a == "--layers") r.model.layers = std::stoll(next());
    else if (a == "--hidden") r.model.hidden = std::stoll(next()), r.model.ffn_hidden = 4 * r.model.hidden;
    else if (a == "--seq-len") r.model.seq_len = std::stoll(next());
    else if (a == "--vocab") r.model.vocab = std::stoll(next());
    else if (a == "--global-batch-size") r.exec.global_batch_size = std::stoll(next());
    else if (a == "--micro-batch-size") r.exec.micro_batch_size = std::stoll(next());
    else if (a == "--virtual-stages") r.exec.virtual_stages = std::stoll(next());
    else if (a == "--timeout") s.comm_timeout_s = std::stod(next());
    else if (a == "--report") s.report_path = next();
    else if (a == "--prediction-cluster") s.prediction_cluster = next();
    else if (a == "--trace-comm") s.trace_comm = true;
    else if (a == "--kill") std::sscanf(next().c_str(), "%d:%d", &kill_rank, &kill_step);
    else if (a == "--stall") std::sscanf(next().c_str(), "%d:%d", &stall_rank, &stall_step);
    else if (a == "--slow") std::sscanf(next().c_str(), "%d:%lf", &slow_rank, &slow_factor);
    else if (a == "--log-every") s.log_every = std::stoll(next());
    else if (a == "--straggler-factor") s.straggler_factor = std::stod(next());
    else if (a == "--evict-stragglers") s.evict_stragglers = true;
    else if (a == "--checkpoint") s.checkpoint_path = next();
    else if (a == "--stage-layers")
      for (std::string x = next(), item; !x.empty(); x = x.find(',') == std::string::npos ? "" : x.substr(x.find(',') + 1))
        s.stage_layers.push_back(std::stoll(x.substr(0, x.find(','))));
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 64;
    }
  }
  s.before_step = [=](int64_t step, int rank) {
    if (rank == kill_rank && step == kill_step) std::raise(SIGKILL);
    if (rank == stall_rank && step == stall_step) std::this_thread::sleep_for(std::chrono::hours(1));
  };
  s.compute_slowdown = [=](int rank) { return rank == slow_rank ? slow_factor : 1.0; };
  return parallel::run_training(s);
}
