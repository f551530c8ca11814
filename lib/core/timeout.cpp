// Hang diagnosis: the no-progress clock and the report (timeout.hpp).

#include "core/timeout.hpp"

#include <agx/error.hpp>

#include "core/config.hpp"
#include "core/mpi_check.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace agx {

double timeout_seconds() { return config().timeout_seconds; }

void StallClock::restart() { since_ = last_check_ = Clock::now(); }

bool StallClock::stalled() {
  const Clock::time_point now = Clock::now();
  const double gap = std::chrono::duration<double>(now - last_check_).count();
  last_check_ = now;
  if (gap > limit_) {
    since_ = now;
    return false;
  }
  return seconds() > limit_;
}

double StallClock::seconds() const {
  return std::chrono::duration<double>(Clock::now() - since_).count();
}

int world_rank_of(MPI_Comm comm, int rank) {
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  int out = -1;
  if (MPI_Comm_group(comm, &group) == MPI_SUCCESS &&
      MPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS)
    MPI_Group_translate_ranks(group, 1, &rank, world, &out);
  if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
  if (world != MPI_GROUP_NULL) MPI_Group_free(&world);
  return out == MPI_UNDEFINED ? -1 : out;
}

std::string rank_in(MPI_Comm comm, int rank) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  return "rank " + std::to_string(rank) + " of " + std::to_string(size) + " (world rank " +
         std::to_string(world_rank_of(comm, rank)) + ")";
}

void report_hang(MPI_Comm comm, const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  if (config().timeout_abort) MPI_Abort(comm, MPI_ERR_OTHER);
  throw Error(MPI_ERR_OTHER, line);
}

void abandon(MPI_Request* requests, const std::vector<bool>& is_send) noexcept {
  const WorldReturnsErrors guard;  // a failed receive's test must not abort (MPICH)
  const std::size_t count = is_send.size();
  std::vector<char> open(count, 0);
  for (std::size_t i = 0; i < count; ++i)
    if (!is_send[i] && requests[i] != MPI_REQUEST_NULL) {
      MPI_Cancel(&requests[i]);
      open[i] = 1;
    }
  // A cancelled receive completes (a persistent one becomes inactive and then tests as
  // complete too); one that was already matched completes when its data has arrived.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (bool any = true; any && std::chrono::steady_clock::now() < give_up;) {
    any = false;
    for (std::size_t i = 0; i < count; ++i) {
      if (!open[i]) continue;
      int done = 0;
      MPI_Test(&requests[i], &done, MPI_STATUS_IGNORE);
      open[i] = done ? 0 : 1;
      any = any || !done;
    }
  }
  for (std::size_t i = 0; i < count; ++i)
    if (requests[i] != MPI_REQUEST_NULL && (is_send[i] || open[i])) MPI_Request_free(&requests[i]);
}

std::size_t test_some(std::vector<MPI_Request>& requests, std::vector<int>& scratch,
                      std::size_t open, StallClock& clock, std::vector<MPI_Status>* done) {
  if (done != nullptr) done->clear();
  if (open == 0) return 0;
  scratch.resize(requests.size());
  int completed = 0;
  thread_local std::vector<MPI_Status> statuses;
  MPI_Status* st = statuses_for(statuses, requests.size());
  const WorldReturnsErrors guard;
  const int rc = MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &completed,
                              scratch.data(), st);
  check_statuses(rc, st, completed > 0 ? static_cast<std::size_t>(completed) : 0, "MPI_Testsome");
  if (completed == MPI_UNDEFINED) return 0;  // nothing active any more
  if (done != nullptr) done->assign(st, st + completed);  // of requests scratch[0..completed)
  if (completed > 0) clock.restart();
  return open - std::min(open, static_cast<std::size_t>(completed));
}

}  // namespace agx
