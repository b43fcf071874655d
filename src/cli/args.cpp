#include "cli/args.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gpt {

std::string ParsedArgs::get(const std::string& name, const std::string& fallback) const {
  auto it = values.find(name);
  return it == values.end() ? fallback : it->second.back();
}

int ParsedArgs::get_int(const std::string& name, int fallback) const {
  if (!has(name)) return fallback;
  const std::string v = get(name);
  // Read as a number first, so that 1e11 or 99999999999 is called too large, not "not an integer".
  size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(v, &used);
  } catch (const std::out_of_range&) {
    GPT_FAIL("--{} {} is too large: at most {}", name, v, std::numeric_limits<int>::max());
  } catch (const std::exception&) {
    used = 0;
  }
  GPT_CHECK(used == v.size() && !v.empty() && std::isfinite(value) && value == std::floor(value),
            "--{} expects an integer, got '{}'", name, v);
  GPT_CHECK(value <= std::numeric_limits<int>::max(), "--{} {} is too large: at most {}", name, v,
            std::numeric_limits<int>::max());
  GPT_CHECK(value >= std::numeric_limits<int>::min(), "--{} {} is too small: at least {}", name, v,
            std::numeric_limits<int>::min());
  return static_cast<int>(value);
}

double ParsedArgs::get_double(const std::string& name, double fallback) const {
  if (!has(name)) return fallback;
  const std::string v = get(name);
  size_t used = 0;
  double result = 0;
  try {
    result = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  GPT_CHECK(used == v.size() && !v.empty(), "--{} expects a number, got '{}'", name, v);
  return result;
}

std::vector<std::string> ParsedArgs::all(const std::string& name) const {
  auto it = values.find(name);
  return it == values.end() ? std::vector<std::string>{} : it->second;
}

ParsedArgs parse_args(const std::string& command, const std::vector<std::string>& argv,
                      const std::vector<OptionSpec>& specs) {
  ParsedArgs parsed;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      parsed.positionals.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    const size_t eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto spec = std::find_if(specs.begin(), specs.end(), [&](const OptionSpec& s) { return s.name == name; });
    if (spec == specs.end()) {
      std::string known;
      for (const OptionSpec& s : specs) known += (known.empty() ? "--" : ", --") + s.name;
      GPT_FAIL("gpt-train {}: unknown option '--{}' (known: {})", command, name, known.empty() ? "none" : known);
    }
    if (spec->value.empty()) {
      GPT_CHECK(!inline_value, "gpt-train {}: --{} takes no value", command, name);
      value = "true";
    } else if (!inline_value) {
      GPT_CHECK(i + 1 < argv.size(), "gpt-train {}: --{} needs a value ({})", command, name, spec->value);
      value = argv[++i];
    }
    GPT_CHECK(spec->repeatable || !parsed.has(name), "gpt-train {}: --{} given twice", command, name);
    parsed.values[name].push_back(value);
  }
  return parsed;
}

std::string options_help(const std::vector<OptionSpec>& specs) {
  std::string out;
  for (const OptionSpec& s : specs) {
    std::string left = "  --" + s.name + (s.value.empty() ? "" : " " + s.value);
    out += fmt::format("{:<28} {}\n", left, s.help);
  }
  return out;
}

}  // namespace gpt
