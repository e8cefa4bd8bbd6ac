#include "cli/unknown_arguments.h"

#include <map>
#include <string>
#include <vector>

#include "core/suggest.h"

namespace trident::cli {

namespace {

std::vector<std::string> flag_names(const CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd.get_options())
    for (const auto& n : o->get_lnames()) names.push_back(n);
  return names;
}

}  // namespace

Problems unknown_arguments(const CLI::App& app, int argc, char** argv) {
  Problems p;
  int i = 1;
  while (i < argc && argv[i][0] == '-') ++i;  // --version, --help before the command
  if (i >= argc) return p;
  const std::string name = argv[i];
  const CLI::App* cmd = nullptr;
  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    commands.push_back(sub->get_name());
    if (sub->get_name() == name) cmd = sub;
  }
  if (!cmd) {
    p.add("unknown command '" + name + "'",
          did_you_mean(name, commands) + "use one of " + join_choices(commands) + " (trident --help lists them)",
          "unknown-command");
    return p;
  }
  const std::string help = "trident " + name + " --help lists its flags";
  std::map<const CLI::Option*, int> given;
  std::vector<const CLI::Option*> repeated;
  for (++i; i < argc; ++i) {
    const std::string word = argv[i];
    const bool is_long = word.rfind("--", 0) == 0 && word.size() > 2;
    if (!is_long && (word.size() < 2 || word[0] != '-')) {
      p.add("unexpected word '" + word + "' after trident " + name,
            "every value follows its flag (--model " + word + "); " + help, "unknown-flag");
      continue;
    }
    const std::string flag = word.substr(0, word.find('='));
    const bool inline_value = flag.size() < word.size();
    if (const CLI::Option* o = cmd->get_option_no_throw(flag)) {
      if (!inline_value && o->get_expected_min() > 0) ++i;  // its value, whatever it looks like
      // Given again where it takes one value (CLI11 alone: "At Most 1 required but received 2").
      if (o->get_multi_option_policy() == CLI::MultiOptionPolicy::Throw && ++given[o] == 2)
        repeated.push_back(o);
      continue;
    }
    // An unknown flag: the word after it is taken as its value, not reported a second time.
    std::string value;
    if (!inline_value && i + 1 < argc && argv[i + 1][0] != '-') value = argv[++i];
    const std::string bare = flag.substr(is_long ? 2 : 1);
    p.add("trident " + name + " has no flag " + flag + (value.empty() ? "" : " (given '" + value + "')"),
          did_you_mean(bare, flag_names(*cmd), "--") + help, "unknown-flag");
  }
  for (const CLI::Option* o : repeated) {
    const std::string flag = "--" + o->get_lnames().front();
    p.add(flag + " is given " + std::to_string(given[o]) + " times to trident " + name + "; it takes one value",
          "give " + flag + " once", "option-repeated");
  }
  return p;
}

}  // namespace trident::cli
