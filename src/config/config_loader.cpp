// YAML -> Config: parse, check every key against the lists in Config::visit, apply --set overrides,
// convert each value to its member's type, fill the model keys not written from model.init_from's
// checkpoint, then validate. Every error names where the value came from ("config.yaml:12" or "--set"),
// the key, what is wrong and what would be right.
#include "config/config_loader.h"

#include "config/model_from_checkpoint.h"
#include "config/validate.h"
#include "core/error.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string_view>
#include <type_traits>

namespace gpt {

namespace {

using config_detail::did_you_mean;
using config_detail::KeyOrigins;

// ---- the key lists, from Config::visit -------------------------------------------------------

class KeyLister {
 public:
  template <class S>
  void section(std::string_view name, S& s) {
    prefix_ = std::string(name);
    sections.push_back(prefix_);
    s.visit(*this);
  }
  template <class T>
  void field(std::string_view key, T&, std::string_view) { keys.push_back(prefix_ + "." + std::string(key)); }
  void choice(std::string_view key, std::string& m, const std::vector<std::string>&, std::string_view doc) {
    field(key, m, doc);
  }
  void subset(std::string_view key, std::vector<std::string>& m, const std::vector<std::string>&, std::string_view doc) {
    field(key, m, doc);
  }

  std::vector<std::string> sections;
  std::vector<std::string> keys;  // "section.key"

 private:
  std::string prefix_;
};

const KeyLister& known_keys() {
  static const KeyLister lister = [] {
    KeyLister l;
    Config c;
    c.visit(l);
    return l;
  }();
  return lister;
}

bool is_known_key(const std::string& name) {
  const auto& keys = known_keys().keys;
  return std::find(keys.begin(), keys.end(), name) != keys.end();
}

// The hint for an unknown "section.key": a near spelling, or the same key name in another section.
std::string key_hint(const std::string& name) {
  std::string hint = did_you_mean(name, known_keys().keys);
  if (!hint.empty()) return hint;
  const std::string_view bare = std::string_view(name).substr(name.find('.') + 1);
  for (const auto& k : known_keys().keys)
    if (std::string_view(k).substr(k.find('.') + 1) == bare) return fmt::format(" (did you mean '{}'?)", k);
  return "";
}

// ---- scalar text <-> typed values ------------------------------------------------------------

std::string describe(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  std::string s = node.Scalar();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return fmt::format("'{}'", s);
}

struct Entry {
  YAML::Node value;
  std::string where;  // "config.yaml:12" or "--set"
};

template <class T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, bool>) return "true or false";
  else if constexpr (std::is_unsigned_v<T>) return "a non-negative integer";
  else if constexpr (std::is_integral_v<T>) return "an integer";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else if constexpr (std::is_same_v<T, std::string>) return "a string";
  else return "a list of strings, e.g. [a, b]";
}

[[noreturn]] void bad_type(const std::string& where, const std::string& name, const char* expected, const YAML::Node& n) {
  GPT_FAIL("{}: {}: expected {}, got {}", where, name, expected, describe(n));
}

template <class T>
void convert(const Entry& e, const std::string& name, T& out) {
  const YAML::Node& n = e.value;
  if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    if (n.IsNull()) { out.clear(); return; }
    if (!n.IsSequence()) bad_type(e.where, name, type_name<T>(), n);
    std::vector<std::string> items;
    for (const auto& item : n) {
      if (!item.IsScalar()) bad_type(e.where, name, "a list of strings; an entry is", item);
      items.push_back(item.Scalar());
    }
    out = std::move(items);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (n.IsNull()) { out.clear(); return; }
    if (!n.IsScalar()) bad_type(e.where, name, type_name<T>(), n);
    out = n.Scalar();
  } else {
    if (!n.IsScalar()) bad_type(e.where, name, type_name<T>(), n);
    const std::string& s = n.Scalar();
    if constexpr (std::is_same_v<T, bool>) {
      if (s == "true") out = true;
      else if (s == "false") out = false;
      else bad_type(e.where, name, type_name<T>(), n);
    } else {
      std::string_view text = s;
      if (!text.empty() && text[0] == '+') text.remove_prefix(1);
      if constexpr (std::is_unsigned_v<T>) {
        if (!text.empty() && text[0] == '-') bad_type(e.where, name, type_name<T>(), n);
      }
      T value{};
      auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      bool whole = !text.empty() && ptr == text.data() + text.size();
      if (ec == std::errc::result_out_of_range || (whole && ec == std::errc() && !std::isfinite(static_cast<double>(value)))) {
        if constexpr (std::is_integral_v<T>)
          GPT_FAIL("{}: {}: {} is out of range; expected an integer from {} to {}", e.where, name, s,
                   std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
        else
          GPT_FAIL("{}: {}: {} is out of range; expected a finite number", e.where, name, s);
      }
      if (ec != std::errc() || !whole) bad_type(e.where, name, type_name<T>(), n);
      out = value;
    }
  }
}

// ---- YAML -> entries -------------------------------------------------------------------------

std::string where_of(const std::string& source, const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0) return source;
  return fmt::format("{}:{}", source, mark.line + 1);
}

// Whether some known key starts with "prefix.": a group of keys such as precision.fp8.*.
bool is_known_group(const std::string& prefix) {
  for (const std::string& k : known_keys().keys)
    if (k.size() > prefix.size() && k.compare(0, prefix.size(), prefix) == 0 && k[prefix.size()] == '.') return true;
  return false;
}

// The keys of the mapping `body` under "prefix.", a nested mapping of a group (fp8: backward: e5m2) read
// as its dotted keys (fp8.backward: e5m2, which is accepted too).
void collect_keys(const YAML::Node& body, const std::string& prefix, const std::string& source,
                  std::map<std::string, Entry>& entries) {
  for (const auto& kv : body) {
    std::string key_where = where_of(source, kv.first.Mark());
    if (!kv.first.IsScalar()) GPT_FAIL("{}: a key in '{}' is {}; expected a key name", key_where, prefix, describe(kv.first));
    std::string full = prefix + "." + kv.first.Scalar();
    if (!is_known_key(full) && kv.second.IsMap() && is_known_group(full)) {
      collect_keys(kv.second, full, source, entries);
      continue;
    }
    if (!is_known_key(full)) GPT_FAIL("{}: unknown key '{}'{}", key_where, full, key_hint(full));
    auto [it, inserted] = entries.emplace(full, Entry{kv.second, key_where});
    if (!inserted)
      GPT_FAIL("{}: key '{}' appears twice (first at {}); keep one", key_where, full, it->second.where);
  }
}

// Flattens the document into "section.key" -> value, rejecting unknown or repeated sections and keys.
std::map<std::string, Entry> collect_entries(const YAML::Node& root, const std::string& source) {
  std::map<std::string, Entry> entries;
  if (!root.IsDefined() || root.IsNull()) return entries;
  if (!root.IsMap())
    GPT_FAIL("{}: the top level is {}; it must be a mapping of sections ({}:, ...)", where_of(source, root.Mark()),
             describe(root), fmt::join(known_keys().sections, ":, "));
  std::map<std::string, int> section_lines;
  for (const auto& sec : root) {
    std::string where = where_of(source, sec.first.Mark());
    if (!sec.first.IsScalar()) GPT_FAIL("{}: a section name is {}; expected a name such as model", where, describe(sec.first));
    const std::string& name = sec.first.Scalar();
    const auto& sections = known_keys().sections;
    if (std::find(sections.begin(), sections.end(), name) == sections.end())
      GPT_FAIL("{}: unknown section '{}'{}; the sections are: {}", where, name, did_you_mean(name, sections),
               fmt::join(sections, ", "));
    if (!section_lines.emplace(name, sec.first.Mark().line + 1).second)
      GPT_FAIL("{}: section '{}' appears twice (first on line {}); merge its keys into one section", where, name,
               section_lines[name]);
    const YAML::Node& body = sec.second;
    if (body.IsNull()) continue;
    if (!body.IsMap())
      GPT_FAIL("{}: section '{}' is {}; it must be a mapping of keys (e.g. '{}:' then indented 'key: value' lines)",
               where, name, describe(body), name);
    collect_keys(body, name, source, entries);
  }
  return entries;
}

// "a.b=value": the value is read as YAML (so lists like [bias] work); text that is not valid YAML
// on its own, such as a glob starting with '*', is taken as a plain string.
void apply_override(const std::string& text, std::map<std::string, Entry>& entries) {
  size_t eq = text.find('=');
  if (eq == std::string::npos)
    GPT_FAIL("--set: '{}' has no '='; expected section.key=value, e.g. --set train.steps=100", text);
  std::string key = text.substr(0, eq);
  std::string value = text.substr(eq + 1);
  auto trim = [](std::string s) {
    size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  key = trim(key);
  if (!is_known_key(key)) GPT_FAIL("--set: unknown key '{}'{}", key, key_hint(key));
  YAML::Node node;
  std::string t = trim(value);
  bool looks_structured = !t.empty() && (t[0] == '[' || t[0] == '{' || t[0] == '"' || t[0] == '\'');
  try {
    node = YAML::Load(value);
    // A map ("a: b") or a comment ("#x") is text the user meant literally; "~" and "null" stay null.
    bool literal_null = t.empty() || t == "~" || t == "null" || t == "Null" || t == "NULL";
    if (node.IsMap() || (node.IsNull() && !literal_null)) node = YAML::Node(t);
  } catch (const YAML::Exception& e) {
    if (looks_structured) GPT_FAIL("--set: {}: '{}' is not valid YAML ({}); quote it or fix the brackets", key, value, e.msg);
    node = YAML::Node(t);
  }
  entries[key] = Entry{node, "--set"};
}

// Fills the Config's members from the entries, recording where each value came from.
class Reader {
 public:
  Reader(const std::map<std::string, Entry>& entries, KeyOrigins& origins) : entries_(entries), origins_(origins) {}

  template <class S>
  void section(std::string_view name, S& s) {
    prefix_ = std::string(name);
    s.visit(*this);
  }
  template <class T>
  void field(std::string_view key, T& member, std::string_view) {
    std::string name = prefix_ + "." + std::string(key);
    auto it = entries_.find(name);
    if (it == entries_.end()) return;
    origins_[name] = it->second.where;
    convert(it->second, name, member);
  }
  void choice(std::string_view key, std::string& m, const std::vector<std::string>&, std::string_view doc) {
    field(key, m, doc);
  }
  void subset(std::string_view key, std::vector<std::string>& m, const std::vector<std::string>&, std::string_view doc) {
    field(key, m, doc);
  }

 private:
  const std::map<std::string, Entry>& entries_;
  KeyOrigins& origins_;
  std::string prefix_;
};

// ---- Config -> YAML text ---------------------------------------------------------------------

// A string as YAML: plain when it cannot be mistaken for anything else, double-quoted otherwise.
std::string yaml_string(const std::string& s) {
  static const char* const kReserved[] = {"null", "~", "true", "false", "yes", "no", "on", "off", "y", "n"};
  bool plain = !s.empty() && (std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_' || s[0] == '/');
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' || c == '-')) plain = false;
  std::string low;
  for (char c : s) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* r : kReserved)
    if (low == r) plain = false;
  if (plain) return s;
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
        else out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

template <class T>
std::string yaml_value(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_integral_v<T>) {
    return fmt::format("{}", v);
  } else if constexpr (std::is_floating_point_v<T>) {
    // fmt's "{}" is the shortest text that reads back to the same double; ".0" keeps it a float to other readers.
    std::string s = fmt::format("{}", v);
    if (s.find_first_of(".eEni") == std::string::npos) s += ".0";
    return s;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return yaml_string(v);
  } else {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + yaml_string(v[i]);
    return out + "]";
  }
}

class Writer {
 public:
  template <class S>
  void section(std::string_view name, S& s) {
    out += fmt::format("\n{}:\n", name);
    s.visit(*this);
  }
  template <class T>
  void field(std::string_view key, T& member, std::string_view) { out += fmt::format("  {}: {}\n", key, yaml_value(member)); }
  void choice(std::string_view key, std::string& m, const std::vector<std::string>&, std::string_view doc) {
    field(key, m, doc);
  }
  void subset(std::string_view key, std::vector<std::string>& m, const std::vector<std::string>&, std::string_view doc) {
    field(key, m, doc);
  }

  std::string out = "# resolved gpt-train configuration\n";
};

// ---- the Markdown key reference --------------------------------------------------------------

std::string md_cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

class ReferenceWriter {
 public:
  template <class S>
  void section(std::string_view name, S& s) {
    prefix_ = std::string(name);
    out += fmt::format("{}### `{}`\n\n| key | default | description |\n| --- | --- | --- |\n", out.empty() ? "" : "\n", name);
    s.visit(*this);
  }
  template <class T>
  void field(std::string_view key, T& member, std::string_view doc) { row(key, member, doc, ""); }
  void choice(std::string_view key, std::string& m, const std::vector<std::string>& allowed, std::string_view doc) {
    row(key, m, doc, fmt::format(" One of: {}.", fmt::join(allowed, ", ")));
  }
  void subset(std::string_view key, std::vector<std::string>& m, const std::vector<std::string>& allowed,
              std::string_view doc) {
    row(key, m, doc, fmt::format(" Any of: {}.", fmt::join(allowed, ", ")));
  }

  std::string out;

 private:
  template <class T>
  void row(std::string_view key, const T& member, std::string_view doc, const std::string& extra) {
    std::string def = yaml_value(member);
    out += fmt::format("| `{}.{}` | `{}` | {}{} |\n", prefix_, key, md_cell(def), md_cell(doc), md_cell(extra));
  }
  std::string prefix_;
};

// A gpt-train config nests three deep (section, key, a group's key); yaml-cpp gives up on deep nesting
// with "bad file" somewhere in the text, so the depth is measured first: flow brackets outside quotes and
// comments, and block levels as a stack of indentations (a "- " item opens a level too).
constexpr int kMaxNesting = 32;

void check_nesting(std::string_view text, const std::string& source) {
  std::vector<size_t> indents;
  int flow = 0;
  size_t line = 1;
  for (size_t begin = 0; begin < text.size(); ++line) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view row = text.substr(begin, end - begin);
    begin = end + 1;
    size_t indent = row.find_first_not_of(' ');
    if (indent == std::string_view::npos || row[indent] == '#') continue;
    if (flow == 0) {
      while (!indents.empty() && indents.back() >= indent) indents.pop_back();
      indents.push_back(indent);
      for (size_t i = indent; i + 1 < row.size() && row[i] == '-' && row[i + 1] == ' ';) {
        i = row.find_first_not_of(' ', i + 1);
        if (i == std::string_view::npos) break;
        indents.push_back(i);
      }
    }
    char quote = 0;
    for (size_t i = indent; i < row.size(); ++i) {
      const char c = row[i];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '#' && (i == 0 || row[i - 1] == ' ')) {
        break;
      } else if (c == '[' || c == '{') {
        ++flow;
      } else if ((c == ']' || c == '}') && flow > 0) {
        --flow;
      }
      GPT_CHECK(static_cast<int>(indents.size()) + flow <= kMaxNesting,
                "{}:{}: nesting too deep at line {} (more than {} levels; a gpt-train config nests 3 deep)", source,
                line, line, kMaxNesting);
    }
  }
}

}  // namespace

Config load_config_from_string(const std::string& yaml_text, const std::vector<std::string>& overrides,
                               const std::string& source_name) {
  GPT_CHECK(yaml_text.size() <= kMaxConfigBytes, "{}: {} bytes is larger than any config (at most {}); is it the "
            "right file?", source_name, yaml_text.size(), kMaxConfigBytes);
  check_nesting(yaml_text, source_name);
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    GPT_FAIL("{}:{}:{}: YAML syntax error: {}", source_name, e.mark.line + 1, e.mark.column + 1, e.msg);
  } catch (const YAML::Exception& e) {
    GPT_FAIL("{}: cannot read YAML: {}", source_name, e.msg);
  }
  std::map<std::string, Entry> entries = collect_entries(root, source_name);
  for (const auto& o : overrides) apply_override(o, entries);

  Config config;
  KeyOrigins origins;
  Reader reader(entries, origins);
  config.visit(reader);
  config_detail::fill_model_from_checkpoint(config.model, origins);
  config_detail::validate_config(config, origins);
  return config;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) GPT_FAIL("cannot read config file '{}': it is a directory", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) GPT_FAIL("cannot open config file '{}': {}", path, std::strerror(errno));
  // Refused before it is read: a 50 MB file of well-formed keys took 12 s and 2.6 GB to reach its first error.
  const auto bytes = std::filesystem::file_size(path, ec);
  GPT_CHECK(ec || bytes <= kMaxConfigBytes, "config file '{}' is {} bytes, larger than any config (at most {}); is it "
            "the right file?", path, bytes, kMaxConfigBytes);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) GPT_FAIL("cannot read config file '{}': {}", path, std::strerror(errno));
  // An empty file is a mistake (a wrong path, a failed copy), not a request for every default.
  const std::string yaml = text.str();
  bool empty = true;
  for (size_t begin = 0; begin < yaml.size() && empty;) {
    size_t end = yaml.find('\n', begin);
    if (end == std::string::npos) end = yaml.size();
    const size_t first = yaml.find_first_not_of(" \t\r", begin);
    empty = first >= end || yaml[first] == '#' || yaml.compare(first, 3, "---") == 0;
    begin = end + 1;
  }
  GPT_CHECK(!empty, "config file '{}' is empty (no key): give at least one key, e.g. those of configs/demo.yaml; every "
            "key and its default: gpt-train config --reference", path);
  return load_config_from_string(yaml, overrides, path);
}

std::string config_to_yaml(const Config& config) {
  Config copy = config;
  Writer w;
  copy.visit(w);
  return w.out;
}

std::string config_reference_markdown() {
  Config defaults;
  ReferenceWriter w;
  defaults.visit(w);
  return w.out;
}

}  // namespace gpt
