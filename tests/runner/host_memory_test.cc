// The memory a run may use (issue 25, item 1): the least of MemAvailable, RLIMIT_AS and
// RLIMIT_DATA less what is mapped, and every cgroup level's limit less its usage, cgroup v1 and
// v2, named in the refusal.
#include "runner/host_memory.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace dmalab {
namespace {

namespace fs = std::filesystem;

class CgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("dmalab_host_memory_test." + std::to_string(getpid()));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& path, const std::string& text) {
    fs::create_directories((root_ / path).parent_path());
    std::ofstream(root_ / path) << text;
  }
  fs::path root_;
};

TEST_F(CgroupTest, V2TakesTheTightestLevelFromTheLeafToTheRoot) {
  Write("sys/fs/cgroup/a/memory.max", "max\n");
  Write("sys/fs/cgroup/a/memory.current", "5000\n");
  Write("sys/fs/cgroup/a/b/memory.max", "1073741824\n");
  Write("sys/fs/cgroup/a/b/memory.current", "73741824\n");
  Write("sys/fs/cgroup/memory.max", "2147483648\n");
  Write("sys/fs/cgroup/memory.current", "2047483648\n");
  // The root's 2 GiB, 1.9 GiB used, leaves less than the leaf's 1 GiB, 70 MiB used.
  MemoryLimit limit = CgroupMemoryLimit(root_, "0::/a/b\n");
  EXPECT_EQ(limit.bytes, 100000000u);
  EXPECT_EQ(limit.source, "cgroup " + (root_ / "sys/fs/cgroup").string() +
                              " (memory.max 2147483648 bytes, 2047483648 in use)");
  Write("sys/fs/cgroup/memory.max", "max\n");
  limit = CgroupMemoryLimit(root_, "0::/a/b\n");
  EXPECT_EQ(limit.bytes, 1000000000u);
  EXPECT_EQ(limit.source, "cgroup " + (root_ / "sys/fs/cgroup/a/b").string() +
                              " (memory.max 1073741824 bytes, 73741824 in use)");
}

TEST_F(CgroupTest, V1ReadsTheMemoryHierarchyAndTreatsItsHugeLimitAsNone) {
  Write("sys/fs/cgroup/memory/job/memory.limit_in_bytes", "536870912\n");
  Write("sys/fs/cgroup/memory/job/memory.usage_in_bytes", "600000000\n");  // over: 0 left
  Write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  Write("sys/fs/cgroup/memory/memory.usage_in_bytes", "1\n");
  const MemoryLimit limit = CgroupMemoryLimit(root_, "5:cpu,cpuacct:/\n4:memory:/job\n0::/\n");
  EXPECT_EQ(limit.bytes, 0u);
  EXPECT_EQ(limit.source, "cgroup " + (root_ / "sys/fs/cgroup/memory/job").string() +
                              " (memory.limit_in_bytes 536870912 bytes, 600000000 in use)");
}

TEST_F(CgroupTest, NoFilesOrNoLimitIsNoLimit) {
  EXPECT_EQ(CgroupMemoryLimit(root_, "0::/x\n4:memory:/y\ngarbage\n").bytes, UINT64_MAX);
  Write("sys/fs/cgroup/x/memory.max", "max\n");
  EXPECT_EQ(CgroupMemoryLimit(root_, "0::/x\n").source, "");
}

// RLIMIT_AS less the address space already mapped binds when it is the tightest (was ignored:
// `sweep -b 2G` under a limit aborted in the allocator).
TEST(HostMemoryTest, AnAddressSpaceLimitBindsAndIsNamed) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer maps terabytes of shadow: no address-space limit fits it";
#endif
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    struct rlimit r {};
    r.rlim_cur = r.rlim_max = 3ull << 30;
    if (setrlimit(RLIMIT_AS, &r) != 0) _exit(10);
    const MemoryLimit limit = AvailableMemory();
    if (limit.bytes >= (3ull << 30) || limit.bytes == 0) _exit(11);
    if (limit.source.rfind("RLIMIT_AS (3221225472 bytes, ", 0) != 0) _exit(12);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(HostMemoryTest, WithoutLimitsMemAvailableIsTheBound) {
  const MemoryLimit limit = AvailableMemory();
  EXPECT_GT(limit.bytes, 0u);
  EXPECT_FALSE(limit.source.empty());
  EXPECT_EQ(LimitText(MemoryLimit{1073741824, "MemAvailable"}),
            "1073741824 bytes (1.0 GiB) available (MemAvailable)");
}

}  // namespace
}  // namespace dmalab
