#include "report/output_file.h"

#include <filesystem>
#include <fstream>

#include "core/problems.h"

namespace trident {

void write_output_file(const std::string& path, const std::string& text, const std::string& flag) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (path.empty()) throw InputError({{flag + " was given an empty path", "give " + flag + " a file name"}});
  if (fs::exists(st) && !fs::is_regular_file(st))
    throw InputError({{flag + " '" + path + "' is not a regular file (a folder or a device)",
                       "give " + flag + " the path of a new or ordinary file", "output-path"}});
  // Write beside and rename, so a failed write never leaves half a file in place of a good one.
  const std::string tmp = path + ".tmp-trident";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError({{"cannot open '" + path + "' for writing (" + flag + ")",
                                 "give " + flag + " a path in a folder that exists and is writable", "output-path"}});
    out << text;
    out.close();
    if (!out) {
      fs::remove(tmp, ec);
      throw InputError({{"failed writing '" + path + "' (" + flag + ")", "check the disk space", "output-path"}});
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw InputError({{"cannot replace '" + path + "' (" + flag + ")", "give " + flag + " a writable path",
                       "output-path"}});
  }
}

}  // namespace trident
