#include "common/plugin/bootstrap.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/core/status_macros.h"

namespace dmalab {

absl::StatusOr<std::vector<std::string>> AllGatherBytes(Bootstrap& bootstrap, int rank,
                                                        std::string_view mine) {
  const int world = bootstrap.world();
  const uint64_t size = mine.size();
  std::vector<uint64_t> sizes(world);
  DMALAB_RETURN_IF_ERROR(bootstrap.AllGather(
      rank, absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(&size), sizeof(size)),
      absl::MakeSpan(reinterpret_cast<uint8_t*>(sizes.data()), sizeof(size) * sizes.size())));
  const uint64_t most = *std::max_element(sizes.begin(), sizes.end());
  std::string padded(mine);
  padded.resize(most);
  std::vector<uint8_t> all(most * world);
  DMALAB_RETURN_IF_ERROR(bootstrap.AllGather(
      rank, absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(padded.data()), most),
      absl::MakeSpan(all)));
  std::vector<std::string> out;
  out.reserve(world);
  for (int r = 0; r < world; ++r) {
    out.emplace_back(reinterpret_cast<const char*>(all.data()) + most * r, sizes[r]);
  }
  return out;
}

ThreadBootstrap::ThreadBootstrap(RankThreads* threads)
    : threads_(threads), next_(threads->world(), 0), activity_(threads->world()) {}

std::string ThreadBootstrap::Describe(bool barrier, uint64_t bytes) {
  return barrier ? std::string("barrier") : absl::StrFormat("allgather of %d bytes", bytes);
}

absl::Status ThreadBootstrap::AllGather(int rank, absl::Span<const uint8_t> send,
                                        absl::Span<uint8_t> recv) {
  if (recv.size() != send.size() * static_cast<uint64_t>(world())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bootstrap allgather on rank %d: recv is %d bytes; %d ranks x %d bytes need %d", rank,
        recv.size(), world(), send.size(), send.size() * world()));
  }
  return Call(rank, /*barrier=*/false, send, recv);
}

absl::Status ThreadBootstrap::Barrier(int rank) { return Call(rank, /*barrier=*/true, {}, {}); }

absl::Status ThreadBootstrap::Call(int rank, bool barrier, absl::Span<const uint8_t> send,
                                   absl::Span<uint8_t> recv) {
  const int64_t n = next_[rank]++;
  const int w = world();
  Round& round = rounds_[n];
  if (round.first < 0) {
    round.first = rank;
    round.barrier = barrier;
    round.bytes = send.size();
    round.in.assign(w, false);
    round.data.assign(send.size() * w, 0);
  } else if (round.mismatch.empty() && (round.barrier != barrier || round.bytes != send.size())) {
    round.mismatch = absl::StrFormat(
        "bootstrap call #%d: rank %d called %s, rank %d %s; every rank makes the same calls in "
        "the same order",
        n + 1, round.first, Describe(round.barrier, round.bytes), rank,
        Describe(barrier, send.size()));
  }
  round.in[rank] = true;
  ++round.arrived;
  ++round.left;
  if (!barrier && round.mismatch.empty()) {
    std::memcpy(round.data.data() + rank * send.size(), send.data(), send.size());
  }
  const bool complete =
      threads_->Block(rank, [&] { return round.arrived == w || !round.mismatch.empty(); });
  absl::Status result = absl::OkStatus();
  if (!round.mismatch.empty()) {
    broken_ = true;
    result = absl::InvalidArgumentError(round.mismatch);
  } else if (!complete) {
    broken_ = true;
    std::vector<std::string> missing;
    for (int r = 0; r < w; ++r) {
      if (round.in[r]) continue;
      missing.push_back(activity_[r].empty() ? absl::StrFormat("rank %d", r)
                                             : absl::StrFormat("rank %d (%s)", r, activity_[r]));
    }
    result = absl::DeadlineExceededError(absl::StrFormat(
        "deadlock: rank %d waits in bootstrap call #%d (%s) during %s, which %s never made: they "
        "returned or wait elsewhere, and no rank can progress",
        rank, n + 1, Describe(barrier, send.size()), activity_[rank],
        absl::StrJoin(missing, ", ")));
  } else if (!barrier) {
    std::memcpy(recv.data(), round.data.data(), round.data.size());
  }
  if (--round.left == 0 && (round.arrived == w || !result.ok())) rounds_.erase(n);
  return result;
}

}  // namespace dmalab
