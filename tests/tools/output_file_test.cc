// Report and dump files (issue 25, item 8): written atomically (concurrent writers of one path
// leave one complete file, never a mix or a truncation), links followed only where the user named
// the path, a dump never writes through a link, and no temporary file is left behind.
#include "tools/output_file.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace dmalab {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dmalab_output_file_test." + std::to_string(::getpid()) + "." +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // The names in the folder, sorted.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
  fs::path dir_;
};

TEST_F(OutputFileTest, ReplacesAFileAndLeavesNoTemporary) {
  const std::string path = dir_ / "r.json";
  ASSERT_TRUE(WriteTextFile(path, "first, and longer\n").ok());
  ASSERT_TRUE(WriteTextFile(path, "{}\n").ok());
  EXPECT_EQ(Slurp(path), "{}\n");
  EXPECT_EQ(Names(), std::vector<std::string>{"r.json"});
}

TEST_F(OutputFileTest, ConcurrentWritersOfOnePathLeaveOneCompleteFile) {
  // 8 processes each write a different 1 MiB text to one path 20 times; every read between and
  // after sees exactly one writer's text (was: a truncated or interleaved file).
  const std::string path = dir_ / "shared.json";
  constexpr int kWriters = 8;
  std::vector<pid_t> pids;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const std::string text(1 << 20, static_cast<char>('a' + w));
      for (int i = 0; i < 20; ++i) {
        if (!WriteTextFile(path, text).ok()) ::_exit(1);
      }
      ::_exit(0);
    }
    pids.push_back(pid);
  }
  // Read until every writer has finished (the first renames may come late on a loaded machine);
  // a bad read is counted, not returned on, so that every writer is still waited for.
  int reads = 0, bad_reads = 0;
  size_t first_bad_size = 0;
  size_t running = pids.size();
  while (running > 0) {
    std::ifstream in(path, std::ios::binary);
    if (in) {  // absent before the first rename
      std::stringstream s;
      s << in.rdbuf();
      const std::string text = s.str();
      if (text.size() != 1u << 20 || text.find_first_not_of(text[0]) != std::string::npos) {
        if (bad_reads++ == 0) first_bad_size = text.size();
      }
      ++reads;
    }
    for (pid_t& pid : pids) {
      if (pid <= 0) continue;
      int status = 0;
      const pid_t done = ::waitpid(pid, &status, WNOHANG);
      ASSERT_GE(done, 0);
      if (done == pid) {
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        pid = 0;
        --running;
      }
    }
  }
  EXPECT_EQ(bad_reads, 0) << "of " << reads << " reads; the first saw " << first_bad_size
                          << " bytes (a truncated or mixed file)";
  const std::string last = Slurp(path);
  ASSERT_EQ(last.size(), 1u << 20);
  EXPECT_EQ(last.find_first_not_of(last[0]), std::string::npos);
  EXPECT_EQ(Names(), std::vector<std::string>{"shared.json"});
}

TEST_F(OutputFileTest, AUserNamedLinkIsFollowedToItsFile) {
  fs::create_directories(dir_ / "real");
  const fs::path target = dir_ / "real" / "r.json";
  std::ofstream(target) << "old";
  fs::create_symlink(target, dir_ / "link.json");
  ASSERT_TRUE(WriteTextFile(dir_ / "link.json", "new\n").ok());
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.json"));
  EXPECT_EQ(Slurp(target), "new\n");
}

TEST_F(OutputFileTest, ADumpReplacesALinkInsteadOfWritingThroughIt) {
  const fs::path outside = dir_ / "outside.txt";
  std::ofstream(outside) << "precious";
  fs::create_directories(dir_ / "dump");
  const fs::path file = dir_ / "dump" / "x.rank0.npy";
  fs::create_symlink(outside, file);
  const std::string_view parts[] = {"np", "y"};
  ASSERT_TRUE(WriteOutputFile(file, parts, OutputLinks::kReplace).ok());
  EXPECT_EQ(Slurp(outside), "precious");
  EXPECT_FALSE(fs::is_symlink(file));
  EXPECT_EQ(Slurp(file), "npy");
}

TEST_F(OutputFileTest, ADumpNeverReplacesOrOpensAPipeOrAFolder) {
  const fs::path fifo = dir_ / "p.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string_view parts[] = {"x"};
  // Opening the pipe to write would block until a reader came: refused at once.
  absl::Status s = WriteOutputFile(fifo, parts, OutputLinks::kReplace);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "cannot write '" + fifo.string() +
                             "': a named pipe is in the way (a file or a link there would be "
                             "replaced)");
  fs::create_directories(dir_ / "d.npy");
  s = WriteOutputFile(dir_ / "d.npy", parts, OutputLinks::kReplace);
  EXPECT_EQ(s.message(), "cannot write '" + (dir_ / "d.npy").string() +
                             "': a directory is in the way (a file or a link there would be "
                             "replaced)");
  EXPECT_EQ(WriteTextFile(dir_ / "d.npy", "x").message(),
            "cannot write '" + (dir_ / "d.npy").string() + "': Is a directory");
}

TEST_F(OutputFileTest, ADeviceTheUserNamedIsWrittenInPlace) {
  EXPECT_EQ(WriteTextFile("/dev/full", "{}\n").message(),
            "cannot write '/dev/full': No space left on device");
  EXPECT_TRUE(WriteTextFile("/dev/null", "{}\n").ok());
}

TEST_F(OutputFileTest, AFolderThatCannotBeWrittenIsNamedWithTheReason) {
  EXPECT_EQ(
      WriteTextFile((dir_ / "missing" / "r.json").string(), "{}").message(),
      "cannot write '" + (dir_ / "missing" / "r.json").string() + "': No such file or directory");
  EXPECT_EQ(Names(), std::vector<std::string>{});
}

}  // namespace
}  // namespace dmalab
