// Loading a Config from YAML with --set overrides, and writing it back.
#pragma once

#include "config/config.h"

#include <cstddef>
#include <string>
#include <vector>

namespace gpt {

// Larger than any config: a bigger file is refused before it is parsed.
inline constexpr size_t kMaxConfigBytes = size_t{1} << 20;

// Reads the YAML file, applies overrides ("key.path=value", YAML scalar syntax), fills a Config from
// the defaults and validates it. Any unknown key, wrong type or impossible value throws gpt::Error
// naming the key and where it came from ("config.yaml:12" or "--set"). A file without any key (empty, or
// comments only) is an error; so are text over kMaxConfigBytes and nesting deeper than any config has.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
Config load_config_from_string(const std::string& yaml_text, const std::vector<std::string>& overrides = {},
                               const std::string& source_name = "<string>");

// The resolved configuration, every key, as YAML that load_config reads back to the same Config.
std::string config_to_yaml(const Config& config);

// Markdown reference of every key: section, key, default, description. The README embeds it.
std::string config_reference_markdown();

}  // namespace gpt
