// The token file is opened and verified (checksum, ids below the vocabulary) once per rank:
// `trident train` opens it, and the run check, the training and validation samplers and the
// ranks' agreement all read that one file. A run handed the opened file of a path that no longer
// exists must therefore train: any second open (a second checksum pass) would fail.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "runtime/data/token_file.h"
#include "runtime/parallel/training_loop.h"
#include "train_app/planning.h"

using namespace trident;
namespace fs = std::filesystem;

TEST(TokenFileOnce, a_run_reads_only_the_token_file_it_was_handed) {
  const fs::path dir = fs::temp_directory_path() / ("trident-once-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "data.tok").string();
  std::vector<int32_t> tokens(4000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 7 + i / 13) % 64);
  data::write_token_file(path, tokens, 64, 0);

  parallel::TrainSettings s;
  s.planning = train_app::planning();
  auto& m = s.run.model;
  m.layers = 1, m.hidden = 32, m.heads = 2, m.kv_heads = 2, m.ffn_hidden = 128, m.seq_len = 16, m.vocab = 64;
  s.run.exec.global_batch_size = 2, s.run.exec.micro_batch_size = 2, s.run.exec.precision = Precision::FP32;
  s.steps = 2, s.eval_batches = 1, s.threads = 1, s.threads_given = true;
  s.prediction_cluster = "";
  s.data_path = path;
  s.data = std::make_shared<const data::TokenFile>(path);
  fs::remove_all(dir);  // from here on, only the mapped file is left
  parallel::TrainSettings reopen = s;
  EXPECT_EQ(parallel::run_training(s), 0) << "the run opened the token file again";
  // The control: the same run handed only the path must open it, and fails, so the run above
  // would have failed had it opened the file a second time.
  reopen.data = nullptr;
  bool failed = false;
  try {
    failed = parallel::run_training(reopen) != 0;
  } catch (const std::exception&) {
    failed = true;
  }
  EXPECT_TRUE(failed) << "a run that opens the removed path must fail";
}
