// Writing the files a command is asked for (--json, --csv, -J, --dump, calibrate --out) so that
// no reader ever sees half of one: the bytes go to a fresh temporary file beside the target,
// which is then renamed over it (rename is atomic within a file system). Two runs writing one
// path leave one complete file, a run that fails leaves the old file, and a file in the way is
// replaced, never written through.
#ifndef DMALAB_TOOLS_OUTPUT_FILE_H_
#define DMALAB_TOOLS_OUTPUT_FILE_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace dmalab {

// What a symbolic link at the target path means.
enum class OutputLinks {
  // The user named the path: a link is followed to the file it names (`--json=/dev/stdout`
  // writes stdout). A target that is not a regular file (a terminal, a pipe, /dev/full) is
  // written in place, since it cannot be renamed over.
  kFollow,
  // The path was made from data (a dump file named after a tensor): whatever is at the path,
  // a link included, is replaced by the new file; nothing outside the folder is written.
  kReplace,
};

// Writes the concatenation of `parts` as `path`. Errors name the path and the reason ("cannot
// write 'x.json': No space left on device"); the temporary file is removed on every error.
absl::Status WriteOutputFile(const std::string& path, absl::Span<const std::string_view> parts,
                             OutputLinks links = OutputLinks::kFollow);

// WriteOutputFile of one text, following links: every report file of the command line.
absl::Status WriteTextFile(const std::string& path, std::string_view text);

}  // namespace dmalab

#endif  // DMALAB_TOOLS_OUTPUT_FILE_H_
