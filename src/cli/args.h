// A small command-line parser for the subcommands: positionals, "--name value" options (a flag may be
// repeated, e.g. --set), and boolean switches. Unknown options are errors that list the known ones.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gpt {

struct OptionSpec {
  std::string name;   // without the leading "--"
  std::string value;  // placeholder shown in help ("N", "FILE"); empty for a switch
  std::string help;
  bool repeatable = false;
};

class ParsedArgs {
 public:
  std::vector<std::string> positionals;
  std::map<std::string, std::vector<std::string>> values;

  bool has(const std::string& name) const { return values.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  int get_int(const std::string& name, int fallback) const;
  double get_double(const std::string& name, double fallback) const;
  std::vector<std::string> all(const std::string& name) const;
};

ParsedArgs parse_args(const std::string& command, const std::vector<std::string>& argv,
                      const std::vector<OptionSpec>& specs);
std::string options_help(const std::vector<OptionSpec>& specs);

}  // namespace gpt
