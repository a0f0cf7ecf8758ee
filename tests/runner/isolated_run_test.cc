// The worker process of a plugin's run (issue 25, item 3): every way it can end is told apart
// (finished, a signal, an exit inside the work, no message within the bound, a message the
// parent rejects), messages arrive in order and whole, and nothing the worker prints reaches
// the parent's stdout.
#include "runner/isolated_run.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"

// Under AddressSanitizer a SIGSEGV becomes the sanitizer's report and exit status 1; these tests
// are about the signal itself.
extern "C" const char* __asan_default_options() { return "handle_segv=0"; }

namespace dmalab {
namespace {

struct Outcome {
  WorkerEnd end;
  std::vector<std::string> messages;
};

Outcome RunWorker(const std::function<void(WorkerChannel&)>& work, int hang_seconds = 30,
                  std::function<absl::Status(std::string_view)> check = nullptr) {
  Outcome o;
  absl::StatusOr<WorkerEnd> end = RunIsolated(
      work,
      [&](std::string_view m) {
        o.messages.emplace_back(m);
        return check ? check(m) : absl::OkStatus();
      },
      hang_seconds);
  EXPECT_TRUE(end.ok()) << end.status();
  if (end.ok()) o.end = *end;
  return o;
}

TEST(IsolatedRunTest, MessagesArriveInOrderAndWholeThenItFinishes) {
  const Outcome o = RunWorker([](WorkerChannel& c) {
    c.Send("");
    c.Send(std::string(1 << 20, 'x'));  // larger than a pipe's buffer
    for (int i = 0; i < 1000; ++i) c.Send(std::to_string(i));
  });
  EXPECT_EQ(o.end.how, WorkerEnd::How::kFinished);
  ASSERT_EQ(o.messages.size(), 1002u);
  EXPECT_EQ(o.messages[0], "");
  EXPECT_EQ(o.messages[1], std::string(1 << 20, 'x'));
  EXPECT_EQ(o.messages[1001], "999");
  EXPECT_EQ(o.end.Describe(), "finished");
}

TEST(IsolatedRunTest, ASignalIsNamedAndTheMessagesBeforeItKept) {
  const Outcome o = RunWorker([](WorkerChannel& c) {
    c.Send("before");
    raise(SIGSEGV);
  });
  EXPECT_EQ(o.end.how, WorkerEnd::How::kSignaled);
  EXPECT_EQ(o.end.signal, SIGSEGV);
  EXPECT_EQ(o.end.Describe(), "was killed by signal 11 (SIGSEGV: Segmentation fault)");
  EXPECT_EQ(o.messages, std::vector<std::string>{"before"});
}

TEST(IsolatedRunTest, AnExitInsideTheWorkIsNotAFinish) {
  // exit(0) in a collective made dmalab exit 0 with nothing printed.
  EXPECT_EQ(RunWorker([](WorkerChannel&) { std::exit(0); }).end.Describe(), "exited with status 0");
  EXPECT_EQ(RunWorker([](WorkerChannel&) { _exit(7); }).end.Describe(), "exited with status 7");
}

TEST(IsolatedRunTest, NoMessageWithinTheBoundIsAHangAndTheWorkerIsKilled) {
  const auto start = std::chrono::steady_clock::now();
  const Outcome o = RunWorker(
      [](WorkerChannel& c) {
        for (int i = 0; i < 3; ++i) {  // messages keep it alive past the bound in total
          usleep(600 * 1000);
          c.Send("tick");
        }
        for (;;) pause();
      },
      1);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(o.end.how, WorkerEnd::How::kHung);
  EXPECT_EQ(o.messages.size(), 3u);
  EXPECT_GE(s, 2.75);
  EXPECT_LT(s, 10);
  EXPECT_EQ(o.end.Describe(), "made no progress for 1 s (--timeout) and was killed");
}

TEST(IsolatedRunTest, AMessageTheParentRejectsEndsTheWorker) {
  const Outcome o = RunWorker(
      [](WorkerChannel& c) {
        c.Send("good");
        c.Send("bad");
        for (;;) pause();
      },
      30,
      [](std::string_view m) {
        return m == "bad" ? absl::DataLossError("not a report") : absl::OkStatus();
      });
  EXPECT_EQ(o.end.how, WorkerEnd::How::kBadStream);
  EXPECT_EQ(o.end.Describe(),
            "sent a report the command line cannot read (not a report) and was killed");
}

TEST(IsolatedRunTest, WhatTheWorkerPrintsGoesToStderrNotStdout) {
  std::fflush(stdout);
  char path[] = "/tmp/dmalab_isolated_run_test.XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const int saved = dup(STDOUT_FILENO);
  dup2(fd, STDOUT_FILENO);
  const Outcome o = RunWorker([](WorkerChannel&) {
    std::printf("printed by the collective\n");
    std::fflush(stdout);
  });
  std::fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  EXPECT_EQ(o.end.how, WorkerEnd::How::kFinished);
  EXPECT_EQ(lseek(fd, 0, SEEK_END), 0);  // nothing reached the parent's stdout
  close(fd);
  unlink(path);
}

}  // namespace
}  // namespace dmalab
