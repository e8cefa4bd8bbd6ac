// trident models / trident clusters: the built-in presets a plan can name, with the figures the
// planner uses for each (parameters, GPUs, links).
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "report/catalog_report.h"

namespace trident::cli {
namespace {

Runner setup_models(CLI::App& cmd) {
  auto json = std::make_shared<bool>(false);
  cmd.add_flag("--json", *json, "print JSON instead of the table");
  return [json] {
    std::printf("%s", *json ? (models_json().dump(2) + "\n").c_str() : models_text().c_str());
    return 0;
  };
}

Runner setup_clusters(CLI::App& cmd) {
  auto json = std::make_shared<bool>(false);
  cmd.add_flag("--json", *json, "print JSON instead of the tables");
  return [json] {
    std::printf("%s", *json ? (clusters_json().dump(2) + "\n").c_str() : clusters_text().c_str());
    return 0;
  };
}

TRIDENT_COMMAND("models", "list the model presets (--model NAME) with their shapes and parameter counts", setup_models);
TRIDENT_COMMAND("clusters", "list the cluster (--cluster NAME) and GPU (--gpu NAME) presets with their figures", setup_clusters);

}  // namespace
}  // namespace trident::cli
