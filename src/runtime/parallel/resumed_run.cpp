#include "runtime/parallel/resumed_run.h"

#include <map>

#include <fmt/format.h>

#include "core/dimensions.h"
#include "runtime/engine/run_meta.h"

namespace trident::parallel {

namespace {

using json = nlohmann::json;

// The layout that wrote a checkpoint (every dimension and the schedule): the checkpoint itself
// holds logical tensors that resume under any layout, so this is the run's, not the tensors'.
json written_by_layout(const TrainSettings& s) {
  json j = layout_json(s.run.layout);
  j.update({{"zero", s.run.exec.zero}, {"schedule", to_string(s.run.exec.schedule)},
            {"virtual_stages", s.run.exec.virtual_stages}});
  return j;
}

// A meta value as the option text that reads back to it.
std::string option_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return v.dump();  // integers as they are; doubles in the shortest form that reads back the same
}

// The model's sizes by the option that sets each (the MoE ones only for a MoE model).
std::vector<std::pair<std::string, std::string>> model_options_of(const ModelSpec& m) {
  const auto n = [](int64_t v) { return std::to_string(v); };
  std::vector<std::pair<std::string, std::string>> out = {
      {"tied-embeddings", m.tied_embeddings() ? "true" : "false"},
      {"family", to_string(m.family)},
      {"kv-heads", n(m.kv_heads)},
      {"layers", n(m.layers)},
      {"hidden", n(m.hidden)},
      {"heads", n(m.heads)},
      {"ffn-hidden", n(m.ffn_hidden)},
      {"seq-len", n(m.seq_len)},
      {"vocab", n(m.vocab)}};
  if (m.head_size > 0) out.push_back({"head-dim", n(m.head_size)});
  if (m.qk_norm) out.push_back({"qk-norm", "true"});
  if (m.norm_eps != 1e-5) out.push_back({"norm-epsilon", fmt::format("{}", m.norm_eps)});
  if (m.sliding_window > 0) out.push_back({"window-size", n(m.sliding_window)});
  if (m.full_attention_every > 0) out.push_back({"window-attn-skip-freq", n(m.full_attention_every)});
  if (m.attention_sinks) out.push_back({"attention-sinks", "true"});
  // The biases by Megatron's switches (capability refuses a mix neither sets).
  const bool gpt = m.family == ModelFamily::GPT, all_linear = m.has_proj_bias() && m.has_mlp_bias();
  if (all_linear != gpt || m.router_bias) out.push_back({"add-bias-linear", all_linear ? "true" : "false"});
  if (!all_linear && m.has_qkv_bias() != gpt) out.push_back({"add-qkv-bias", m.has_qkv_bias() ? "true" : "false"});
  if (m.activation_clamp > 0) out.push_back({"activation-func-clamp-value", fmt::format("{}", m.activation_clamp)});
  if (m.mtp_layers > 0) out.push_back({"mtp-num-layers", n(m.mtp_layers)});
  if (m.is_mla())
    out.insert(out.end(), {{"multi-latent-attention", "true"},
                           {"q-lora-rank", n(m.q_lora_rank)},
                           {"kv-lora-rank", n(m.kv_lora_rank)},
                           {"qk-head-dim", n(m.qk_nope_head_dim)},
                           {"qk-pos-emb-head-dim", n(m.qk_rope_head_dim)},
                           {"v-head-dim", n(m.v_head_dim)}});
  if (m.rope_scaling.type == "llama3")
    out.insert(out.end(), {{"rope-scaling-factor", fmt::format("{}", m.rope_scaling.factor)},
                           {"rope-low-freq-factor", fmt::format("{}", m.rope_scaling.low_freq_factor)},
                           {"rope-high-freq-factor", fmt::format("{}", m.rope_scaling.high_freq_factor)},
                           {"rope-original-max-position", n(m.rope_scaling.original_max_position)}});
  const RopeScaling& y = m.rope_scaling;
  if (y.type == "yarn")
    out.insert(out.end(), {{"rope-type", "yarn"},
                           {"rotary-scaling-factor", fmt::format("{}", y.factor)},
                           {"yarn-original-max-position-embeddings", n(y.original_max_position)},
                           {"yarn-beta-fast", fmt::format("{}", y.beta_fast)},
                           {"yarn-beta-slow", fmt::format("{}", y.beta_slow)},
                           {"mscale", fmt::format("{}", y.mscale)},
                           {"mscale-all-dim", fmt::format("{}", y.mscale_all_dim)},
                           {"yarn-correction-range-round-to-int", y.truncate ? "true" : "false"}});
  if (m.is_moe())
    out.insert(out.end(), {{"experts", n(m.experts)},
                           {"experts-per-token", n(m.experts_per_token)},
                           {"expert-ffn-hidden", n(m.expert_ffn_hidden)},
                           {"shared-experts", n(m.shared_experts)},
                           {"moe-dense-layers", n(m.moe_dense_layers)},
                           {"moe-layer-freq", n(m.moe_layer_freq)},
                           {"capacity-factor", fmt::format("{}", m.capacity_factor)}});
  if (m.is_moe() && m.router_score != "softmax") out.push_back({"moe-router-score-function", m.router_score});
  if (m.is_moe() && m.router_expert_bias) out.push_back({"moe-router-enable-expert-bias", "true"});
  if (m.is_moe() && m.router_groups > 0)
    out.insert(out.end(), {{"moe-router-num-groups", n(m.router_groups)}, {"moe-router-group-topk", n(m.router_group_topk)}});
  if (m.is_moe() && m.router_topk_scaling != 1.0)
    out.push_back({"moe-router-topk-scaling-factor", fmt::format("{}", m.router_topk_scaling)});
  return out;
}

}  // namespace

json checkpoint_meta(const TrainSettings& s, int64_t step) {
  const auto& x = s.run.exec;
  json meta = {
      {"model", engine::model_to_json(s.run.model)},
      {"step", step},
      {"seed", s.seed},
      {"steps", s.steps},
      {"data", s.data_path},
      {"sampler",
       {{"kind", s.data_path.empty() ? "synthetic" : "token-file"},
        {"seed", s.seed},
        {"next_step", step}}},
      {"micro_batch", x.micro_batch_size},
      {"global_batch", x.global_batch_size},
      {"optimizer",
       {{"lr", s.adamw.lr},
        {"min_lr", s.adamw.min_lr},
        {"warmup", s.adamw.warmup_steps},
        {"decay_steps", s.adamw.decay_steps},
        {"beta1", s.adamw.beta1},
        {"beta2", s.adamw.beta2},
        {"eps", s.adamw.eps},
        {"weight_decay", s.adamw.weight_decay},
        {"grad_clip", s.adamw.grad_clip}}},
      {"written_by_layout", written_by_layout(s)},
      // The execution settings beside the layout's (the schedule and ZeRO are in written_by_layout).
      {"execution",
       {{"recompute", to_string(x.recompute)},
        {"sequence_parallel", x.sequence_parallel},
        {"precision", to_string(x.precision)},
        {"grad_bits", x.grad_bits}}},
      {"tokenizer", s.tokenizer}};
  // The tokens themselves, so a resume from another path to the same file is the same run.
  if (s.data) meta["data_checksum"] = fmt::format("{:#018x}", s.data->payload_checksum());
  if (s.run.model.is_moe()) meta["router"] = engine::router_to_json(s.moe);
  if (s.run.model.mtp_layers > 0) meta["mtp"] = {{"loss_scaling", s.mtp_loss_scaling}};  // DeepSeek-V3's MTP weight
  return meta;
}

std::vector<StoredSetting> stored_settings(const json& meta) {
  std::vector<StoredSetting> out;
  auto add = [&](const std::string& option, const json& table, const char* key, StoredSetting::Kind kind) {
    if (table.is_object() && table.contains(key)) out.push_back({option, option_text(table.at(key)), kind});
  };
  add("steps", meta, "steps", StoredSetting::Steps);
  add("seed", meta, "seed", StoredSetting::Fixed);
  add("global-batch-size", meta, "global_batch", StoredSetting::Fixed);
  // The micro-batch splits the global batch (the sampler draws by step and sequence, whatever
  // the split): a new layout may need another.
  add("micro-batch-size", meta, "micro_batch", StoredSetting::Layout);
  add("data", meta, "data", StoredSetting::Fixed);
  const json none = json::object();
  const json& o = meta.contains("optimizer") ? meta.at("optimizer") : none;
  add("lr", o, "lr", StoredSetting::Fixed);
  add("min-lr", o, "min_lr", StoredSetting::Fixed);
  add("warmup", o, "warmup", StoredSetting::Fixed);
  add("weight-decay", o, "weight_decay", StoredSetting::Fixed);
  add("grad-clip", o, "grad_clip", StoredSetting::Fixed);
  const json& r = meta.contains("router") ? meta.at("router") : none;
  add("moe-normalise", r, "normalise", StoredSetting::Fixed);
  add("moe-drop", r, "drop", StoredSetting::Fixed);
  add("moe-aux-loss-coeff", r, "aux_loss_coeff", StoredSetting::Fixed);
  add("moe-z-loss-coeff", r, "z_loss_coeff", StoredSetting::Fixed);
  add("moe-router-bias-update-rate", r, "bias_update_rate", StoredSetting::Fixed);
  add("mtp-loss-scaling-factor", meta.contains("mtp") ? meta.at("mtp") : none, "loss_scaling", StoredSetting::Weight);
  const json& l = meta.contains("written_by_layout") ? meta.at("written_by_layout") : none;
  for (const Dimension& d : dimensions()) add(d.name, l, d.name, StoredSetting::Layout);
  add("order", l, "order", StoredSetting::Layout);
  add("schedule", l, "schedule", StoredSetting::Layout);
  add("virtual-stages", l, "virtual_stages", StoredSetting::Layout);
  add("zero", l, "zero", StoredSetting::Layout);
  const json& x = meta.contains("execution") ? meta.at("execution") : none;
  add("recompute", x, "recompute", StoredSetting::Layout);
  add("sequence-parallel", x, "sequence_parallel", StoredSetting::Layout);
  // The arithmetic of the run: another precision trains another model.
  add("precision", x, "precision", StoredSetting::Fixed);
  add("grad-bits", x, "grad_bits", StoredSetting::Fixed);
  return out;
}

std::vector<std::string> fill_from_checkpoint(OptionValues& values, const json& meta, const std::string& dir,
                                              int64_t world, bool weights_only) {
  const std::string source = "the checkpoint " + dir;
  std::vector<std::string> set;
  auto fill = [&](const std::string& option, const std::string& text) {
    if (values.has(option) || !values.find_def(option)) return;
    values.set(option, text, source);
    set.push_back(option);
  };
  // The model: its sizes, unless a --model preset describes a whole model of its own (a size that
  // differs from the checkpoint's is then refused by the run check, naming both).
  if (!values.has("model") && meta.contains("model") && !meta.at("model").is_null())
    for (const auto& [option, text] : model_options_of(engine::model_from_json(meta.at("model")))) fill(option, text);
  if (weights_only) {
    // The router's weighting and dropping are the model's function (an imported Qwen3-MoE's
    // norm_topk_prob; Hugging Face never drops): an --init-from run keeps them unless given. Its
    // loss coefficients are the new run's recipe.
    const json& r = meta.contains("router") && meta.at("router").is_object() ? meta.at("router") : json::object();
    for (const auto& [option, key] : {std::pair{"moe-normalise", "normalise"}, {"moe-drop", "drop"}})
      if (r.contains(key) && r.at(key).is_boolean()) fill(option, r.at(key).get<bool>() ? "true" : "false");
    return set;
  }

  // The layout when none is given and the launcher started the checkpoint's number of ranks.
  const json& written = meta.contains("written_by_layout") ? meta.at("written_by_layout") : json::object();
  const Layout stored = layout_from_json(written.is_object() ? written : json::object());
  bool dimension_given = values.has("order");
  for (const Dimension& d : dimensions()) dimension_given = dimension_given || values.has(d.name);
  const bool same_layout = written.is_object() && !dimension_given && stored.world_size() == world;
  // Each dimension's size in this run, to tell which riders keep their dimension.
  std::map<std::string, int64_t> size;
  Problems ignored;  // a value that does not parse is reported when the options are read
  int64_t others = 1;
  for (const Dimension& d : dimensions()) {
    size[d.name] = same_layout ? stored.*d.size : values.get_int(d.name, ignored).value_or(1);
    if (d.dense && d.dim != Dim::DP) others *= std::max<int64_t>(1, size[d.name]);
  }
  if (!same_layout && !values.has("dp")) size["dp"] = world / others;
  std::map<std::string, std::string> rides_on;
  for (const Dimension& d : dimensions())
    for (const char* rider : d.riders) rides_on[rider] = d.name;

  for (const StoredSetting& st : stored_settings(meta)) {
    const bool dimension = st.option == "order" || find_dimension(st.option) != nullptr;
    if (dimension && !same_layout) continue;
    if (auto on = rides_on.find(st.option);
        on != rides_on.end() && size[on->second] != (stored.*find_dimension(on->second)->size))
      continue;  // the schedule of another pp, ZeRO of another dp: this run's own or its default
    if (st.option == "data" && st.text.empty()) continue;  // synthetic sequences
    fill(st.option, st.text);
  }
  return set;
}

std::vector<std::string> compare_with_checkpoint(const TrainSettings& s, const OptionValues& values,
                                                 Problems& problems) {
  std::vector<std::string> changes;
  const json& stored_meta = s.resume_meta;
  const json now_meta = checkpoint_meta(s, 0);
  std::map<std::string, std::string> now;
  for (const StoredSetting& st : stored_settings(now_meta)) now[st.option] = st.text;
  const std::string redo = "or start a new run from the checkpoint's weights with --init-from " + s.resume_path;
  for (const StoredSetting& st : stored_settings(stored_meta)) {
    auto it = now.find(st.option);
    if (st.option == "data" || it == now.end() || it->second == st.text) continue;
    if (st.kind == StoredSetting::Fixed) {
      problems.add(fmt::format("--{} {} differs from the checkpoint's {}: --resume '{}' continues the run that "
                               "checkpoint holds",
                               st.option, it->second, st.text, s.resume_path),
                   fmt::format("drop --{} (the run keeps the checkpoint's {}), {}", st.option, st.text, redo),
                   "resume-setting");
      continue;
    }
    std::string note;
    if (st.kind == StoredSetting::Steps) {
      // The cosine decays to the new last step: the learning rate from here on is another.
      engine::AdamWConfig before = s.adamw;
      before.decay_steps = stored_meta.value("steps", s.steps);
      const int64_t next = stored_meta.value("step", int64_t(0));
      note = fmt::format(": the cosine now ends at step {}, so the lr of step {} is {:.3g} (it was {:.3g})", s.steps,
                         next + 1, engine::learning_rate(s.adamw, next), engine::learning_rate(before, next));
    }
    changes.push_back(fmt::format("{} {} -> {} ({}){}", st.option, st.text, it->second,
                                  values.has(st.option) ? "given" : "default", note));
  }
  // The data by its tokens: another path to the same file is the same run.
  if (stored_meta.contains("data_checksum") && now_meta.contains("data_checksum") &&
      stored_meta.at("data_checksum") != now_meta.at("data_checksum"))
    problems.add(fmt::format("--data '{}' holds other tokens (FNV-1a 64 {}) than the checkpoint's data '{}' ({})",
                             s.data_path, now_meta.at("data_checksum").get<std::string>(),
                             option_text(stored_meta.value("data", json(""))),
                             option_text(stored_meta.at("data_checksum"))),
                 "drop --data (the run keeps the checkpoint's), " + redo, "resume-setting");
  return changes;
}

}  // namespace trident::parallel
