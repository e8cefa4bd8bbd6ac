#include "cli/run_cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <new>

#include "cli/cli_options.h"
#include "cli/command.h"
#include "cli/runtime_commands.h"
#include "cli/unknown_arguments.h"
#include "core/problems.h"
#include "core/standard_output.h"

namespace trident::cli {

static void print_problems(const InputError& e) {
  const auto& list = e.problems();
  std::fprintf(stderr, "trident: %zu problem%s with the input:\n", list.size(), list.size() == 1 ? "" : "s");
  for (const Problem& p : list) {
    std::fprintf(stderr, "  - %s\n", p.what.c_str());
    if (!p.fix.empty()) std::fprintf(stderr, "    fix: %s\n", p.fix.c_str());
  }
}

// Every command as a subcommand of `app`, each with its runner.
static std::vector<std::pair<CLI::App*, Runner>> add_commands(CLI::App& app) {
  std::vector<std::pair<CLI::App*, Runner>> runners;
  // A config file may hold the runtime commands' options, wherever they are built.
  for (const RuntimeCommand& c : runtime_commands())
    if (c.config_options) add_config_vocabulary(c.config_options());
  // By name: the registration order is the link order, which says nothing to a user.
  std::vector<const Command*> commands;
  for (const Command& c : command_registry()) commands.push_back(&c);
  std::sort(commands.begin(), commands.end(), [](const Command* a, const Command* b) { return a->name < b->name; });
  for (const Command* cp : commands) {
    const Command& c = *cp;
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    runners.emplace_back(sub, c.setup(*sub));
  }
  return runners;
}

FlagKind flag_kind(const std::string& command, const std::string& name) {
  CLI::App app;
  try {
    add_commands(app);
    const CLI::App* sub = nullptr;
    for (const CLI::App* c : app.get_subcommands({}))
      if (c->get_name() == command) sub = c;
    const CLI::Option* opt = sub ? sub->get_option_no_throw("--" + name) : nullptr;
    if (!opt) return FlagKind::Unknown;
    return opt->get_expected_min() == 0 ? FlagKind::Switch : FlagKind::Value;  // a flag expects no value
  } catch (const std::exception&) {
    return FlagKind::Unknown;  // the command itself then reports what is wrong
  }
}

int run_cli(int argc, char** argv) {
  CLI::App app{"Trident: plan, check, simulate and train data / tensor / pipeline parallel transformer layouts"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "trident 0.1.0");
  std::vector<std::pair<CLI::App*, Runner>> runners;
  try {
    runners = add_commands(app);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // A mistyped flag or command (CLI11: "not expected", or "a subcommand is required"): name
    // each unknown word with the closest known one.
    if (e.get_exit_code() != 0) {
      const Problems unknown = unknown_arguments(app, argc, argv);
      if (!unknown.empty()) {
        print_problems(InputError(unknown.list()));
        return 2;
      }
    }
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const trident::InputError& e) {
    print_problems(e);
    return 2;
  }
  try {
    // A report that did not reach standard output (a full disk, a closed pipe) fails the run.
    for (auto& [sub, run] : runners)
      if (sub->parsed()) {
        const int code = run();
        return standard_output_written(sub->get_name(), "the report") ? code : 1;
      }
  } catch (const trident::InputError& e) {
    print_problems(e);
    return 2;
  } catch (const std::bad_alloc&) {
    // Every input is bounded, but a machine (or a memory cap) may still hold less than a run asks.
    std::fprintf(stderr, "trident: error: out of memory: this machine (or its memory limit) cannot hold what the "
                         "command needs; use smaller inputs or sizes\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trident: error: %s\n", e.what());
    return 1;
  }
  return 2;
}

}  // namespace trident::cli
