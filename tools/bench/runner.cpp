// Running candidates: one call of each kind, verification, interleaved timed batches.

#include "runner.hpp"

#include "timing.hpp"

#include <agx/agx.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <span>

namespace bench {
namespace {

struct Context {
  MPI_Comm comm;
  int rank, nranks;
  bool nonblocking;
  const std::string& corrupt;
  const Problem& p;
  Buffers& b;
};

std::string call_once(const Context& x, const Candidate& c);

// One call; returns the name of what ran. With --corrupt, the last rank's last received
// byte of that candidate is flipped afterwards.
std::string call(const Context& x, const Candidate& c) {
  std::string ran = call_once(x, c);
  if (c.name == x.corrupt && x.rank == x.nranks - 1 && x.p.total_bytes > 0)
    x.b.recv()[x.p.total_bytes - 1] ^= 0x5A;
  return ran;
}

// The MPI library's entry points of one call kind: PMPI_ (the library's own) or the
// normal symbols (the interposer's when it is preloaded).
struct MpiCalls {
  decltype(&PMPI_Allgather) allgather;
  decltype(&PMPI_Allgatherv) allgatherv;
  decltype(&PMPI_Iallgather) iallgather;
  decltype(&PMPI_Iallgatherv) iallgatherv;
  decltype(&PMPI_Wait) wait;
};
constexpr MpiCalls library_calls{PMPI_Allgather, PMPI_Allgatherv, PMPI_Iallgather, PMPI_Iallgatherv, PMPI_Wait};
constexpr MpiCalls normal_calls{MPI_Allgather, MPI_Allgatherv, MPI_Iallgather, MPI_Iallgatherv, MPI_Wait};

// One MPI all-gather of the problem, blocking or started and waited for.
void mpi_call(const Context& x, const MpiCalls& m, const void* send) {
  const Problem& p = x.p;
  const auto own = static_cast<std::size_t>(x.rank);
  const int count = p.int_counts[own];
  void* recv = x.b.recv();
  const bool regular = p.form == Form::regular;
  if (!x.nonblocking) {
    if (regular) m.allgather(send, count, MPI_BYTE, recv, count, MPI_BYTE, x.comm);
    else m.allgatherv(send, count, MPI_BYTE, recv, p.int_counts.data(), p.int_displs.data(), MPI_BYTE, x.comm);
    return;
  }
  MPI_Request r = MPI_REQUEST_NULL;
  if (regular) m.iallgather(send, count, MPI_BYTE, recv, count, MPI_BYTE, x.comm, &r);
  else m.iallgatherv(send, count, MPI_BYTE, recv, p.int_counts.data(), p.int_displs.data(), MPI_BYTE, x.comm, &r);
  m.wait(&r, MPI_STATUS_IGNORE);
}

std::string call_once(const Context& x, const Candidate& c) {
  const Problem& p = x.p;
  const auto own = static_cast<std::size_t>(x.rank);
  const void* send = p.in_place ? MPI_IN_PLACE : x.b.send().data();
  switch (c.kind) {
    case Kind::mpi:
      mpi_call(x, library_calls, send);
      return c.name;
    case Kind::dropin:  // the normal symbol: the interposer's when it is preloaded
      mpi_call(x, normal_calls, send);
      return c.name;
    case Kind::copy_bound: {  // what each rank must write at least, from memory it has
      const auto& src = x.b.source();
      if (!p.in_place) {
        std::memcpy(x.b.recv(), src.data(), p.total_bytes);
      } else {
        const std::size_t at = p.displs[own], end = at + p.counts[own];
        std::memcpy(x.b.recv(), src.data(), at);
        std::memcpy(x.b.recv() + end, src.data() + end, p.total_bytes - end);
      }
      return c.name;
    }
    case Kind::agx: break;
  }
  const agx::Allgather<std::uint8_t> gather(x.comm, {c.algo.id, true, c.algo.radix});
  const std::span<std::uint8_t> recv(x.b.recv(), p.total_bytes);
  const std::span<const std::uint8_t> send_span(x.b.send());
  agx::Algorithm ran{};
  if (x.nonblocking) {
    agx::Request r = p.form == Form::regular
                         ? (p.in_place ? gather.start_in_place(recv) : gather.start(send_span, recv))
                         : (p.in_place ? gather.start_v_in_place(recv, p.counts, p.displs)
                                       : gather.start_v(send_span, recv, p.counts, p.displs));
    ran = r.algorithm();
    r.wait();
  } else if (p.form == Form::regular) {
    ran = p.in_place ? gather.in_place(recv) : gather(send_span, recv);
  } else {
    ran = p.in_place ? gather.v_in_place(recv, p.counts, p.displs) : gather.v(send_span, recv, p.counts, p.displs);
  }
  return ran == c.algo.id ? agx::to_string(c.algo) : std::string(agx::to_string(ran));
}

bool all_ranks(MPI_Comm comm, bool mine) {
  int v = mine ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_LAND, comm);
  return v != 0;
}

// The drop-in call that verify() just made: who took it, the same on every rank.
// `took`: this rank's answer from the interposer's counters (dropin.hpp).
void name_dropin(const Context& x, const Settings& s, const Interposer& ip, const std::string& took,
                 Outcome& o) {
  // 0: not counted once, 1: passed to MPI, 2 + i: agx ran algorithm i.
  int code = took.empty() ? 0 : took == "mpi" ? 1 : 2;
  if (code == 2) {
    for (const auto& info : agx::algorithms()) {
      if (info.name == took) break;
      ++code;
    }
  }
  int range[2] = {-code, code};
  MPI_Allreduce(MPI_IN_PLACE, range, 2, MPI_INT, MPI_MAX, x.comm);
  if (-range[0] != range[1]) {
    o.status = "error";
    o.note = "ranks disagree on who took MPI_Allgather (agx's interposer on some and MPI on others)";
  } else if (!ip.loaded()) {
    o.ran = "mpi";
    o.note = "libagx_pmpi.so not loaded: MPI_Allgather is the MPI library's";
  } else if (code == 0) {
    o.status = "error";
    o.note = "libagx_pmpi.so is loaded but its counters did not count this call once";
  } else if (code == 1) {
    o.ran = "mpi";
    o.note = "libagx_pmpi.so passed the call to the MPI library";
    if (s.dropin == Dropin::require) o.status = "error";
  } else {
    o.ran = took;
    o.note = "through libagx_pmpi.so";
  }
}

// Verifies one candidate from a zeroed buffer; fills status, note and ran.
void verify(const Context& x, const Settings& s, const Interposer& ip, const Candidate& c, Outcome& o) {
  x.b.reset();
  std::string error, took;
  try {
    const auto before = ip.counts();
    o.ran = call(x, c);
    took = ip.took(before, ip.counts());
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!all_ranks(x.comm, error.empty())) {
    o.status = "error";
    o.note = error.empty() ? "failed on another rank" : error;
    return;
  }
  if (c.kind == Kind::dropin) name_dropin(x, s, ip, took, o);
  if (!all_ranks(x.comm, x.b.check())) o.status = "WRONG";
}

// A call that is timed: verified before, so an exception is a library bug.
Call timed_call(const Context& x, const Candidate& c) {
  return [&x, &c] {
    try {
      call(x, c);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "agx-bench: %s failed while timed after a good first call: %s\n",
                   c.name.c_str(), e.what());
      MPI_Abort(x.comm, 3);
    }
  };
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

std::vector<Candidate> make_candidates(const Settings& s, const Interposer& ip) {
  std::vector<Candidate> out;
  if (s.mpi) out.push_back({Kind::mpi, "mpi", {}});
  if (s.dropin == Dropin::on || s.dropin == Dropin::require ||
      (s.dropin == Dropin::automatic && ip.loaded()))
    out.push_back({Kind::dropin, "mpi-agx", {}});
  for (const auto& name : s.algos) out.push_back({Kind::agx, name, *agx::parse_algorithm_choice(name)});
  if (s.copy_bound) out.push_back({Kind::copy_bound, "copy-bound", {}});
  return out;
}

std::vector<Outcome> run_point(MPI_Comm comm, const Settings& s, const RunEnv& env,
                               const Problem& p, const std::vector<Candidate>& cands,
                               const std::function<void(std::size_t, Method, int)>& tick) {
  int rank = 0, nranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  Buffers b(p, rank, s.alloc);
  const Context x{comm, rank, nranks, s.nonblocking, s.corrupt, p, b};
  std::vector<Outcome> checked(cands.size());
  for (std::size_t i = 0; i < cands.size(); ++i) {
    if ((cands[i].kind == Kind::mpi || cands[i].kind == Kind::dropin) && !p.fits_int()) {
      checked[i].status = "skip";
      checked[i].note = "counts exceed INT_MAX";
      continue;
    }
    verify(x, s, env.ip, cands[i], checked[i]);
  }

  // Untimed calls first (--warmup): a library's first calls of a size may learn (agx's
  // copy and wait trials, docs/hierarchy.md), as OSU's skipped iterations allow for.
  for (std::size_t i = 0; i < cands.size(); ++i) {
    if (checked[i].status != "ok") continue;
    const Call warm = timed_call(x, cands[i]);  // (an error on one rank aborts the job, as timed)
    for (int w = 0; w < s.warmup; ++w) warm();
  }

  // Iterations per batch from a probe of the first runnable candidate (the MPI
  // library when present), decided on rank 0 for everyone.
  const auto first = std::find_if(checked.begin(), checked.end(), [](const Outcome& o) { return o.status == "ok"; });
  double probe = 1e-3;
  if (first != checked.end()) {
    const Candidate& c = cands[static_cast<std::size_t>(first - checked.begin())];
    MPI_Barrier(comm);
    probe = MPI_Wtime();
    for (int i = 0; i < 3; ++i) call(x, c);
    probe = (MPI_Wtime() - probe) / 3;
  }
  MPI_Bcast(&probe, 1, MPI_DOUBLE, 0, comm);
  const double want = std::max(3.0, s.batch_seconds / std::max(probe, 1e-7));
  const int iters = static_cast<int>(std::min(want, static_cast<double>(s.max_iters)));

  // The window method sizes each candidate's window from its own time (barrier method,
  // median of 5 calls); a batch that misses more than half of its starts doubles it for
  // the next passes, three times at most.
  const bool windowed = std::find(s.methods.begin(), s.methods.end(), Method::window) != s.methods.end();
  std::vector<double> estimate(cands.size(), 0.0);
  std::vector<int> doublings(cands.size(), 0);
  std::vector<double> leads(cands.size(), 0.0);  // window_batch's lead, kept across passes
  if (windowed)
    for (std::size_t i = 0; i < cands.size(); ++i)
      if (checked[i].status == "ok") estimate[i] = median_of(barrier_batch(comm, 5, timed_call(x, cands[i])));

  const std::size_t nc = cands.size();
  std::vector<Outcome> out;
  for (const Method m : s.methods)
    for (const Outcome& o : checked) {
      out.push_back(o);
      out.back().method = m;
    }
  for (int pass = 0; pass < s.passes; ++pass)
    for (std::size_t i = 0; i < nc; ++i) {
      if (checked[i].status != "ok") continue;
      const Call timed = timed_call(x, cands[i]);
      for (std::size_t mi = 0; mi < s.methods.size(); ++mi) {
        const Method m = s.methods[mi];
        Outcome& o = out[mi * nc + i];
        tick(i, m, pass);
        o.iters = iters;
        std::vector<double> t;
        if (m == Method::barrier) {
          t = barrier_batch(comm, iters, timed);
        } else if (m == Method::osu) {
          t = osu_batch(comm, iters, timed);
        } else {  // clocks again before every batch: drift only matters within one
          const ClockSync sync = sync_clocks(comm, s.sync_rounds);
          const double window = s.window_factor * estimate[i] + 4 * sync.uncertainty + 1e-6;
          WindowTimes w = window_batch(comm, iters, window, sync, env.oversubscribed, timed, leads[i]);
          if (2 * w.invalid > iters && doublings[i] < 3) {
            estimate[i] *= 2;
            ++doublings[i];
          }
          o.invalid += w.invalid;
          o.window_s = std::max(o.window_s, window);
          o.sync_s = std::max(o.sync_s, sync.uncertainty);
          t = std::move(w.samples);
        }
        o.samples.insert(o.samples.end(), t.begin(), t.end());
      }
    }
  // One more call after all the timed ones must again be right (catches state that goes
  // bad under repetition: cached plans, reused segments).
  for (std::size_t i = 0; i < nc; ++i) {
    if (checked[i].status != "ok") continue;
    b.reset();
    call(x, cands[i]);
    if (!all_ranks(comm, b.check()))
      for (std::size_t mi = 0; mi < s.methods.size(); ++mi) out[mi * nc + i].status = "WRONG";
  }
  return out;
}

}  // namespace bench
