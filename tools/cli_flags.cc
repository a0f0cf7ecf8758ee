#include "tools/cli_flags.h"

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/core/byte_size.h"

namespace dmalab::cli {
namespace {

// Levenshtein distance: insertions, deletions and substitutions of one character each.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The command's flag closest to a mistyped one (its value left out), when it is close enough to
// be what was meant: within a third of its length (at least 1) edits, or the typed text a prefix
// of exactly one flag. Empty when nothing is.
std::string ClosestFlag(std::string_view typed, const std::vector<std::string>& names) {
  typed = typed.substr(0, typed.find('='));
  std::string best;
  size_t best_distance = std::max<size_t>(1, typed.size() / 3) + 1;
  std::vector<std::string> prefixed;
  for (const std::string& name : names) {
    if (name.size() > typed.size() && name.compare(0, typed.size(), typed) == 0 &&
        typed.size() > 2) {
      prefixed.push_back(name);
    }
    const size_t d = EditDistance(typed, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  if (best.empty() && prefixed.size() == 1) best = prefixed[0];
  return best;
}

}  // namespace

FlagSet::FlagSet(std::string command, std::string description)
    : command_(std::move(command)), app_(std::move(description), "dmalab " + command_) {
  app_.footer(
      "Exit status: 0 PASS, 1 a check failed or an expectation was not met, 2 bad input or "
      "usage.");
}

std::string FlagSet::DisplayName(const std::string& names) {
  return absl::StrJoin(CLI::detail::split(names, ','), "/");
}

CLI::Option* FlagSet::Size(const std::string& names, uint64_t* out, uint64_t lo, uint64_t hi,
                           const std::string& help) {
  const std::string name = DisplayName(names);
  CLI::Option* o = app_.add_option_function<std::string>(
      names,
      [out, lo, hi, name](const std::string& text) {
        absl::StatusOr<uint64_t> v = ParseByteSize(text, lo, hi);
        if (!v.ok()) throw CLI::ValidationError(name, std::string(v.status().message()));
        *out = *v;
      },
      help);
  o->type_name("SIZE")->default_str(FormatByteSize(*out));
  return o;
}

CLI::Option* FlagSet::Choice(const std::string& names, std::string* out,
                             const std::vector<std::string>& allowed, const std::string& help) {
  const std::string name = DisplayName(names);
  CLI::Option* o = app_.add_option_function<std::string>(
      names,
      [out, allowed, name](const std::string& text) {
        for (const std::string& a : allowed) {
          if (a == text) {
            *out = text;
            return;
          }
        }
        throw CLI::ValidationError(name, absl::StrFormat("value '%s' is not known; allowed: %s",
                                                         text, absl::StrJoin(allowed, ", ")));
      },
      help);
  o->type_name(absl::StrJoin(allowed, "|"))->default_str(*out);
  return o;
}

CLI::Option* FlagSet::Text(const std::string& names, std::string* out, const std::string& help,
                           std::function<absl::Status(const std::string&)> check) {
  const std::string name = DisplayName(names);
  CLI::Option* o = app_.add_option_function<std::string>(
      names,
      [out, check, name](const std::string& text) {
        if (text.empty()) throw CLI::ValidationError(name, "value is empty; give a value");
        if (check) {
          if (absl::Status s = check(text); !s.ok()) {
            // The project's parsers may start with the field's own name ("inject: ...").
            std::string message(s.message());
            const std::string own = name.substr(name.rfind('-') + 1) + ": ";
            if (message.rfind(own, 0) == 0) message.erase(0, own.size());
            throw CLI::ValidationError(name, message);
          }
        }
        *out = text;
      },
      help);
  if (!out->empty()) o->default_str(*out);
  return o;
}

CLI::Option* FlagSet::Switch(const std::string& names, bool* out, const std::string& help) {
  for (const std::string& n : CLI::detail::split(names, ',')) switches_.insert(n);
  return app_.add_flag(names, *out, help);
}

int FlagSet::UsageError(const std::string& message) const {
  std::fprintf(stderr, "dmalab %s: %s\nrun 'dmalab %s --help' for its flags\n", command_.c_str(),
               message.c_str(), command_.c_str());
  return kExitUsage;
}

int FlagSet::OnlyWith(const std::string& condition, bool holds,
                      const std::vector<std::string>& names) {
  if (holds) return -1;
  for (const std::string& name : names) {
    if (app_.count(name) > 0) {
      return UsageError(absl::StrFormat("%s means nothing without %s; drop it or add %s", name,
                                        condition, condition));
    }
  }
  return -1;
}

int FlagSet::NotBoth(const std::string& a, const std::string& b, const std::string& what) {
  if (app_.count(a) == 0 || app_.count(b) == 0) return -1;
  return UsageError(
      absl::StrFormat("%s and %s cannot be given together (%s); give one", a, b, what));
}

int FlagSet::Parse(int argc, const char* const* argv) {
  const auto usage_error = [&](const std::string& message) { return UsageError(message); };
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string_view::npos &&
        switches_.contains(std::string(arg.substr(0, eq)))) {
      return usage_error(absl::StrFormat("%s takes no value; found '%s'", arg.substr(0, eq), arg));
    }
  }
  try {
    app_.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app_.help().c_str(), stdout);
    return kExitPass;
  } catch (const CLI::ExtrasError&) {
    std::vector<std::string> flags;
    for (const CLI::Option* o : app_.get_options()) {
      if (!o->get_positional()) flags.push_back(o->get_name());
    }
    std::vector<std::string> names;  // every spelling: --long and -s
    for (const CLI::Option* o : app_.get_options()) {
      if (o->get_positional()) continue;
      for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
      for (const std::string& n : o->get_snames()) names.push_back("-" + n);
    }
    const std::vector<std::string> remaining = app_.remaining();
    std::string found = absl::StrJoin(remaining, " ");
    const bool flag = !found.empty() && found[0] == '-';
    const std::string closest = flag ? ClosestFlag(remaining.front(), names) : "";
    return usage_error(absl::StrFormat(
        "%s '%s' means nothing to %s%s; its flags: %s", flag ? "flag" : "unexpected argument",
        found, command_, closest.empty() ? "" : absl::StrFormat(" (did you mean %s?)", closest),
        absl::StrJoin(flags, ", ")));
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }
  return -1;
}

}  // namespace dmalab::cli
