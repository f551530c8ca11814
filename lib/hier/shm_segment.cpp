// POSIX shared memory for a node (shm_segment.hpp).

#include "hier/shm_segment.hpp"

#include "core/mpi_check.hpp"
#include "core/settings.hpp"
#include "core/timeout.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace agx::hier {
namespace {

/// What local rank 0 tells the others about a new segment.
struct Announcement {
  std::int64_t pid = 0;
  std::int64_t fd = -1;      ///< memfd in local rank 0 (-1: a named segment, see name)
  std::int64_t bytes = 0;    ///< its size, as local rank 0 sees the call
  char name[48] = {};        ///< named fallback; empty when local rank 0 failed
};

/// Outcomes, agreed by MPI_MAX over the node.
enum Outcome : int { mapped_ok = 0, no_fd_access = 1, sizes_differ = 2, failed = 3 };

/// AGX_TEST_KILL_SEGMENT=<local rank>:<point>:<n>: the test seam of "no segment
/// outlives the job" (test/hier/run_segment_kill.py). The process of that local rank
/// raises SIGKILL at `point` (created, mapped, agreed) of its n-th segment.
/// (Parsed with every setting: core/settings.hpp, NodeSettings::kill_segment.)
void maybe_die(int local, int point, unsigned n) {
  const KillSeam& s = process_settings().node.kill_segment;
  if (s.point == point && s.local == local && s.n == n) raise(SIGKILL);
}

/// A collective started on the node: waited for with AGX_TIMEOUT honoured.
void finish(MPI_Request& request, const SegmentStall& stalled, const char* step) {
  const double limit = timeout_seconds();
  if (limit <= 0) {
    check_mpi(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
    return;
  }
  StallClock clock(limit);
  while (true) {
    int flag = 0;
    check_mpi(MPI_Test(&request, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    if (flag) return;
    sched_yield();
    if (clock.stalled() && stalled) stalled(step, clock.seconds());
  }
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

std::size_t page_round(std::size_t bytes) {
  static const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

SharedSegment::SharedSegment(MPI_Comm node_comm, std::size_t bytes, const SegmentStall& stalled)
    : bytes_(page_round(bytes)) {
  static std::atomic<unsigned> counter{0};
  const unsigned number = ++counter;  // this process's n-th segment (the test seam counts)
  int local = 0;
  check_mpi(MPI_Comm_rank(node_comm, &local), "MPI_Comm_rank");

  // Local rank 0 makes the memory: an anonymous memfd (no name anywhere), or, where
  // the others cannot open it through /proc, a named segment unlinked right after.
  Announcement a;
  Fd own;
  std::string error;
  const auto make = [&](bool named) {
    if (own.fd >= 0) close(own.fd);
    own.fd = -1;
    a = Announcement{};
    a.pid = static_cast<std::int64_t>(getpid());
    a.bytes = static_cast<std::int64_t>(bytes_);
    if (named) {
      std::snprintf(a.name, sizeof a.name, "/agx-%d-%u", static_cast<int>(getpid()), number);
      own.fd = shm_open(a.name, O_CREAT | O_EXCL | O_RDWR, 0600);
    } else {
      own.fd = memfd_create("agx-segment", MFD_CLOEXEC);
      a.fd = own.fd;
      std::snprintf(a.name, sizeof a.name, "memfd");
    }
    if (own.fd < 0) {
      error = std::string(named ? "shm_open: " : "memfd_create: ") + std::strerror(errno);
    } else if (ftruncate(own.fd, static_cast<off_t>(bytes_)) != 0) {
      error = std::string("ftruncate: ") + std::strerror(errno);
    }
    if (!error.empty()) {
      if (named && own.fd >= 0) shm_unlink(a.name);
      a.name[0] = '\0';
    }
  };

  for (int attempt = 0; attempt < 2 && bytes_ > 0; ++attempt) {
    const bool named = attempt == 1;
    error.clear();
    if (local == 0) make(named);
    if (!named) maybe_die(local, 0, number);
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibcast(&a, sizeof a, MPI_BYTE, 0, node_comm, &request), "MPI_Ibcast");
    finish(request, stalled, "the segment's creator (local rank 0)");

    int outcome = mapped_ok;
    if (a.name[0] == '\0') {
      outcome = failed;
      if (error.empty()) error = "local rank 0 could not create the segment";
    } else if (a.bytes != static_cast<std::int64_t>(bytes_)) {
      outcome = sizes_differ;
      error = "this rank's call needs " + std::to_string(bytes_) + " bytes, local rank 0's " +
              std::to_string(a.bytes);
    } else {
      Fd opened;
      int fd = own.fd;
      if (local != 0) {
        if (named) {
          opened.fd = shm_open(a.name, O_RDWR, 0600);
        } else {
          const std::string path = "/proc/" + std::to_string(a.pid) + "/fd/" + std::to_string(a.fd);
          opened.fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
        }
        fd = opened.fd;
      }
      if (fd < 0) {
        outcome = named ? failed : no_fd_access;
        error = std::string("cannot open the segment: ") + std::strerror(errno);
      } else {
        void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
        if (p == MAP_FAILED) {
          outcome = failed;
          error = std::string("mmap: ") + std::strerror(errno);
        } else {
          data_ = static_cast<std::byte*>(p);
        }
      }
    }
    maybe_die(local, 1, number);
    int agreed = outcome;
    check_mpi(MPI_Iallreduce(&outcome, &agreed, 1, MPI_INT, MPI_MAX, node_comm, &request),
              "MPI_Iallreduce");
    finish(request, stalled, "every local rank to map the segment");
    // Every rank has mapped it (or given up): the name, if any, goes now; the memfd
    // closes with `own`. The memory lives exactly as long as some rank maps it.
    if (local == 0 && named && a.name[0] != '\0') shm_unlink(a.name);
    maybe_die(local, 2, number);
    if (agreed == mapped_ok) return;
    if (data_ != nullptr) munmap(data_, bytes_);
    data_ = nullptr;
    if (agreed == no_fd_access) continue;  // try the named segment
    if (agreed == sizes_differ)
      throw Error(MPI_ERR_TRUNCATE, "agx: the ranks of the node disagree on the size of the call "
                                    "(different counts?): " +
                                        (error.empty() ? std::string("on another rank") : error));
    throw Error(MPI_ERR_NO_MEM, "agx: cannot create a shared segment of " + std::to_string(bytes_) +
                                    " bytes" +
                                    (error.empty() ? std::string(" on another rank") : ": " + error));
  }
}

SharedSegment::~SharedSegment() {
  if (data_ != nullptr) munmap(data_, bytes_);
}

}  // namespace agx::hier
