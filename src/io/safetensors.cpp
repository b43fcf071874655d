#include "io/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <utility>

#include "core/error.h"
#include "io/durable_file.h"
#include "precision/float_formats.h"

namespace gpt {

static_assert(std::endian::native == std::endian::little, "safetensors data are little-endian; add byte swapping");

namespace {

// Every dtype the format defines, so any valid file parses; read_f32 reads the floating ones.
size_t dtype_bytes(std::string_view dtype) {
  static const std::map<std::string_view, size_t> kSizes = {
      {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4}, {"F64", 8}, {"I64", 8}, {"U64", 8}};
  const auto it = kSizes.find(dtype);
  return it == kSizes.end() ? 0 : it->second;
}

uint64_t read_u64_le(std::string_view bytes) {
  uint64_t v = 0;
  std::memcpy(&v, bytes.data(), sizeof v);
  return v;
}

SafetensorsEntry parse_entry(const std::string& file, const std::string& name, const nlohmann::json& j,
                             uint64_t data_size, uint64_t data_start) {
  GPT_CHECK(j.is_object(), "{}: tensor '{}': expected an object with dtype, shape and data_offsets, got {}", file,
            name, j.type_name());
  for (const auto& [key, value] : j.items())
    GPT_CHECK(key == "dtype" || key == "shape" || key == "data_offsets", "{}: tensor '{}': unknown field '{}'", file,
              name, key);
  SafetensorsEntry e;
  e.name = name;
  GPT_CHECK(j.contains("dtype") && j["dtype"].is_string(), "{}: tensor '{}': dtype missing or not a string", file,
            name);
  e.dtype = j["dtype"].get<std::string>();
  e.dtype_bytes = dtype_bytes(e.dtype);
  GPT_CHECK(e.dtype_bytes > 0, "{}: tensor '{}': unknown dtype '{}'", file, name, e.dtype);
  GPT_CHECK(j.contains("shape") && j["shape"].is_array(), "{}: tensor '{}': shape missing or not an array", file,
            name);
  uint64_t numel = 1;
  bool overflow = false;
  for (const auto& d : j["shape"]) {
    GPT_CHECK(d.is_number_unsigned(), "{}: tensor '{}': shape {} holds something other than a non-negative integer",
              file, name, j["shape"].dump());
    const auto n = d.get<uint64_t>();
    GPT_CHECK(n <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "{}: tensor '{}': dimension {} too large",
              file, name, n);
    e.shape.push_back(static_cast<int64_t>(n));
    if (n != 0 && numel > std::numeric_limits<uint64_t>::max() / n) overflow = true;
    numel *= n;
  }
  overflow = overflow || (numel > std::numeric_limits<uint64_t>::max() / e.dtype_bytes);
  GPT_CHECK(j.contains("data_offsets") && j["data_offsets"].is_array() && j["data_offsets"].size() == 2 &&
                j["data_offsets"][0].is_number_unsigned() && j["data_offsets"][1].is_number_unsigned(),
            "{}: tensor '{}': data_offsets must be [begin, end], two non-negative integers", file, name);
  e.begin = j["data_offsets"][0].get<uint64_t>();
  e.end = j["data_offsets"][1].get<uint64_t>();
  GPT_CHECK(e.begin <= e.end && e.end <= data_size,
            "{}: tensor '{}': data_offsets [{}, {}] are not inside the data section of {} bytes (file bytes {} to {})",
            file, name, e.begin, e.end, data_size, data_start, data_start + data_size);
  GPT_CHECK(!overflow && numel * e.dtype_bytes == e.end - e.begin,
            "{}: tensor '{}': shape {} of {} needs {} bytes, but data_offsets [{}, {}] hold {}", file, name,
            j["shape"].dump(), e.dtype, overflow ? std::string("more than 2^64") : std::to_string(numel * e.dtype_bytes),
            e.begin, e.end, e.end - e.begin);
  return e;
}

}  // namespace

uint64_t SafetensorsEntry::numel() const {
  uint64_t n = 1;
  for (const int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

const SafetensorsEntry* SafetensorsHeader::find(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

SafetensorsHeader parse_safetensors_header(std::string_view prefix, uint64_t file_size, const std::string& file) {
  GPT_CHECK(file_size >= 8 && prefix.size() >= 8, "{}: {} bytes, too short for a safetensors file (8-byte header "
            "length, then the header)", file, file_size);
  const uint64_t n = read_u64_le(prefix);
  GPT_CHECK(n <= kSafetensorsMaxHeaderBytes, "{}: header length {} (bytes 0-7) exceeds the limit of {} bytes", file, n,
            kSafetensorsMaxHeaderBytes);
  GPT_CHECK(8 + n <= file_size, "{}: header length {} (bytes 0-7) runs past the end of the {}-byte file", file, n,
            file_size);
  GPT_CHECK(prefix.size() >= 8 + n, "{}: only {} of the {} header bytes given", file, prefix.size() - 8, n);
  const std::string_view text = prefix.substr(8, n);
  GPT_CHECK(!text.empty() && text[0] == '{', "{}: the header (byte offset 8) does not start with '{{'", file);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    GPT_FAIL("{}: the header is not valid JSON near file byte offset {}: {}", file, 8 + (e.byte > 0 ? e.byte - 1 : 0),
             e.what());
  } catch (const nlohmann::json::exception& e) {
    // What parses but cannot be held, e.g. a number beyond a double's range (out_of_range.406).
    GPT_FAIL("{}: the header is not valid JSON: {}", file, e.what());
  }
  GPT_CHECK(j.is_object(), "{}: the header is not a JSON object", file);
  SafetensorsHeader h;
  h.data_start = 8 + n;
  const uint64_t data_size = file_size - h.data_start;
  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      GPT_CHECK(value.is_object(), "{}: __metadata__ is not an object", file);
      for (const auto& [mk, mv] : value.items()) {
        GPT_CHECK(mv.is_string(), "{}: __metadata__ entry '{}' is not a string", file, mk);
        h.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    h.tensors.push_back(parse_entry(file, key, value, data_size, h.data_start));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    const SafetensorsEntry& t = h.tensors[i];
    GPT_CHECK(t.begin >= covered, "{}: tensor '{}' (data bytes {} to {}) overlaps tensor '{}' (which ends at {})", file,
              t.name, t.begin, t.end, h.tensors[i - 1].name, covered);
    GPT_CHECK(t.begin == covered, "{}: data bytes {} to {} (file bytes {} to {}) belong to no tensor", file, covered,
              t.begin, h.data_start + covered, h.data_start + t.begin);
    covered = t.end;
  }
  GPT_CHECK(covered == data_size, "{}: data bytes {} to {} (file bytes {} to {}) belong to no tensor", file, covered,
            data_size, h.data_start + covered, file_size);
  return h;
}

SafetensorsReader::SafetensorsReader(const std::string& path)
    : SafetensorsReader(BinaryFile::open(path, "safetensors file")) {}

SafetensorsReader::SafetensorsReader(BinaryFile file) : file_(std::move(file)) {
  const uint64_t size = file_.size();
  std::string prefix(std::min<uint64_t>(size, 8), '\0');
  file_.read_into(0, std::span(prefix));
  if (prefix.size() == 8) {
    // Only a header length the parser will accept is read, so a hostile one allocates nothing.
    const uint64_t n = read_u64_le(prefix);
    if (n <= kSafetensorsMaxHeaderBytes && 8 + n <= size) {
      prefix.resize(8 + n);
      file_.read_into(8, std::span(prefix).subspan(8));
    }
  }
  header_ = parse_safetensors_header(prefix, size, path());
}

void SafetensorsReader::read_f32(const SafetensorsEntry& e, std::span<float> out) const {
  GPT_CHECK(e.dtype == "F32" || e.dtype == "F16" || e.dtype == "BF16",
            "{}: tensor '{}' is {}; only F32, F16 and BF16 tensors can be read as model weights", path(), e.name,
            e.dtype);
  GPT_CHECK(out.size() == e.numel(), "{}: tensor '{}' has {} elements, {} expected", path(), e.name, e.numel(),
            out.size());
  const uint64_t offset = header_.data_start + e.begin;
  try {
    if (e.dtype == "F32") {
      file_.read_into(offset, out);
      return;
    }
    std::vector<uint16_t> raw(out.size());
    file_.read_into(offset, std::span(raw));
    const bool bf16 = e.dtype == "BF16";
    for (size_t i = 0; i < raw.size(); ++i) out[i] = bf16 ? bf16_to_f32(raw[i]) : f16_to_f32(raw[i]);
  } catch (const Error& err) {
    // The header was checked against the file's size, so only a file that changed since gets here.
    GPT_FAIL("{}: tensor '{}' (file bytes {} to {}): {}", path(), e.name, offset, header_.data_start + e.end,
             err.what());
  }
}

void write_safetensors(const std::string& path, std::span<const SafetensorsOutput> tensors,
                       const std::map<std::string, std::string>& metadata, const std::string& dtype) {
  GPT_CHECK(dtype == "F32" || dtype == "BF16" || dtype == "F16", "safetensors: cannot write dtype '{}' (F32, BF16, F16)",
            dtype);
  const size_t width = dtype == "F32" ? 4 : 2;
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsOutput& t : tensors) {
    uint64_t numel = 1;
    for (const int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
    GPT_CHECK(numel == t.data.size(), "safetensors: tensor '{}' has shape of {} elements but {} values", t.name, numel,
              t.data.size());
    header[t.name] = {{"dtype", dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + numel * width}}};
    offset += numel * width;
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  const uint64_t n = text.size();
  std::vector<std::byte> data(offset);
  size_t at = 0;
  for (const SafetensorsOutput& t : tensors) {
    if (width == 4) {
      std::memcpy(data.data() + at, t.data.data(), t.data.size_bytes());
    } else {
      for (size_t i = 0; i < t.data.size(); ++i) {
        const uint16_t c = dtype == "BF16" ? f32_to_bf16(t.data[i]) : f32_to_f16(t.data[i]);
        std::memcpy(data.data() + at + 2 * i, &c, 2);
      }
    }
    at += t.data.size() * width;
  }
  replace_file_durably(path, {std::as_bytes(std::span(&n, 1)), std::as_bytes(std::span(text.data(), text.size())),
                              std::span<const std::byte>(data)});
}

}  // namespace gpt
