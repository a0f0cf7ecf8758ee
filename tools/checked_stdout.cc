#include "tools/checked_stdout.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "tools/exit_status.h"

namespace dmalab {
namespace {

// The errno of the first write to stdout that failed; 0 while none has.
int first_error = 0;

// glibc's stream calls this with its buffer: every byte to descriptor 1, or -1 (the stream's
// error flag) after remembering why.
ssize_t WriteStdout(void*, const char* buf, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(STDOUT_FILENO, buf + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (first_error == 0) first_error = n < 0 ? errno : EIO;
      return -1;
    }
    done += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(size);
}

}  // namespace

void CheckStdout() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    if (fd == STDOUT_FILENO) first_error = EBADF;  // nothing printed can reach the caller
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0 && null != fd) {
      ::dup2(null, fd);
      ::close(null);
    }
  }
  std::signal(SIGPIPE, SIG_IGN);
  cookie_io_functions_t io{};
  io.write = WriteStdout;
  if (FILE* checked = ::fopencookie(nullptr, "w", io); checked != nullptr) {
    // Line by line on a terminal, as stdout is; in blocks otherwise.
    std::setvbuf(checked, nullptr, ::isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, BUFSIZ);
    stdout = checked;
  }
}

int FinishStdout(const std::string& command, int rc) {
  const bool written = std::fflush(stdout) == 0 && !std::ferror(stdout) && first_error == 0;
  if (written) return rc;
  if (rc != cli::kExitUsage) {
    std::fprintf(stderr, "%s: cannot write to stdout: %s\n", command.c_str(),
                 first_error != 0 ? std::strerror(first_error) : "a write failed");
  }
  return cli::kExitUsage;
}

}  // namespace dmalab
