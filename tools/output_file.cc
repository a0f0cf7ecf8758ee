#include "tools/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_format.h"

namespace dmalab {
namespace {

absl::Status CannotCreate(const std::string& path, int error) {
  return absl::PermissionDeniedError(
      absl::StrFormat("cannot write '%s': %s", path, std::strerror(error)));
}

absl::Status CannotWrite(const std::string& path, int error) {
  return absl::DataLossError(absl::StrFormat("cannot write '%s': %s", path, std::strerror(error)));
}

// Writes every part to `fd`; 0 or the errno of the first failure.
int WriteAll(int fd, absl::Span<const std::string_view> parts) {
  for (std::string_view part : parts) {
    while (!part.empty()) {
      const ssize_t n = ::write(fd, part.data(), part.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return n < 0 ? errno : EIO;
      part.remove_prefix(static_cast<size_t>(n));
    }
  }
  return 0;
}

// A target that cannot be renamed over (a terminal, a pipe, /dev/full): written where it is.
absl::Status WriteInPlace(const std::string& path, absl::Span<const std::string_view> parts) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return CannotCreate(path, errno);
  const int error = WriteAll(fd, parts);
  if (::close(fd) != 0 && error == 0) return CannotWrite(path, errno);
  return error == 0 ? absl::OkStatus() : CannotWrite(path, error);
}

std::string What(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a named pipe";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

absl::Status WriteOutputFile(const std::string& path, absl::Span<const std::string_view> parts,
                             OutputLinks links) {
  if (path.empty()) return CannotCreate(path, ENOENT);
  std::string target = path;
  struct stat st {};
  if (links == OutputLinks::kFollow) {
    if (::stat(path.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) return CannotCreate(path, EISDIR);
      if (!S_ISREG(st.st_mode)) return WriteInPlace(path, parts);
      // A link to a file: the file it names is replaced, in its own folder.
      if (char* real = ::realpath(path.c_str(), nullptr); real != nullptr) {
        target = real;
        std::free(real);
      }
    } else if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      // A dangling link: create what it names, as asked. A file there now was renamed in by a
      // concurrent writer since the stat: it is replaced, never truncated and written in place.
      return WriteInPlace(path, parts);
    }
  } else if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
    // Only a file or a link is ever replaced: never a device, a pipe or a folder.
    return absl::PermissionDeniedError(absl::StrFormat(
        "cannot write '%s': %s is in the way (a file or a link there would be replaced)", path,
        What(st.st_mode)));
  }
  const size_t slash = target.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : target.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? target : target.substr(slash + 1);
  // A fresh name (O_EXCL, never through a link): the pid keeps concurrent runs apart, the
  // counter the files of one run.
  static unsigned counter = 0;
  std::string temp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    temp = absl::StrFormat("%s.%s.tmp.%d.%u", dir, base, ::getpid(), counter++);
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) return CannotCreate(path, errno);
  }
  if (fd < 0) return CannotCreate(path, EEXIST);
  int error = WriteAll(fd, parts);
  if (::close(fd) != 0 && error == 0) error = errno;  // a full disk may show only here
  if (error == 0 && ::rename(temp.c_str(), target.c_str()) != 0) error = errno;
  if (error != 0) {
    ::unlink(temp.c_str());
    return CannotWrite(path, error);
  }
  return absl::OkStatus();
}

absl::Status WriteTextFile(const std::string& path, std::string_view text) {
  const std::string_view parts[] = {text};
  return WriteOutputFile(path, parts, OutputLinks::kFollow);
}

}  // namespace dmalab
