#include "io/optimizer_shards.h"

#include "io/checkpoint.h"
#include "io/durable_file.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
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
  std::streamoff m_pos, v_pos;
};

struct File {
  fs::path path;
  uint64_t steps = 0;
  std::vector<Source> sources;
};

Header read_header(std::ifstream& in, const fs::path& path) {
  Header header{};
  in.read(reinterpret_cast<char*>(header.data()), sizeof(header));
  GPT_CHECK(in.gcount() == sizeof(header), "'{}' is shorter than its {}-byte header", path.string(), sizeof(header));
  return header;
}

// optimizer.bin (io/checkpoint.cpp): its header, then m and v of every parameter.
File read_whole_index(const fs::path& path, int64_t num_parameters) {
  std::ifstream in(path, std::ios::binary);
  GPT_CHECK(in.good(), "cannot open optimizer state '{}': {}", path.string(), std::strerror(errno));
  std::string header(kOptimizerHeaderBytes, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header.size()));
  header.resize(static_cast<size_t>(in.gcount()));
  const OptimizerFileHeader h = parse_optimizer_header(header, path.string());
  const auto n = static_cast<int64_t>(h.num_elements);
  GPT_CHECK(n == num_parameters, "'{}' holds state for {} parameters, the model has {}", path.string(), n,
            num_parameters);
  const auto data = static_cast<std::streamoff>(kOptimizerHeaderBytes);
  return File{path, h.step_count, {Source{0, n, data, data + static_cast<std::streamoff>(n * 4)}}};
}

File read_shard_index(const fs::path& path, int64_t num_parameters, int& world_size) {
  std::ifstream in(path, std::ios::binary);
  GPT_CHECK(in.good(), "cannot open optimizer shard '{}': {}", path.string(), std::strerror(errno));
  const Header h = read_header(in, path);
  GPT_CHECK(h[0] == kShardMagic && h[1] == kShardVersion, "'{}' has magic {} version {}, expected {} version {}",
            path.string(), h[0], h[1], kShardMagic, kShardVersion);
  GPT_CHECK(static_cast<int64_t>(join(h[5], h[6])) == num_parameters,
            "'{}' is a shard of state for {} parameters, the model has {}", path.string(), join(h[5], h[6]),
            num_parameters);
  world_size = h[3];
  const int32_t num_ranges = h[4];
  GPT_CHECK(num_ranges >= 0, "'{}' has {} ranges", path.string(), num_ranges);
  std::vector<int64_t> table(2 * static_cast<size_t>(num_ranges));
  in.read(reinterpret_cast<char*>(table.data()), static_cast<std::streamsize>(table.size() * sizeof(int64_t)));
  GPT_CHECK(static_cast<size_t>(in.gcount()) == table.size() * sizeof(int64_t), "'{}' is truncated in its range table",
            path.string());
  int64_t total = 0;
  for (int32_t i = 0; i < num_ranges; ++i) total += table[2 * i + 1];
  File file{path, join(h[7], h[8]), {}};
  std::streamoff m = static_cast<std::streamoff>(sizeof(Header) + table.size() * sizeof(int64_t));
  std::streamoff v = m + static_cast<std::streamoff>(total * 4);
  for (int32_t i = 0; i < num_ranges; ++i) {
    const int64_t first = table[2 * i], count = table[2 * i + 1];
    GPT_CHECK(first >= 0 && count >= 0 && first + count <= num_parameters, "'{}': range [{}, {}) outside the {} parameters",
              path.string(), first, first + count, num_parameters);
    file.sources.push_back(Source{first, count, m, v});
    m += static_cast<std::streamoff>(count * 4);
    v += static_cast<std::streamoff>(count * 4);
  }
  return file;
}

void read_floats(std::ifstream& in, const fs::path& path, std::streamoff pos, float* out, int64_t count) {
  in.seekg(pos);
  in.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(count * 4));
  GPT_CHECK(in.gcount() == static_cast<std::streamsize>(count * 4), "'{}' is truncated: {} floats at byte {} are missing",
            path.string(), count, static_cast<int64_t>(pos));
}

}  // namespace

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
      files.push_back(read_shard_index(p, num_parameters, world));
      GPT_CHECK(world == static_cast<int>(paths.size()),
                "'{}' is one of {} optimizer shards, but '{}' holds {}: the checkpoint is incomplete or mixes runs",
                p.string(), world, dir, paths.size());
      GPT_CHECK(files.back().steps == files.front().steps, "'{}' is at step {}, '{}' at step {}", p.string(),
                files.back().steps, files.front().path.string(), files.front().steps);
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
      std::ifstream in(file.path, std::ios::binary);
      for (const Source& s : file.sources) {
        const int64_t begin = std::max(first, s.first), end = std::min(first + r.count, s.first + s.count);
        if (begin >= end) continue;
        const int64_t count = end - begin, skip = (begin - s.first) * 4;
        read_floats(in, file.path, s.m_pos + skip, state.data() + dest + (begin - first), count);
        read_floats(in, file.path, s.v_pos + skip, state.data() + n + dest + (begin - first), count);
        filled += count;
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
