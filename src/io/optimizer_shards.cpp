#include "io/optimizer_shards.h"

#include "io/binary_file.h"
#include "io/checkpoint.h"
#include "io/durable_file.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <regex>

namespace fs = std::filesystem;

namespace gpt {
namespace {

constexpr int32_t kShardMagic = 20261130;
constexpr int32_t kShardVersion = 1;
constexpr int kHeaderInts = 256;

using Header = std::array<int32_t, kHeaderInts>;

uint64_t join(int32_t low, int32_t high) {
  return static_cast<uint32_t>(low) | (static_cast<uint64_t>(static_cast<uint32_t>(high)) << 32);
}
void split(uint64_t value, int32_t& low, int32_t& high) {
  low = static_cast<int32_t>(value & 0xffffffffu);
  high = static_cast<int32_t>(value >> 32);
}

// Index of each parameter tensor's first element in llm.c order.
std::vector<int64_t> tensor_starts(const ParameterLayout& layout) {
  std::vector<int64_t> starts;
  int64_t next = 0;
  for (const ArenaBuffer& b : layout.arena_layout().buffers()) {
    starts.push_back(next);
    next += static_cast<int64_t>(b.bytes / dtype_size(b.dtype));
  }
  return starts;
}

// A run of parameters whose moments a file holds: m of [first, first + count) at m_pos, v at v_pos.
struct Source {
  int64_t first, count;
  uint64_t m_pos, v_pos;
};

struct File {
  BinaryFile file;
  uint64_t steps = 0;
  std::vector<Source> sources;
};

// optimizer.bin (io/checkpoint.cpp): its header, then m and v of every parameter.
File read_whole_index(const fs::path& path, int64_t num_parameters) {
  BinaryFile file = BinaryFile::open(path.string(), "optimizer state");
  const OptimizerFileHeader h = read_optimizer_header(file);
  const auto n = static_cast<int64_t>(h.num_elements);
  GPT_CHECK(n == num_parameters, "{} holds state for {} parameters, the model has {}", file.label(), n,
            num_parameters);
  const uint64_t data = kOptimizerHeaderBytes;
  return File{std::move(file), h.step_count, {Source{0, n, data, data + h.num_elements * 4}}};
}

File read_shard_index(BinaryFile file, int64_t num_parameters, int& world_size) {
  GPT_CHECK(file.size() >= sizeof(Header), "{} is {} bytes, shorter than its {}-byte header", file.label(),
            file.size(), sizeof(Header));
  Header h{};
  file.read_into(0, std::span(h));
  GPT_CHECK(h[0] == kShardMagic && h[1] == kShardVersion, "{} has magic {} version {}, expected {} version {}",
            file.label(), h[0], h[1], kShardMagic, kShardVersion);
  GPT_CHECK(join(h[5], h[6]) == static_cast<uint64_t>(num_parameters),
            "{} is a shard of state for {} parameters, the model has {}", file.label(), join(h[5], h[6]),
            num_parameters);
  world_size = h[3];
  const int32_t num_ranges = h[4];
  GPT_CHECK(num_ranges >= 0, "{} has {} ranges", file.label(), num_ranges);
  const auto ranges = static_cast<uint64_t>(num_ranges);
  const std::string table_claim =
      fmt::format("the {}-byte header and a table of {} ranges of 16 bytes", sizeof(Header), ranges);
  file.require_at_least(ClaimedSize().add({sizeof(Header)}).add({ranges, 16}).bytes(), table_claim);
  std::vector<int64_t> table(2 * ranges);
  file.read_into(sizeof(Header), std::span(table));

  ClaimedSize claim;
  claim.add({sizeof(Header)}).add({ranges, 16});
  uint64_t total = 0;
  for (uint64_t i = 0; i < ranges; ++i) {
    const int64_t first = table[2 * i], count = table[2 * i + 1];
    GPT_CHECK(first >= 0 && count >= 0 && first <= num_parameters && count <= num_parameters - first,
              "{}: range {} (table entry at byte offset {}) is [{}, {} + {}), outside the {} parameters",
              file.label(), i, sizeof(Header) + 16 * i, first, first, count, num_parameters);
    claim.add({static_cast<uint64_t>(count), 2, sizeof(float)});
    total += static_cast<uint64_t>(count);  // ≤ ranges x num_parameters: the claim above overflows first
  }
  file.require_size(claim.bytes(), fmt::format("{} and m and v (fp32) of their {} parameters", table_claim, total));

  File out{std::move(file), join(h[7], h[8]), {}};
  uint64_t m = sizeof(Header) + ranges * 16;
  uint64_t v = m + total * sizeof(float);
  for (uint64_t i = 0; i < ranges; ++i) {
    const int64_t first = table[2 * i], count = table[2 * i + 1];
    out.sources.push_back(Source{first, count, m, v});
    m += static_cast<uint64_t>(count) * sizeof(float);
    v += static_cast<uint64_t>(count) * sizeof(float);
  }
  return out;
}

}  // namespace

int check_optimizer_shard(BinaryFile file, int64_t num_parameters) {
  int world_size = 0;
  read_shard_index(std::move(file), num_parameters, world_size);
  return world_size;
}

std::string optimizer_shard_name(int rank, int world_size) {
  return fmt::format("optimizer.rank{:05d}-of-{:05d}.bin", rank, world_size);
}

bool is_optimizer_shard_name(std::string_view file_name) {
  static const std::regex kShard("optimizer\\.rank[0-9]+-of-[0-9]+\\.bin");
  return std::regex_match(file_name.begin(), file_name.end(), kShard);
}

std::string write_optimizer_shard(const std::string& dir, AdamW& optimizer, const ParameterLayout& layout, int rank,
                                  int world_size) {
  const std::vector<int64_t> starts = tensor_starts(layout);
  const std::vector<float> state = optimizer.state_to_host();
  Header header{};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = rank;
  header[3] = world_size;
  header[4] = static_cast<int32_t>(optimizer.ranges().size());
  split(static_cast<uint64_t>(layout.num_parameters()), header[5], header[6]);
  split(static_cast<uint64_t>(optimizer.step_count()), header[7], header[8]);
  std::vector<int64_t> table;
  for (const ParamRange& r : optimizer.ranges()) {
    table.push_back(starts[r.tensor] + r.offset);
    table.push_back(r.count);
  }
  std::string bytes(sizeof(header) + table.size() * sizeof(int64_t) + state.size() * sizeof(float), '\0');
  char* out = bytes.data();
  std::memcpy(out, header.data(), sizeof(header));
  std::memcpy(out + sizeof(header), table.data(), table.size() * sizeof(int64_t));
  std::memcpy(out + sizeof(header) + table.size() * sizeof(int64_t), state.data(), state.size() * sizeof(float));
  const std::string name = optimizer_shard_name(rank, world_size);
  write_file_durably((fs::path(dir) / name).string(), bytes);
  return name;
}

int64_t read_optimizer_state(const std::string& dir, AdamW& optimizer, const ParameterLayout& layout) {
  const int64_t num_parameters = layout.num_parameters();
  std::vector<File> files;
  if (fs::exists(fs::path(dir) / "optimizer.bin")) {
    files.push_back(read_whole_index(fs::path(dir) / "optimizer.bin", num_parameters));
  } else {
    std::vector<fs::path> paths;
    if (fs::is_directory(dir))
      for (const auto& entry : fs::directory_iterator(dir))
        if (is_optimizer_shard_name(entry.path().filename().string())) paths.push_back(entry.path());
    std::sort(paths.begin(), paths.end());
    GPT_CHECK(!paths.empty(), "'{}' holds no optimizer state: neither optimizer.bin nor optimizer.rank*-of-*.bin", dir);
    for (const fs::path& p : paths) {
      int world = 0;
      files.push_back(read_shard_index(BinaryFile::open(p.string(), "optimizer shard"), num_parameters, world));
      GPT_CHECK(world == static_cast<int>(paths.size()),
                "'{}' is one of {} optimizer shards, but '{}' holds {}: the checkpoint is incomplete or mixes runs",
                p.string(), world, dir, paths.size());
      GPT_CHECK(files.back().steps == files.front().steps, "'{}' is at step {}, '{}' at step {}", p.string(),
                files.back().steps, files.front().file.path(), files.front().steps);
    }
  }

  // The optimizer's ranges in llm.c indices, with where each lands in the host copy of m (and of v).
  const std::vector<int64_t> starts = tensor_starts(layout);
  const int64_t n = optimizer.num_elements();
  std::vector<float> state(2 * static_cast<size_t>(n));
  int64_t filled = 0, dest = 0;
  for (const ParamRange& r : optimizer.ranges()) {
    const int64_t first = starts[r.tensor] + r.offset;
    for (const File& file : files) {
      for (const Source& s : file.sources) {
        const int64_t begin = std::max(first, s.first), end = std::min(first + r.count, s.first + s.count);
        if (begin >= end) continue;
        const auto count = static_cast<size_t>(end - begin);
        const auto skip = static_cast<uint64_t>(begin - s.first) * sizeof(float);
        file.file.read_into(s.m_pos + skip, std::span(state.data() + dest + (begin - first), count));
        file.file.read_into(s.v_pos + skip, std::span(state.data() + n + dest + (begin - first), count));
        filled += static_cast<int64_t>(count);
      }
    }
    dest += r.count;
  }
  GPT_CHECK(filled == n, "'{}': the optimizer files cover {} of the {} moments this rank needs (shards missing or "
            "overlapping)", dir, filled, n);
  optimizer.state_from_host(state, static_cast<int64_t>(files.front().steps));
  return static_cast<int64_t>(files.front().steps);
}

}  // namespace gpt
