// trident replan: the best layout for the GPUs that are left after a failure, from the plan (its
// config file, `plan --json`'s output, or the run's last checkpoint), with a stated global-batch
// policy, its predicted step time and slowdown, and a check that the checkpoint reshards into it.
// Exit code: 0 a layout was found, 1 none fits the survivors, 2 unusable input.
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli/cli_options.h"
#include "cli/command.h"
#include "cli/runtime_commands.h"
#include "core/input_file.h"
#include "core/run_spec.h"
#include "plan/plan_options.h"
#include "plan/survivor_replan.h"
#include "report/launch_config.h"
#include "report/output_file.h"
#include "report/survivor_replan_report.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/logical_tensors.h"
#include "runtime/engine/run_meta.h"

namespace trident::cli {
namespace {

struct ReplanArgs {
  std::unique_ptr<CliOptions> options;
  std::string emit;
};

bool any_given(const OptionValues& v, const std::vector<OptionDef>& defs) {
  for (const auto& d : defs)
    if (v.has(d.name)) return true;
  return false;
}

// Sets each option of `keys` (JSON key -> option) from `j` that the flags and the config file left unset.
void fill_from(OptionValues& v, const nlohmann::json& j, const std::vector<std::pair<const char*, const char*>>& keys,
               const std::string& source) {
  for (const auto& [key, option] : keys) {
    if (!j.contains(key) || v.has(option)) continue;
    const nlohmann::json& x = j[key];
    v.set(option, x.is_string() ? x.get<std::string>() : x.dump(), source);
  }
}

const std::vector<std::pair<const char*, const char*>> kModelKeys = {
    {"family", "family"}, {"layers", "layers"}, {"hidden", "hidden"}, {"heads", "heads"}, {"kv_heads", "kv-heads"},
    {"ffn_hidden", "ffn-hidden"}, {"seq_len", "seq-len"}, {"vocab", "vocab"}, {"tied_embeddings", "tied-embeddings"},
    {"experts", "experts"}, {"experts_per_token", "experts-per-token"}, {"expert_ffn_hidden", "expert-ffn-hidden"},
    {"shared_experts", "shared-experts"}, {"moe_dense_layers", "moe-dense-layers"}, {"moe_layer_freq", "moe-layer-freq"},
    {"capacity_factor", "capacity-factor"}};
const std::vector<std::pair<const char*, const char*>> kLayoutKeys = {
    {"tp", "tp"}, {"pp", "pp"}, {"dp", "dp"}, {"cp", "cp"}, {"ep", "ep"}, {"order", "order"}, {"zero", "zero"},
    {"schedule", "schedule"}, {"virtual_stages", "virtual-stages"}};
const std::vector<std::pair<const char*, const char*>> kPlanJsonKeys = {
    {"tp", "tp"}, {"pp", "pp"}, {"dp", "dp"}, {"cp", "cp"}, {"ep", "ep"}, {"order", "order"}, {"zero", "zero"},
    {"schedule", "schedule"}, {"virtual_stages", "virtual-stages"}, {"micro_batch_size", "micro-batch-size"},
    {"global_batch_size", "global-batch-size"}, {"recompute", "recompute"}, {"sequence_parallel", "sequence-parallel"},
    {"precision", "precision"}, {"grad_bits", "grad-bits"}, {"attention", "attention"}, {"overlap", "overlap"},
    {"stack", "stack"}};

// The checkpoint: what it holds and whether the new layout reads it.
struct CheckpointFacts {
  std::string dir;
  int64_t step = 0, tensors = 0;
  std::string written_by;
  double lr = 0;
};

Runner setup_replan(CLI::App& cmd) {
  auto args = std::make_shared<ReplanArgs>();
  args->options = std::make_unique<CliOptions>(
      cmd, concat({model_options(), cluster_options(), layout_options(), execution_options(), cost_options(),
                   plan::plan_options(), plan::replan_options()}));
  cmd.add_option("--emit", args->emit,
                 "write the new layout as FILE.toml (train --config FILE --resume CHECKPOINT continues on it)")
      ->type_name("FILE.toml");
  return [args] {
    Problems p;
    OptionValues values = args->options->collect(p);
    const plan::OutputOptions out = plan::resolve_output(values, p);
    // The run to replan: flags and --config first, then the checkpoint's and the plan JSON's values.
    std::unique_ptr<checkpoint::CheckpointReader> reader;
    CheckpointFacts facts;
    if (auto dir = values.get_string("from-checkpoint")) {
      reader = std::make_unique<checkpoint::CheckpointReader>(*dir);  // InputError when it is not one
      const nlohmann::json& meta = reader->meta();
      facts.dir = *dir;
      facts.step = meta.value("step", int64_t(0));
      facts.tensors = int64_t(reader->names().size());
      facts.written_by = meta.contains("written_by_layout") ? meta["written_by_layout"].dump() : "unknown";
      if (meta.contains("optimizer")) facts.lr = meta["optimizer"].value("lr", 0.0);
      const std::string source = "the checkpoint " + *dir;
      if (!any_given(values, model_options()) && meta.contains("model")) fill_from(values, meta["model"], kModelKeys, source);
      if (!any_given(values, layout_options()) && meta.contains("written_by_layout"))
        fill_from(values, meta["written_by_layout"], kLayoutKeys, source);
      fill_from(values, meta, {{"global_batch", "global-batch-size"}, {"micro_batch", "micro-batch-size"}}, source);
    }
    if (auto file = values.get_string("plan-json")) {
      if (auto text = read_settings_file(*file, "plan JSON", "--plan-json", "replan-plan-json", p)) {
        const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
        if (j.is_discarded() || !j.contains("candidates") || !j["candidates"].is_array() || j["candidates"].empty() ||
            !j["candidates"][0].contains("layout") || !j["candidates"][0]["layout"].is_object())
          p.add("--plan-json '" + *file + "' is not the output of `trident plan --json` with a candidate",
                "give the file `trident plan ... --json > plan.json` wrote", "replan-plan-json");
        else
          fill_from(values, j["candidates"][0]["layout"], kPlanJsonKeys, *file);
      }
    }
    int given = 0;
    for (const char* name : {"gpus-left", "lost-nodes", "nodelist"}) given += values.has(name) ? 1 : 0;
    if (given != 1)
      p.add(fmt::format("replan needs the GPUs that are left: exactly one of --gpus-left, --lost-nodes, --nodelist ({} "
                        "given)",
                        given),
            "give e.g. --gpus-left 448, --lost-nodes node[003,007] or --nodelist node[001-056]", "replan-survivors");
    const std::string batch = values.get_string("batch").value_or("keep");
    if (batch != "keep" && batch != "scale")
      p.add("--batch '" + batch + "' is not a batch policy", "use --batch keep or --batch scale", "replan-batch");
    const std::string rule = values.get_string("lr-rule").value_or("linear");
    if (rule != "linear" && rule != "sqrt")
      p.add("--lr-rule '" + rule + "' is not a learning-rate rule", "use --lr-rule linear or --lr-rule sqrt", "replan-lr-rule");
    if (values.has("lr-rule") && batch == "keep")
      p.add("--lr-rule scales the learning rate with the batch, but --batch keep keeps both",
            "add --batch scale, or drop --lr-rule", "replan-lr-rule");
    if (!args->emit.empty() && (args->emit.size() < 5 || args->emit.compare(args->emit.size() - 5, 5, ".toml") != 0))
      p.add("--emit '" + args->emit + "' is not a .toml file", "use --emit survivors.toml", "emit");
    check_outputs({{args->emit, "--emit"}}, args->options->input_paths(values), p);
    p.throw_if_any();

    RunSpec run = resolve_run(values, /*check_batch=*/true);
    Problems q;
    plan::Survivors survivors;
    if (auto n = values.get_int("gpus-left", q)) survivors = plan::survivors_from_gpus(*n, run.cluster, q);
    if (auto lost = values.get_string("lost-nodes"))
      survivors = plan::survivors_from_lost_nodes(plan::expand_slurm_nodelist(*lost, q), run.cluster, q);
    if (auto left = values.get_string("nodelist"))
      survivors = plan::survivors_from_nodelist(plan::expand_slurm_nodelist(*left, q), run.cluster, q);
    // The checkpoint holds this model (its tensors against its meta, then its meta against the run's).
    if (reader) {
      const ModelSpec cm = checkpoint::checked_model(*reader);
      nlohmann::json stored = engine::model_to_json(cm), planned = engine::model_to_json(run.model);
      for (auto* j : {&stored, &planned}) j->erase("name"), j->erase("rope_theta");  // not sizes
      if (stored != planned)
        q.add(fmt::format("the checkpoint '{}' holds another model ({}) than the plan's ({})", facts.dir,
                          stored.dump(), planned.dump()),
              "give the plan of the run that wrote it, or drop the model options to take the checkpoint's",
              "replan-model");
    }
    q.throw_if_any();

    const plan::SurvivorPlan r = plan::replan_for_survivors(
        run, survivors, batch == "keep" ? plan::BatchPolicy::Keep : plan::BatchPolicy::Scale,
        rule == "linear" ? plan::LrRule::Linear : plan::LrRule::Sqrt, cost_table(run), out.overhead_bytes, out.top);
    // The reshard check: the new run is one core's run check accepts (tp divides the heads, kv
    // heads and widths, pp the layers, ep the experts), and the checkpoint's tensors are this
    // model's, stored whole by logical name: every layout reads them (runtime/checkpoint).
    std::string reshard;
    nlohmann::json reshard_json = nullptr;
    bool reshards = true;
    if (reader && r.best) {
      Problems rp;
      check_run(r.best->run, true, rp);
      checkpoint::check_model_tensors(*reader, r.best->run.model, rp);
      const bool ok = reshards = rp.empty();
      std::string why;
      for (const auto& x : rp.list()) why += "\n    - " + x.what;
      reshard = fmt::format(
          "checkpoint {} (step {}, written by {}): {}\n",
          facts.dir, facts.step, facts.written_by,
          ok ? fmt::format("reshards into the new layout: its {} tensors are the model's, each stored whole by its "
                           "logical name (any tp, pp, dp, ZeRO stage reads them), and tp {} pp {} ep {} split this "
                           "model evenly; the run resumes at step {} {}{}",
                           facts.tensors, r.best->run.layout.tp, r.best->run.layout.pp, r.best->run.layout.ep,
                           facts.step + 1,
                           r.policy == plan::BatchPolicy::Keep ? "with the data order unchanged"
                                                               : "with the scaled batch",
                           facts.lr > 0 && r.lr_factor != 1
                               ? fmt::format(", learning rate {:.4g} x {:.4f} = {:.4g}", facts.lr, r.lr_factor,
                                             facts.lr * r.lr_factor)
                               : "")
             : "does NOT reshard into the new layout:" + why);
      reshard_json = {{"dir", facts.dir}, {"step", facts.step}, {"tensors", facts.tensors}, {"reshards", ok},
                      {"problems", why}};
      if (facts.lr > 0) reshard_json["lr_before"] = facts.lr, reshard_json["lr_after"] = facts.lr * r.lr_factor;
    }
    if (!args->emit.empty() && r.best) {
      const std::vector<std::string> header = {
          fmt::format("Written by trident replan: the best layout for {} of {} nodes of the plan for {}.",
                      r.survivors.nodes, run.cluster.nodes, run.model.name),
          fmt::format("Predicted: step {:.3f} s, {:.0f} tokens/s (x{:.3f} of the original's).", r.best->time.step,
                      r.best->tokens_per_s, r.throughput_ratio)};
      write_output_file(args->emit,
                        config_toml(args->options->defs(), values, r.best->run,
                                    {"json", "top", "per-stage", "gpus-left", "lost-nodes", "nodelist", "batch", "lr-rule",
                                     "from-checkpoint", "plan-json"},
                                    header),
                        "--emit");
    }
    if (out.json) {
      nlohmann::json j = survivor_replan_json(r);
      j["checkpoint"] = reshard_json;
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::printf("%s", survivor_replan_text(r).c_str());
      if (!reshard.empty()) std::printf("%s", reshard.c_str());
      if (!args->emit.empty() && r.best) std::printf("wrote the new layout to %s\n", args->emit.c_str());
    }
    return r.best && reshards ? 0 : 1;
  };
}

TRIDENT_COMMAND("replan", runtime_command_help("replan"), setup_replan);

}  // namespace
}  // namespace trident::cli
