// The repeated-call path of MPI_Allgather (fast_call.hpp).

#include "pmpi/fast_call.hpp"

#include <agx/bytes.hpp>

#include "api/dispatch.hpp"
#include "core/comm_context.hpp"
#include "core/tls.hpp"
#include "pmpi/call.hpp"
#include "pmpi/raise.hpp"
#include "pmpi/report.hpp"
#include "pmpi/settings.hpp"

#include <cstdint>

namespace agx::pmpi {
namespace {

/// The last full call of this thread that the repeated path can serve.
struct Shape {
  bool valid = false;
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Datatype sendtype = MPI_DATATYPE_NULL, recvtype = MPI_DATATYPE_NULL;
  int sendcount = 0, recvcount = 0;
  bool in_place = false;
  std::uint64_t deletions = 0;  ///< CommContext::deletions() when recorded: ctx still valid
  CommContext* ctx = nullptr;
  int nranks = 0;
  std::size_t block = 0;  ///< bytes of every block
  CallChoice choice;    ///< what the full call chose (core/choose.hpp)
  bool timed = false;   ///< AGX_SUMMARY (settings are read once: fixed)
  std::size_t row = 0, rival_row = 0;  ///< the counters' rows of the choice and its rival
};
// Initial-exec TLS: the interposer is loaded at start-up (LD_PRELOAD or linked), so
// its few hot thread-locals (this, call.cpp's `inside`, report.cpp's tally pointer)
// are reached with one move instead of a __tls_get_addr call each (measured: 7 such
// calls, about 80 instructions, per repeated call). A library opened later with
// dlopen takes them from glibc's static TLS reserve.
AGX_FAST_TLS thread_local Shape last;

}  // namespace

bool run_repeated(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, int& rc) noexcept {
  const Shape& s = last;
  const bool in_place = sendbuf == MPI_IN_PLACE;
  if (!s.valid || comm != s.comm || recvtype != s.recvtype || recvcount != s.recvcount ||
      in_place != s.in_place || (!in_place && (sendtype != s.sendtype || sendcount != s.sendcount)) ||
      inside_agx() || s.deletions != CommContext::deletions())
    return false;
  // The buffer checks of the full path, for one uniform run of nranks * block bytes.
  const std::size_t total = s.block * static_cast<std::size_t>(s.nranks);
  const auto* recv = static_cast<const char*>(recvbuf);
  std::uintptr_t end = 0;
  if (total > 0 && (recvbuf == nullptr ||
                    __builtin_add_overflow(reinterpret_cast<std::uintptr_t>(recvbuf), total, &end)))
    return false;
  if (!in_place && s.block > 0 &&
      (sendbuf == nullptr || ranges_overlap(static_cast<const char*>(sendbuf), s.block, recv, total)))
    return false;
  const InsideAgx guard;
  rc = guarded(comm, "MPI_Allgather", [&] {
    const bool timed = s.timed;
    const double t0 = timed ? PMPI_Wtime() : 0.0;
    const Buffers buffers{in_place ? nullptr : sendbuf, recvbuf, in_place};
    const Layout layout = Layout::uniform(s.nranks, s.block);
    const Algorithm ran = run_blocking(*s.ctx, s.choice, buffers, layout);
    const double seconds = timed ? PMPI_Wtime() - t0 : 0.0;
    if (ran == s.choice.algorithm.id)
      record_row(s.row, total, seconds);
    else if (ran == s.choice.rival.algorithm.id)
      record_row(s.rival_row, total, seconds);
    else  // direct write (shared_memory), a device path's algorithm
      record_call(what_ran(ran, s.choice.algorithm, s.choice.rival.algorithm), total, seconds);
    return MPI_SUCCESS;
  });
  return true;
}

void record_shape(const PreparedCall& p, const CallChoice& choice) noexcept {
  last.valid = false;
  const GatherCall& c = p.c;
  const bool types_fit = is_common_predefined(c.recvtype) &&
                         (p.user_in_place || is_common_predefined(c.sendtype));
  if (c.is_v || !types_fit || p.send_tmp || p.recv_tmp || !p.layout.is_uniform() ||
      p.buffers.recv != c.recvbuf || (!p.user_in_place && p.buffers.send != c.sendbuf))
    return;
  const std::uint64_t deletions = CommContext::deletions();
  CommContext* ctx = nullptr;
  try {
    ctx = CommContext::find(c.comm);
  } catch (...) {  // not recorded: the next call takes the full path again
  }
  if (ctx == nullptr) return;
  last = Shape{true,        c.comm,         c.sendtype,     c.recvtype,
               c.sendcount, c.recvcount,    p.user_in_place, deletions,
               ctx,         p.layout.nranks(), p.layout.bytes(0), choice,
               settings().summary, counter_row(choice.algorithm),
               counter_row(choice.rival.algorithm)};
}

void forget_shape() noexcept { last.valid = false; }

}  // namespace agx::pmpi
