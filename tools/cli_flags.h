// Flag helpers for the command line (tools/dmalab_main.cc), over CLI11. Every value is parsed
// strictly when the flag is read: integers in a range (no sign where none is allowed, no
// wrap-around, no trailing text), byte sizes (common/core/byte_size.h), choices, and values
// that one of the project's own parsers reads (dtypes, wire modes, faults). A bad value is a
// CLI::ValidationError whose text names the flag, the value and what is allowed; the command
// line turns every parse error into exit status 2.
#ifndef DMALAB_TOOLS_CLI_FLAGS_H_
#define DMALAB_TOOLS_CLI_FLAGS_H_

#include <charconv>
#include <cstdint>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "tools/exit_status.h"  // kExitUsage: every parse error

namespace dmalab::cli {

// One command's flags: its CLI11 app and the names of its switches (flags without a value).
class FlagSet {
 public:
  FlagSet(std::string command, std::string description);

  CLI::App& app() { return app_; }
  const std::string& command() const { return command_; }

  // An integer in [lo, hi].
  template <typename T>
  CLI::Option* Integer(const std::string& names, T* out, T lo, T hi, const std::string& help);
  // A byte size (ParseByteSize) in [lo, hi].
  CLI::Option* Size(const std::string& names, uint64_t* out, uint64_t lo, uint64_t hi,
                    const std::string& help);
  // One of `allowed`.
  CLI::Option* Choice(const std::string& names, std::string* out,
                      const std::vector<std::string>& allowed, const std::string& help);
  // Any non-empty text (paths); `check` may reject it with a message of what is allowed.
  CLI::Option* Text(const std::string& names, std::string* out, const std::string& help,
                    std::function<absl::Status(const std::string&)> check = nullptr);
  // A switch: present or absent; `--name=value` is an error.
  CLI::Option* Switch(const std::string& names, bool* out, const std::string& help);

  // Parses argv (argv[0] is the command's name). Returns -1 when the command should run, else
  // the exit status after printing help (0, stdout) or the error (2, stderr).
  int Parse(int argc, const char* const* argv);

  // After Parse: flags among `names` that were given although they mean nothing unless
  // `condition` (e.g. "--backend=hw") holds are a usage error (2, stderr); else -1.
  int OnlyWith(const std::string& condition, bool holds, const std::vector<std::string>& names);

  // After Parse: `a` and `b` given together, when each asks for a different run (`what`
  // says how they differ), are a usage error (2, stderr) rather than one silently ignored;
  // else -1.
  int NotBoth(const std::string& a, const std::string& b, const std::string& what);

 private:
  // CLI11 `names` for messages ("-b,--minbytes" -> "-b/--minbytes").
  static std::string DisplayName(const std::string& names);
  std::string command_;
  CLI::App app_;
  std::set<std::string> switches_;
  int UsageError(const std::string& message) const;
};

// "value 'x' is not an integer; allowed: 2 to 16" and friends, for an integer flag.
template <typename T>
std::string CheckInteger(const std::string& text, T lo, T hi, T* out) {
  T v{};
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, v);
  const std::string allowed = absl::StrFormat("allowed: %d to %d", lo, hi);
  if (text.empty() || ptr != end || (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    return absl::StrFormat("value '%s' is not an integer; %s", text, allowed);
  }
  if (ec == std::errc::result_out_of_range || v < lo || v > hi) {
    return absl::StrFormat("value '%s' is out of range; %s", text, allowed);
  }
  *out = v;
  return "";
}

template <typename T>
CLI::Option* FlagSet::Integer(const std::string& names, T* out, T lo, T hi,
                              const std::string& help) {
  const std::string name = DisplayName(names);
  CLI::Option* o = app_.add_option_function<std::string>(
      names,
      [out, lo, hi, name](const std::string& text) {
        const std::string error = CheckInteger(text, lo, hi, out);
        if (!error.empty()) throw CLI::ValidationError(name, error);
      },
      help);
  o->type_name("N")->default_str(absl::StrFormat("%d", *out));
  return o;
}

}  // namespace dmalab::cli

#endif  // DMALAB_TOOLS_CLI_FLAGS_H_
