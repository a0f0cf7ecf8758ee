// GatherProcessNames (tools/process_names.h): fixed-size records over the bootstrap.
#include "tools/process_names.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/types/span.h"
#include "common/core/status_macros.h"

namespace dmalab {
namespace {

// One rank's record on the wire: the pid, the name's length, the name (zero-padded).
struct Record {
  int32_t pid;
  uint16_t host_size;
  char host[kMaxHostName];
};

}  // namespace

ProcessName ThisProcessName() {
  ProcessName n;
  n.pid = static_cast<int>(getpid());
  char host[kMaxHostName + 1] = "";
  n.host = gethostname(host, sizeof(host) - 1) == 0 ? host : "unknown";
  return n;
}

absl::StatusOr<std::vector<ProcessName>> GatherProcessNames(Bootstrap& bootstrap, int rank,
                                                            const ProcessName& mine) {
  Record send;
  std::memset(&send, 0, sizeof(send));  // padding too: the bytes sent are all defined
  send.pid = static_cast<int32_t>(mine.pid);
  send.host_size = static_cast<uint16_t>(std::min<size_t>(mine.host.size(), kMaxHostName));
  std::memcpy(send.host, mine.host.data(), send.host_size);
  std::vector<Record> recv(bootstrap.world());
  DMALAB_RETURN_IF_ERROR(bootstrap.AllGather(
      rank, absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(&send), sizeof(send)),
      absl::MakeSpan(reinterpret_cast<uint8_t*>(recv.data()), recv.size() * sizeof(Record))));
  std::vector<ProcessName> names;
  names.reserve(recv.size());
  for (const Record& r : recv) {
    names.push_back({r.pid, std::string(r.host, std::min<size_t>(r.host_size, kMaxHostName))});
  }
  return names;
}

}  // namespace dmalab
