// Loading a Config from YAML with --set overrides, and writing it back.
#pragma once

#include "config/config.h"

#include <string>
#include <vector>

namespace gpt {

// Reads the YAML file, applies overrides ("key.path=value", YAML scalar syntax), fills a Config from
// the defaults and validates it. Any unknown key, wrong type or impossible value throws gpt::Error
// naming the key and where it came from ("config.yaml:12" or "--set").
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
Config load_config_from_string(const std::string& yaml_text, const std::vector<std::string>& overrides = {},
                               const std::string& source_name = "<string>");

// The resolved configuration, every key, as YAML that load_config reads back to the same Config.
std::string config_to_yaml(const Config& config);

// Markdown reference of every key: section, key, default, description. The README embeds it.
std::string config_reference_markdown();

}  // namespace gpt
