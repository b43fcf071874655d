// Checkpoints: the manifest format, verification that names the damaged file, extension blobs and values,
// pruning, leftovers of crashed saves, and failing writes (disk full, unwritable directory) that leave
// the previous checkpoint intact.
#include "io/checkpoint.h"

#include "backend/backend.h"
#include "io/durable_file.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>

namespace fs = std::filesystem;

namespace gpt::test {
namespace {

struct Fixture {
  explicit Fixture(int channels = 16)
      : backend(make_backend(BackendKind::Cpu, {1})),
        model(tiny_model(16, 2, channels, 2, 16), 2, 8, *backend),
        optimizer(OptimConfig{}, model.parameter_layout(), *backend) {
    model.init_weights(7);
  }
  std::string save(const std::string& run_dir, int64_t step, CheckpointState state = {}) {
    state.step = step;
    state.seed = 7;
    state.loader = {{"epoch", 1}, {"shard_cursor", 2}, {"sample_cursor", 3}};
    // The optimizer's count must match the state's step for the checkpoint to load.
    optimizer.state_from_host(optimizer.state_to_host(), step - state.skipped_steps);
    return save_checkpoint(run_dir, state, model, optimizer, "model:\n  n_layer: 2\n");
  }
  std::unique_ptr<Backend> backend;
  GPT model;
  AdamW optimizer;
};

void flip_byte(const std::string& path, size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x10));
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

TEST(CheckpointManifest, RoundTripsAndChecksItself) {
  Manifest m;
  m.step = 42;
  m.files = {{"model.bin", 1234, 0xdeadbeef}, {"blob.fp8_amax", 0, 0}};
  const std::string text = manifest_to_yaml(m);
  const Manifest back = parse_manifest(text, "m");
  EXPECT_EQ(back.step, 42);
  EXPECT_EQ(back.files, m.files);

  std::string edited = text;
  edited.replace(edited.find("1234"), 4, "1235");
  EXPECT_NE(error_message([&] { parse_manifest(edited, "m"); }).find("CRC-32C of the manifest"), std::string::npos);
  EXPECT_NE(error_message([&] { parse_manifest(text.substr(0, text.size() / 2), "m"); }).find("missing"),
            std::string::npos);
}

// A manifest with a correct self-checksum but hostile content: names that leave the directory, duplicates.
TEST(CheckpointManifest, RejectsUnsafeNames) {
  for (const char* name : {"../model.bin", "/etc/passwd", ".hidden", "a/b", "", "manifest.yaml"}) {
    Manifest m;
    m.files = {{name, 1, 2}};
    EXPECT_NE(error_message([&] { parse_manifest(manifest_to_yaml(m), "m"); }).find("not allowed"), std::string::npos)
        << name;
  }
  Manifest twice;
  twice.files = {{"a", 1, 2}, {"a", 1, 2}};
  EXPECT_NE(error_message([&] { parse_manifest(manifest_to_yaml(twice), "m"); }).find("twice"), std::string::npos);
}

TEST(CheckpointState, RoundTripsWithExtensionValues) {
  CheckpointState s;
  s.step = 9;
  s.seed = 1ull << 63;
  s.skipped_steps = 2;
  s.loader = {{"epoch", 3}};
  s.values = {{"loss_scale", "65536"}, {"note", "a: b # not a comment"}};
  const CheckpointState back = parse_checkpoint_state(checkpoint_state_to_yaml(s), "s");
  EXPECT_EQ(back.step, 9);
  EXPECT_EQ(back.seed, s.seed);
  EXPECT_EQ(back.skipped_steps, 2);
  EXPECT_EQ(back.loader, s.loader);
  EXPECT_EQ(back.values, s.values);
  EXPECT_THROW(parse_checkpoint_state("step: 3\nseed: 1\nskipped_steps: 4\nloader: {}\n", "s"), Error);
  EXPECT_THROW(parse_checkpoint_state("step: x\nseed: 1\nloader: {}\n", "s"), Error);
  EXPECT_THROW(parse_checkpoint_state("[1, 2]", "s"), Error);
}

TEST(Checkpoint, SaveVerifyLoadWithBlobs) {
  TempDir dir;
  Fixture a;
  CheckpointState state;
  state.blobs["zero_shard.rank0"] = std::string("\0\1\2binary", 9);
  state.values["loss_scale"] = "1024";
  state.skipped_steps = 1;
  const std::string ckpt = a.save(dir.file("run"), 5, state);
  EXPECT_EQ(ckpt, checkpoint_dir(dir.file("run"), 5));
  EXPECT_TRUE(verify_checkpoint(ckpt).empty()) << joined(verify_checkpoint(ckpt));
  EXPECT_TRUE(fs::exists(fs::path(ckpt) / "blob.zero_shard.rank0"));

  Fixture b;
  b.model.init_weights(99);
  const CheckpointState loaded = load_checkpoint(ckpt, b.model, b.optimizer);
  EXPECT_EQ(loaded.step, 5);
  EXPECT_EQ(loaded.skipped_steps, 1);
  EXPECT_EQ(loaded.loader.at("sample_cursor"), 3u);
  EXPECT_EQ(loaded.blobs, state.blobs);
  EXPECT_EQ(loaded.values, state.values);
  EXPECT_EQ(b.optimizer.step_count(), 4);
  EXPECT_EQ(b.model.parameters_to_host(), a.model.parameters_to_host());

  state.blobs["../escape"] = "x";
  EXPECT_THROW(a.save(dir.file("run"), 6, state), Error);
}

// Each kind of damage is reported naming the file and what does not match, and loading refuses it.
TEST(Checkpoint, VerifyNamesTheDamagedFile) {
  TempDir dir;
  Fixture f;
  struct Case {
    const char* what;
    std::function<void(const fs::path&)> damage;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"flipped byte", [](const fs::path& d) { flip_byte((d / "model.bin").string(), 2000); },
       "model.bin: CRC-32C"},
      {"truncated", [](const fs::path& d) { fs::resize_file(d / "optimizer.bin", 1000); },
       "optimizer.bin: 1000 bytes, the manifest says"},
      {"deleted", [](const fs::path& d) { fs::remove(d / "state.yaml"); }, "state.yaml: missing"},
      {"manifest edited", [](const fs::path& d) { flip_byte((d / kManifestFile).string(), 200); },
       "CRC-32C of the manifest"},
      {"manifest gone", [](const fs::path& d) { fs::remove(d / kManifestFile); }, "manifest.yaml is missing"},
      {"manifest truncated", [](const fs::path& d) { fs::resize_file(d / kManifestFile, 50); }, "truncated"},
  };
  int64_t step = 1;
  for (const Case& c : cases) {
    const std::string ckpt = f.save(dir.file("run"), step++);
    c.damage(ckpt);
    const std::string problems = joined(verify_checkpoint(ckpt));
    EXPECT_NE(problems.find(c.expect), std::string::npos) << c.what << ": " << problems;
    const std::string message = error_message([&] { load_checkpoint(ckpt, f.model, f.optimizer); });
    EXPECT_NE(message.find("is damaged"), std::string::npos) << c.what << ": " << message;
  }
}

TEST(Checkpoint, PruneKeepsTheNewestAndCrashLeftoversAreIgnoredThenRemoved) {
  TempDir dir;
  Fixture f;
  const std::string run = dir.file("run");
  for (int64_t s = 1; s <= 4; ++s) f.save(run, s);
  prune_checkpoints(run, 2);
  EXPECT_EQ(list_checkpoints(run), (std::vector<std::string>{checkpoint_dir(run, 4), checkpoint_dir(run, 3)}));

  // What a crash mid-save or mid-prune leaves: hidden directories, never a step_N name.
  fs::create_directories(fs::path(run) / "checkpoints" / ".step_00000005.tmp");
  fs::create_directories(fs::path(run) / "checkpoints" / ".step_00000002.deleting");
  EXPECT_EQ(latest_checkpoint(run), checkpoint_dir(run, 4));
  f.save(run, 5);
  EXPECT_FALSE(fs::exists(fs::path(run) / "checkpoints" / ".step_00000002.deleting"));
  EXPECT_EQ(list_checkpoints(run).size(), 3u);

  // A step written twice (a run that went back to an older checkpoint) replaces the old directory whole.
  f.model.init_weights(3);
  f.save(run, 4);
  Fixture g;
  load_checkpoint(checkpoint_dir(run, 4), g.model, g.optimizer);
  EXPECT_EQ(g.model.parameters_to_host(), f.model.parameters_to_host());
}

// After a failed save: the error names the path, no temporary directory is left and the previous
// checkpoint still verifies.
void expect_failed_save_left_previous_intact(const std::string& run, const std::string& message,
                                             const std::string& expect_in_message) {
  EXPECT_NE(message.find(expect_in_message), std::string::npos) << message;
  EXPECT_NE(message.find("step_00000001"), std::string::npos) << "names the intact checkpoint: " << message;
  EXPECT_EQ(list_checkpoints(run), std::vector<std::string>{checkpoint_dir(run, 1)});
  EXPECT_TRUE(verify_checkpoint(checkpoint_dir(run, 1)).empty());
  EXPECT_FALSE(fs::exists(fs::path(run) / "checkpoints" / ".step_00000002.tmp"));
}

// A full disk, simulated with the file-size limit (ulimit -f), which the kernel enforces for root too.
TEST(CheckpointWriteFailure, FileSizeLimitLikeDiskFull) {
  TempDir dir;
  Fixture f(32);
  const std::string run = dir.file("run");
  f.save(run, 1);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 16 * 1024;  // model.bin is ~100 KB
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of killing us
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string message = error_message([&] { f.save(run, 2); });
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  expect_failed_save_left_previous_intact(run, message, ".step_00000002.tmp/model.bin");
}

TEST(CheckpointWriteFailure, RealFullFilesystem) {
  TempDir dir;
  Fixture f(32);
  const fs::path mnt = dir.path() / "small_fs";
  fs::create_directories(mnt);
  uint64_t one_checkpoint = 0;
  for (const auto& e : fs::recursive_directory_iterator(f.save(dir.file("sizing"), 1)))
    one_checkpoint += e.is_regular_file() ? e.file_size() : 0;
  // Room for one checkpoint and the model file of the next, not for its optimizer state.
  const std::string options = fmt::format("size={}k", one_checkpoint * 3 / 2 / 1024);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, options.c_str()) != 0)
    GTEST_SKIP() << "cannot mount a small tmpfs here (" << std::strerror(errno)
                 << "); CheckpointWriteFailure.FileSizeLimitLikeDiskFull covers the same path";
  struct Unmount {
    fs::path p;
    ~Unmount() { ::umount2(p.c_str(), MNT_DETACH); }
  } unmount{mnt};
  const std::string run = (mnt / "run").string();
  f.save(run, 1);
  const std::string message = error_message([&] { f.save(run, 2); });
  expect_failed_save_left_previous_intact(run, message, "No space left on device");
  EXPECT_NE(message.find(".step_00000002.tmp/"), std::string::npos) << message;
}

TEST(CheckpointWriteFailure, ParentIsARegularFile) {
  TempDir dir;
  Fixture f;
  write_bytes(dir.file("not_a_dir"), "x", 1);
  const std::string message = error_message([&] { f.save(dir.file("not_a_dir"), 1); });
  EXPECT_NE(message.find(dir.file("not_a_dir") + "/checkpoints"), std::string::npos) << message;
  EXPECT_NE(message.find("there is no earlier checkpoint"), std::string::npos) << message;
}

TEST(CheckpointWriteFailure, ReadOnlyDirectory) {
  TempDir dir;
  Fixture f;
  const std::string run = dir.file("run");
  f.save(run, 1);
  const fs::path root = fs::path(run) / "checkpoints";
  ::chmod(root.c_str(), 0555);
  const bool enforced = ::access(root.c_str(), W_OK) != 0;
  if (!enforced) {
    ::chmod(root.c_str(), 0755);
    GTEST_SKIP() << "permissions are not enforced for this user (root); the other CheckpointWriteFailure tests "
                    "cover failing writes";
  }
  const std::string message = error_message([&] { f.save(run, 2); });
  ::chmod(root.c_str(), 0755);
  EXPECT_NE(message.find(".step_00000002.tmp"), std::string::npos) << message;
  EXPECT_TRUE(verify_checkpoint(checkpoint_dir(run, 1)).empty());
}

}  // namespace
}  // namespace gpt::test
