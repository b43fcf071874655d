// Shared between the config loader and its validation: where each key's value came from, the value
// checks, and the "did you mean" hint used for unknown keys and disallowed choices.
#pragma once

#include "config/config.h"

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gpt::config_detail {

// "section.key" -> "config.yaml:12" or "--set"; keys absent from the map kept their default.
using KeyOrigins = std::map<std::string, std::string>;

// Throws gpt::Error for the first impossible value, as "<where>: <key>: <what is wrong>; <what would be right>".
void validate_config(const Config& config, const KeyOrigins& origins);

// The candidate nearest to word by edit distance (adjacent swaps count as one edit), or "" when none
// is close enough to be a plausible typo.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "" — ready to append to a message.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace gpt::config_detail
