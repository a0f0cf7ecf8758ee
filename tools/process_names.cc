// GatherProcessNames (tools/process_names.h): each rank's pid and host in the processes' byte
// format (common/core/byte_codec.h) over the bootstrap.
#include "tools/process_names.h"

#include <limits.h>
#include <unistd.h>

#include "absl/strings/str_format.h"
#include "common/core/byte_codec.h"
#include "common/core/status_macros.h"

namespace dmalab {

ProcessName ThisProcessName() {
  ProcessName n;
  n.pid = static_cast<int>(getpid());
  char host[HOST_NAME_MAX + 1] = "";
  n.host = gethostname(host, sizeof(host) - 1) == 0 ? host : "unknown";
  return n;
}

absl::StatusOr<std::vector<ProcessName>> GatherProcessNames(Bootstrap& bootstrap, int rank,
                                                            const ProcessName& mine) {
  DMALAB_ASSIGN_OR_RETURN(
      const std::vector<std::string> all,
      AllGatherBytes(bootstrap, rank, ByteWriter().I64(mine.pid).Str(mine.host).Take()));
  std::vector<ProcessName> names;
  names.reserve(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    ByteReader in(all[r]);
    ProcessName n;
    n.pid = static_cast<int>(in.I64());
    n.host = in.Str();
    if (!in.error().empty() || !in.at_end()) {
      return absl::DataLossError(absl::StrFormat(
          "rank %d's process name: %s", r, in.error().empty() ? "bytes left over" : in.error()));
    }
    names.push_back(std::move(n));
  }
  return names;
}

}  // namespace dmalab
