#include "tools/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_format.h"
#include "runner/rank_process.h"
#include "runner/seed_split.h"

namespace dmalab {

// Rank processes and MPI ranks other than rank 0 draw none: one progress line per run.
bool ProgressWanted(bool quiet) {
  return !quiet && IsLeadProcess() && CurrentSeedSplit().rank == 0 && isatty(fileno(stderr)) != 0;
}

Progress::Progress(std::string what, std::string unit, bool enabled)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      enabled_(enabled),
      start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { Clear(); }

void Progress::Update(int64_t done, int64_t total, std::string_view note) {
  if (!enabled_ || total <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && done < total && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  constexpr int64_t kWidth = 20;
  const int64_t filled = std::clamp<int64_t>(done * kWidth / total, 0, kWidth);
  const double seconds = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stderr, "\r%s [%s%s] %lld/%lld %s, %.1f s%s%s\033[K", what_.c_str(),
               std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(),
               static_cast<long long>(done), static_cast<long long>(total), unit_.c_str(), seconds,
               note.empty() ? "" : " ", std::string(note).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::Clear() {
  if (!drawn_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace dmalab
