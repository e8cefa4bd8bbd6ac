// Problems: collect every problem of a config, then report them all together.
//
// Bad input never asserts or crashes: each check adds a Problem that names the value and
// the fix, and the caller throws once at the end so a user sees every mistake in one go.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace trident {

struct Problem {
  std::string what;  // what is wrong, with the values ("heads (12) not divisible by tp (8)")
  std::string fix;   // what to do about it ("use --tp 1, 2, 3, 4, 6 or 12")
  std::string code;  // stable identifier for scripts and lint ("tp-divides-heads"); may be empty
};

// Thrown when input cannot be used. The CLI prints every problem and exits with code 2.
class InputError : public std::runtime_error {
 public:
  explicit InputError(std::vector<Problem> problems);
  const std::vector<Problem>& problems() const { return problems_; }

 private:
  std::vector<Problem> problems_;
};

class Problems {
 public:
  void add(std::string what, std::string fix, std::string code = "") {
    list_.push_back({std::move(what), std::move(fix), std::move(code)});
  }
  void add_all(const Problems& other) { list_.insert(list_.end(), other.list_.begin(), other.list_.end()); }
  bool empty() const { return list_.empty(); }
  size_t size() const { return list_.size(); }
  const std::vector<Problem>& list() const { return list_; }
  // Throws InputError carrying every problem collected so far; does nothing when there are none.
  void throw_if_any() const;

 private:
  std::vector<Problem> list_;
};

// "a, b or c": for listing the valid choices in a fix.
std::string join_choices(const std::vector<std::string>& choices);

}  // namespace trident
