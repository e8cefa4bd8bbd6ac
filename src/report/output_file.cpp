#include "report/output_file.h"

#include "core/output_path.h"
#include "core/problems.h"

namespace trident {

void write_output_file(const std::string& path, const std::string& text, const std::string& flag) {
  // The one output-path check and the one atomic writer (core/output_path.h).
  if (path.empty()) throw InputError({{flag + " was given an empty path", "give " + flag + " a file name"}});
  require_output({path, flag});
  write_text_atomically(path, text);
}

}  // namespace trident
