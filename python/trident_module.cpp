// trident for Python: plan, lint, topo and simulate with the same inputs as the command line.
//
//   import trident
//   best = trident.plan(model="gpt3-175b", nodes=512, global_batch_size=1536, top=3)
//   trident.lint(config="examples/gpt3-175b-4096-a100.toml", pp=16, dp=32)
//   trident.simulate({"model": "gpt3-175b", "tp": 8, "pp": 8, "global-batch-size": 1536})
//
// Each keyword (or key of a dict) is an option name with '_' or '-'; True passes a switch, False
// its --no- form. The call runs the CLI's own command (src/cli/run_cli.h) with --json and returns
// the JSON as a dict (help=True and emit="megatron" / "torchtitan" return their text as a str);
// unusable input raises ValueError with every problem and its fix; so do an option given twice and
// True or False for an option that takes a value (html=True: give the file, html="page.html").
#include <pybind11/pybind11.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cli/run_cli.h"

namespace py = pybind11;

namespace {

// Captures what the command writes to a file descriptor (stdout or stderr) while it runs.
class Capture {
 public:
  explicit Capture(int fd) : fd_(fd) {
    std::fflush(nullptr);
    file_ = std::tmpfile();
    saved_ = dup(fd_);
    if (file_ && saved_ >= 0) dup2(fileno(file_), fd_);
  }
  std::string finish() {
    std::fflush(nullptr);
    if (saved_ >= 0) {
      dup2(saved_, fd_);
      close(saved_);
      saved_ = -1;
    }
    std::string text;
    if (!file_) return text;
    std::rewind(file_);
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, file_)) > 0) text.append(buf, n);
    std::fclose(file_);
    file_ = nullptr;
    return text;
  }
  ~Capture() { finish(); }

 private:
  int fd_;
  int saved_ = -1;
  std::FILE* file_ = nullptr;
};

std::string option_name(std::string key) {
  for (char& c : key)
    if (c == '_') c = '-';
  return key;
}

// argv strings end at a NUL: the rest of a name or value would be dropped without a word.
[[noreturn]] void refuse_nul(const std::string& name) {
  throw py::value_error("trident: option '" + name.substr(0, name.find('\0')) +
                        "' holds a NUL character, which no command-line argument can carry: remove it");
}

// The options of one call, in the order given: the dict's, then the keywords.
using Options = std::vector<std::pair<std::string, py::object>>;

std::vector<std::string> arguments(const std::string& command, const Options& options) {
  std::vector<std::string> args = {"trident", command};
  std::map<std::string, std::string> seen;  // option name -> the key that gave it
  for (const auto& [key, v] : options) {
    const std::string name = option_name(key);
    if (name.find('\0') != std::string::npos) refuse_nul(name);
    // The same option twice ('global_batch_size' and 'global-batch-size', or in the dict and as
    // a keyword): the command would take one silently or fail in the parser's words.
    if (auto [it, fresh] = seen.emplace(name, key); !fresh)
      throw py::value_error("trident." + command + "(): option --" + name + " is given twice (as '" + it->second +
                            "' and as '" + key + "'): give it once");
    if (py::isinstance<py::bool_>(v)) {
      // True passes a switch and False its --no- form; an option that takes a value (--html
      // FILE) would take the next argument as its value.
      if (trident::cli::flag_kind(command, name) == trident::cli::FlagKind::Value)
        throw py::value_error("trident." + command + "(" + key + "=" + (v.cast<bool>() ? "True" : "False") +
                              "): --" + name + " takes a value (FILE, a number or a name), not True or False: give " +
                              key + "='" + (name == "svg" ? "timeline.svg" : name == "html" ? "page.html" : "VALUE") +
                              "' (see trident." + command + "(help=True))");
      args.push_back((v.cast<bool>() ? "--" : "--no-") + name);
      continue;
    }
    if (v.is_none()) continue;
    args.push_back("--" + name);
    args.push_back(py::str(v));
    if (args.back().find('\0') != std::string::npos) refuse_nul(name);
  }
  args.push_back("--json");
  return args;
}

// help=True prints the command's help, emit="megatron" (any emit but a .toml file) a framework's
// settings: text, returned as a str rather than parsed as JSON.
bool text_output(const Options& options) {
  for (const auto& [k, v] : options) {
    const std::string name = option_name(k);
    if (name == "help" && py::isinstance<py::bool_>(v) && v.cast<bool>()) return true;
    if (name == "emit" && !v.is_none()) {
      const std::string e = py::str(v);
      if (e.size() < 5 || e.compare(e.size() - 5, 5, ".toml") != 0) return true;
    }
  }
  return false;
}

py::object run(const std::string& command, py::object options, const py::kwargs& kwargs) {
  Options all;
  if (!options.is_none()) {
    if (!py::isinstance<py::dict>(options))
      throw py::type_error("trident." + command + "() takes a dict of options and/or keyword arguments");
    for (const auto& [k, v] : options.cast<py::dict>()) all.emplace_back(py::str(k), py::reinterpret_borrow<py::object>(v));
  }
  for (const auto& [k, v] : kwargs) all.emplace_back(py::str(k), py::reinterpret_borrow<py::object>(v));
  std::vector<std::string> args = arguments(command, all);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  int code;
  std::string out, err;
  {
    Capture stdout_capture(1), stderr_capture(2);
    code = trident::cli::run_cli(int(argv.size()), argv.data());
    out = stdout_capture.finish();
    err = stderr_capture.finish();
  }
  // 0: done; 1: lint found errors / plan found no layout (the JSON says so); 2: unusable input.
  if (code == 2 || out.empty()) throw py::value_error(err.empty() ? "trident " + command + " failed" : err);
  if (text_output(all)) return py::str(out);
  py::object result = py::module_::import("json").attr("loads")(out);
  if (!err.empty() && py::isinstance<py::dict>(result)) result["stderr"] = err;  // notes, e.g. keys not used
  return result;
}

}  // namespace

PYBIND11_MODULE(trident, m) {
  m.doc() = "Trident: plan, lint, topo and simulate data / tensor / pipeline parallel transformer layouts";
  const char* shared =
      "Options as keyword arguments (tp=8, global_batch_size=1536, sequence_parallel=True) and/or a dict of option "
      "names ({'global-batch-size': 1536}), exactly the command's flags; config='FILE.toml' reads a config file. "
      "Returns the command's JSON output as a dict; raises ValueError listing every problem of unusable input.";
  static std::vector<std::string> docs;  // pybind11 keeps the pointers
  for (const char* name : {"plan", "lint", "topo", "simulate"}) {
    const std::string cmd = name;
    docs.push_back("trident " + cmd + ". " + shared);
    m.def(
        name, [cmd](py::object options, const py::kwargs& kwargs) { return run(cmd, options, kwargs); },
        py::arg("options") = py::none(), docs.back().c_str());
  }
}
