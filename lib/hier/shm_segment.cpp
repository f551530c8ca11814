// POSIX shared memory for a node (shm_segment.hpp).

#include "hier/shm_segment.hpp"

#include "core/mpi_check.hpp"
#include "core/settings.hpp"
#include "core/timeout.hpp"
#include "hier/node_exchange.hpp"

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
#include <optional>
#include <string>
#include <utility>

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

struct SegmentMaker::State {
  Announcement a;
  Fd own;
  std::string error;
  int outcome = mapped_ok;
  int agreed = mapped_ok;
};

SegmentMaker::SegmentMaker(std::unique_ptr<NodeExchange> exchange, std::size_t bytes)
    : x_(std::move(exchange)), bytes_(page_round(bytes)), local_(x_->local()),
      s_(std::make_unique<State>()) {
  static std::atomic<unsigned> counter{0};
  number_ = ++counter;  // this process's n-th segment (the test seam counts)
  if (bytes_ == 0) step_ = Step::made;
}

SegmentMaker::~SegmentMaker() {
  if (data_ != nullptr) munmap(data_, bytes_);
}

// Local rank 0 makes the memory: an anonymous memfd (no name anywhere), or, where the
// others cannot open it through /proc, a named segment unlinked right after.
void SegmentMaker::begin() {
  const bool named = attempt_ == 1;
  State& st = *s_;
  st.error.clear();
  if (local_ == 0) {
    Announcement& a = st.a;
    if (st.own.fd >= 0) close(st.own.fd);
    st.own.fd = -1;
    a = Announcement{};
    a.pid = static_cast<std::int64_t>(getpid());
    a.bytes = static_cast<std::int64_t>(bytes_);
    if (named) {
      std::snprintf(a.name, sizeof a.name, "/agx-%d-%u", static_cast<int>(getpid()), number_);
      st.own.fd = shm_open(a.name, O_CREAT | O_EXCL | O_RDWR, 0600);
    } else {
      st.own.fd = memfd_create("agx-segment", MFD_CLOEXEC);
      a.fd = st.own.fd;
      std::snprintf(a.name, sizeof a.name, "memfd");
    }
    if (st.own.fd < 0) {
      st.error = std::string(named ? "shm_open: " : "memfd_create: ") + std::strerror(errno);
    } else if (ftruncate(st.own.fd, static_cast<off_t>(bytes_)) != 0) {
      st.error = std::string("ftruncate: ") + std::strerror(errno);
    }
    if (!st.error.empty()) {
      if (named && st.own.fd >= 0) shm_unlink(a.name);
      a.name[0] = '\0';
    }
  }
  if (!named) maybe_die(local_, 0, number_);
  x_->start_bcast(&st.a, static_cast<int>(sizeof st.a));
  step_ = Step::announced;
}

// Every rank opens and maps what local rank 0 announced, then the node agrees.
void SegmentMaker::map() {
  const bool named = attempt_ == 1;
  State& st = *s_;
  const Announcement& a = st.a;
  st.outcome = mapped_ok;
  if (a.name[0] == '\0') {
    st.outcome = failed;
    if (st.error.empty()) st.error = "local rank 0 could not create the segment";
  } else if (a.bytes != static_cast<std::int64_t>(bytes_)) {
    st.outcome = sizes_differ;
    st.error = "this rank's call needs " + std::to_string(bytes_) + " bytes, local rank 0's " +
               std::to_string(a.bytes);
  } else {
    Fd opened;
    int fd = st.own.fd;
    if (local_ != 0) {
      if (named) {
        opened.fd = shm_open(a.name, O_RDWR, 0600);
      } else {
        const std::string path = "/proc/" + std::to_string(a.pid) + "/fd/" + std::to_string(a.fd);
        opened.fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
      }
      fd = opened.fd;
    }
    if (fd < 0) {
      st.outcome = named ? failed : no_fd_access;
      st.error = std::string("cannot open the segment: ") + std::strerror(errno);
    } else {
      void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
      if (p == MAP_FAILED) {
        st.outcome = failed;
        st.error = std::string("mmap: ") + std::strerror(errno);
      } else {
        data_ = static_cast<std::byte*>(p);
      }
    }
  }
  maybe_die(local_, 1, number_);
  st.agreed = st.outcome;
  x_->start_max(&st.outcome, &st.agreed);
  step_ = Step::agreed;
}

// Every rank has mapped it (or given up): the name, if any, goes now; the memfd closes
// with `own`. The memory lives exactly as long as some rank maps it. True when made.
bool SegmentMaker::finish() {
  const bool named = attempt_ == 1;
  State& st = *s_;
  if (local_ == 0 && named && st.a.name[0] != '\0') shm_unlink(st.a.name);
  maybe_die(local_, 2, number_);
  if (st.agreed == mapped_ok) {
    if (st.own.fd >= 0) close(st.own.fd);
    st.own.fd = -1;
    step_ = Step::made;
    return true;
  }
  if (data_ != nullptr) munmap(data_, bytes_);
  data_ = nullptr;
  if (st.agreed == no_fd_access && attempt_ == 0) {  // try the named segment
    attempt_ = 1;
    step_ = Step::begin;
    return false;
  }
  const std::string& error = st.error;
  if (st.agreed == sizes_differ)
    throw Error(MPI_ERR_TRUNCATE, "agx: the ranks of the node disagree on the size of the call "
                                  "(different counts?): " +
                                      (error.empty() ? std::string("on another rank") : error));
  throw Error(MPI_ERR_NO_MEM, "agx: cannot create a shared segment of " + std::to_string(bytes_) +
                                  " bytes" +
                                  (error.empty() ? std::string(" on another rank") : ": " + error));
}

bool SegmentMaker::test() { return advance(false); }

bool SegmentMaker::advance(bool block) {
  const auto complete = [&] {
    if (!block) return x_->test();
    x_->wait();
    return true;
  };
  while (true) {
    switch (step_) {
      case Step::made:
        return true;
      case Step::begin:
        begin();
        break;
      case Step::announced:
        if (!complete()) return false;
        map();
        break;
      case Step::agreed:
        if (!complete()) return false;
        if (!finish()) break;
        ++steps_;
        return true;
    }
    ++steps_;
  }
}

void SegmentMaker::wait() { advance(true); }

std::unique_ptr<SharedSegment> SegmentMaker::take() {
  auto segment = std::make_unique<SharedSegment>(data_, bytes_);
  data_ = nullptr;
  return segment;
}

const char* SegmentMaker::waiting_for() const {
  return step_ == Step::announced ? "the segment's creator (local rank 0)"
                                  : "every local rank to map the segment";
}

SharedSegment::SharedSegment(MPI_Comm node_comm, std::size_t bytes, const SegmentStall& stalled) {
  SegmentMaker maker(collective_exchange(node_comm), bytes);
  const double limit = timeout_seconds();
  std::optional<StallClock> clock;
  if (limit > 0) clock.emplace(limit);
  std::uint64_t seen = 0;
  if (!clock) maker.wait();  // MPI_Wait on each exchange, as always without AGX_TIMEOUT
  while (!maker.test()) {
    if (maker.steps() != seen) {
      seen = maker.steps();
      clock->restart();
    }
    sched_yield();
    if (clock->stalled() && stalled) stalled(maker.waiting_for(), clock->seconds());
  }
  std::unique_ptr<SharedSegment> made = maker.take();
  data_ = made->data_;
  bytes_ = made->bytes_;
  made->data_ = nullptr;
}

SharedSegment::~SharedSegment() {
  if (data_ != nullptr) munmap(data_, bytes_);
}

}  // namespace agx::hier
