// Data loss through output paths: the one check (check_outputs) and the one atomic writer.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "core/output_path.h"
#include "runtime/data/token_file.h"

namespace fs = std::filesystem;
using namespace trident;

namespace {

struct Scratch {
  fs::path dir;
  Scratch() {
    dir = fs::temp_directory_path() / ("trident-output-path-" + std::to_string(::getpid()) + "-" +
                                       std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string file(const std::string& name, const std::string& text = "keep me") const {
    std::ofstream((dir / name).string()) << text;
    return (dir / name).string();
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }
};

std::string read(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

std::string problems_of(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs,
                        OutputKind kind = OutputKind::File) {
  Problems p;
  check_outputs(outputs, inputs, p, kind);
  std::string all;
  for (const auto& x : p.list()) all += x.what + " | " + x.fix + "\n";
  return all;
}

}  // namespace

TEST(OutputPath, refuses_an_output_that_is_an_input_naming_both) {
  Scratch s;
  const std::string data = s.file("data.tok");
  const std::string text = problems_of({{data, "--metrics"}}, {{data, "--data"}});
  EXPECT_NE(text.find("--metrics '" + data + "' is the same file as --data '" + data + "'"), std::string::npos) << text;
  // The same file by another name: a hard link and a "./"-style path, compared by device + inode.
  fs::create_hard_link(data, s.path("hard.tok"));
  EXPECT_NE(problems_of({{s.path("hard.tok"), "--checkpoint"}}, {{data, "--data"}}).find("same file"), std::string::npos);
  EXPECT_NE(problems_of({{(s.dir / "." / "data.tok").string(), "--report"}}, {{data, "--data"}}).find("same file"),
            std::string::npos);
}

TEST(OutputPath, refuses_directories_devices_symlinks_and_missing_folders) {
  Scratch s;
  const std::string target = s.file("target.txt");
  fs::create_symlink(target, s.path("link"));
  EXPECT_NE(problems_of({{s.dir.string(), "--svg"}}, {}).find("is a directory"), std::string::npos);
  EXPECT_NE(problems_of({{"/dev/null", "--trace"}}, {}).find("special file"), std::string::npos);
  EXPECT_NE(problems_of({{"/dev/full", "--metrics"}}, {}).find("special file"), std::string::npos);
  EXPECT_NE(problems_of({{s.path("link"), "--out"}}, {}).find("symbolic link"), std::string::npos);
  EXPECT_NE(problems_of({{s.path("no/such/dir/x"), "--out"}}, {}).find("does not exist"), std::string::npos);
  EXPECT_NE(problems_of({{target + "/x", "--out"}}, {}).find("is not a folder"), std::string::npos);
  ::mkfifo(s.path("fifo").c_str(), 0600);
  EXPECT_NE(problems_of({{s.path("fifo"), "--metrics"}}, {}).find("special file"), std::string::npos);
  // Fine: a new file, an existing plain file nobody reads.
  EXPECT_EQ(problems_of({{s.path("new.json"), "--report"}, {target, "--svg"}}, {{s.path("absent"), "--data"}}), "");
}

TEST(OutputPath, refuses_an_output_inside_a_folder_that_is_read_and_two_outputs_on_one_file) {
  Scratch s;
  s.file("a.txt");
  EXPECT_NE(problems_of({{s.path("a.txt"), "OUT"}}, {{s.dir.string(), "TEXT"}}).find("inside the folder"), std::string::npos);
  EXPECT_NE(problems_of({{s.path("new.tok"), "OUT"}}, {{s.dir.string(), "TEXT"}}).find("inside the folder"),
            std::string::npos);
  EXPECT_NE(problems_of({{s.path("x.svg"), "--svg"}, {s.path("x.svg"), "--trace"}}, {}).find("--trace"), std::string::npos);
  // A checkpoint folder may exist, but must not hold the checkpoint being resumed.
  fs::create_directories(s.dir / "ckpt");
  const std::string inner = s.file("ckpt/manifest.json");
  EXPECT_EQ(problems_of({{s.path("ckpt"), "--checkpoint"}}, {}, OutputKind::Directory), "");
  EXPECT_NE(problems_of({{s.path("ckpt"), "--checkpoint"}}, {{inner, "--resume"}}, OutputKind::Directory)
                .find("inside the folder"),
            std::string::npos);
}

TEST(OutputPath, atomic_writer_never_replaces_a_special_file_or_a_symlink) {
  Scratch s;
  const std::string target = s.file("target.txt");
  fs::create_symlink(target, s.path("link"));
  EXPECT_THROW(write_text_atomically(s.path("link"), "new"), InputError);
  EXPECT_TRUE(fs::is_symlink(s.path("link")));
  EXPECT_EQ(read(target), "keep me");
  EXPECT_THROW(write_text_atomically(s.dir.string(), "new"), InputError);
  // A FIFO of our own stands for every special file: never aim a test at the machine's /dev/null.
  ASSERT_EQ(::mkfifo(s.path("fifo").c_str(), 0600), 0);
  EXPECT_THROW(write_text_atomically(s.path("fifo"), "new"), InputError);
  struct stat st {};
  ASSERT_EQ(::lstat(s.path("fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  write_text_atomically(target, "new");
  EXPECT_EQ(read(target), "new");
  for (const auto& e : fs::directory_iterator(s.dir))  // no temp file left behind
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

TEST(OutputPath, temp_names_are_unique_per_process_and_call) {
  const std::string a = unique_temp_path("x"), b = unique_temp_path("x");
  EXPECT_NE(a, b);
  EXPECT_NE(a.find(std::to_string(::getpid())), std::string::npos);
  // Writers racing on one path each write a whole file; the survivor is one of them, intact.
  Scratch s;
  const std::string path = s.path("race.txt");
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] { write_text_atomically(path, std::string(100000, char('a' + t))); });
  for (auto& t : threads) t.join();
  const std::string got = read(path);
  ASSERT_EQ(got.size(), 100000u);
  EXPECT_EQ(got, std::string(100000, got[0]));
}

TEST(OutputPath, directory_sync_names_the_parent_and_refuses_what_is_no_directory) {
  EXPECT_EQ(parent_directory("a/b/c.json"), "a/b");
  EXPECT_EQ(parent_directory("a/b/ckpt/"), "a/b");
  EXPECT_EQ(parent_directory("c.json"), ".");
  EXPECT_EQ(parent_directory("/c.json"), "/");
  Scratch s;
  EXPECT_TRUE(sync_directory(s.dir.string()));
  EXPECT_FALSE(sync_directory(s.file("plain.txt")));    // a file is not a directory
  EXPECT_FALSE(sync_directory(s.path("missing-dir")));  // nor is nothing
}

TEST(OutputPath, a_write_error_on_a_stream_stops_with_the_reason) {
  std::FILE* full = std::fopen("/dev/full", "w");
  ASSERT_NE(full, nullptr);
  OutputStream out(full, "/dev/full");
  try {
    out.write_line("{\"step\": 1}");
    FAIL() << "a full disk was not reported";
  } catch (const InputError& e) {
    EXPECT_NE(e.problems().front().what.find("No space left"), std::string::npos) << e.problems().front().what;
  }
  EXPECT_THROW(OutputStream("/dev/full"), InputError);  // and it is refused as a special file up front
}

TEST(OutputPath, token_files_use_the_atomic_writer) {
  Scratch s;
  const std::string target = s.file("target.txt");
  fs::create_symlink(target, s.path("link.tok"));
  EXPECT_THROW(data::write_token_file(s.path("link.tok"), {1, 2, 3}, 256, 0), InputError);
  EXPECT_EQ(read(target), "keep me");
}
