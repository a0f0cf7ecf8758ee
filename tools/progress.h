// Progress of a long run on stderr: one line redrawn in place ("replay [#####.....] 80/160
// steps, 3.2 s"), at most ten times a second, erased when the run ends. Drawn only when stderr
// is a terminal and --quiet is not given (ProgressWanted), so pipes, files and CI logs never
// see it; stdout is never touched.
#ifndef DMALAB_TOOLS_PROGRESS_H_
#define DMALAB_TOOLS_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace dmalab {

// True when stderr is a terminal and `quiet` is false.
bool ProgressWanted(bool quiet);

class Progress {
 public:
  // `what` leads the line ("replay", "zoo"); `unit` follows the counts ("steps", "runs").
  Progress(std::string what, std::string unit, bool enabled);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Redraws when enabled, at most every 100 ms (always for the last item); `note` ends the line.
  void Update(int64_t done, int64_t total, std::string_view note = {});
  // Erases the line (before other stderr output, and at the end).
  void Clear();

 private:
  std::string what_, unit_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace dmalab

#endif  // DMALAB_TOOLS_PROGRESS_H_
