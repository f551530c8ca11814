// Running candidates: one call of each kind, verification, interleaved timed batches.

#include "runner.hpp"

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

std::string call_once(const Context& x, const Candidate& c) {
  const Problem& p = x.p;
  const auto own = static_cast<std::size_t>(x.rank);
  switch (c.kind) {
    case Kind::mpi: {
      const void* send = p.in_place ? MPI_IN_PLACE : x.b.send().data();
      if (p.form == Form::regular)
        PMPI_Allgather(send, p.int_counts[own], MPI_BYTE, x.b.recv(), p.int_counts[own], MPI_BYTE, x.comm);
      else
        PMPI_Allgatherv(send, p.int_counts[own], MPI_BYTE, x.b.recv(), p.int_counts.data(),
                        p.int_displs.data(), MPI_BYTE, x.comm);
      return c.name;
    }
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
  const std::span<const std::uint8_t> send(x.b.send());
  agx::Algorithm ran{};
  if (p.form == Form::regular)
    ran = p.in_place ? gather.in_place(recv) : gather(send, recv);
  else
    ran = p.in_place ? gather.v_in_place(recv, p.counts, p.displs) : gather.v(send, recv, p.counts, p.displs);
  return ran == c.algo.id ? agx::to_string(c.algo) : std::string(agx::to_string(ran));
}

bool all_ranks(MPI_Comm comm, bool mine) {
  int v = mine ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_LAND, comm);
  return v != 0;
}

// Verifies one candidate from a zeroed buffer; fills status, note and ran.
void verify(const Context& x, const Candidate& c, Outcome& o) {
  x.b.reset();
  std::string error;
  try {
    o.ran = call(x, c);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!all_ranks(x.comm, error.empty())) {
    o.status = "error";
    o.note = error.empty() ? "failed on another rank" : error;
    return;
  }
  if (!all_ranks(x.comm, x.b.check())) o.status = "WRONG";
}

// Times `iters` calls; appends the slowest rank's time of each.
void batch(const Context& x, const Candidate& c, int iters, Outcome& o) {
  std::vector<double> t(static_cast<std::size_t>(iters));
  for (auto& ti : t) {
    MPI_Barrier(x.comm);
    const double t0 = MPI_Wtime();
    try {
      call(x, c);
    } catch (const std::exception& e) {  // verified before, so this is a library bug
      std::fprintf(stderr, "agx-bench: %s failed while timed after a good first call: %s\n",
                   c.name.c_str(), e.what());
      MPI_Abort(x.comm, 3);
    }
    ti = MPI_Wtime() - t0;
  }
  MPI_Allreduce(MPI_IN_PLACE, t.data(), iters, MPI_DOUBLE, MPI_MAX, x.comm);
  o.samples.insert(o.samples.end(), t.begin(), t.end());
}

}  // namespace

std::vector<Candidate> make_candidates(const Settings& s) {
  std::vector<Candidate> out;
  if (s.mpi) out.push_back({Kind::mpi, "mpi", {}});
  for (const auto& name : s.algos) out.push_back({Kind::agx, name, *agx::parse_algorithm_choice(name)});
  if (s.copy_bound) out.push_back({Kind::copy_bound, "copy-bound", {}});
  return out;
}

std::vector<Outcome> run_point(MPI_Comm comm, const Settings& s, const Problem& p,
                               const std::vector<Candidate>& cands,
                               const std::function<void(std::size_t, int)>& tick) {
  int rank = 0, nranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  Buffers b(p, rank);
  const Context x{comm, rank, nranks, s.corrupt, p, b};
  std::vector<Outcome> out(cands.size());
  for (std::size_t i = 0; i < cands.size(); ++i) {
    if (cands[i].kind == Kind::mpi && !p.fits_int()) {
      out[i].status = "skip";
      out[i].note = "counts exceed INT_MAX";
      continue;
    }
    verify(x, cands[i], out[i]);
  }

  // Iterations per batch from a probe of the first runnable candidate (the MPI
  // library when present), decided on rank 0 for everyone.
  const auto first = std::find_if(out.begin(), out.end(), [](const Outcome& o) { return o.status == "ok"; });
  double probe = 1e-3;
  if (first != out.end()) {
    const Candidate& c = cands[static_cast<std::size_t>(first - out.begin())];
    MPI_Barrier(comm);
    probe = MPI_Wtime();
    for (int i = 0; i < 3; ++i) call(x, c);
    probe = (MPI_Wtime() - probe) / 3;
  }
  MPI_Bcast(&probe, 1, MPI_DOUBLE, 0, comm);
  const double want = std::max(3.0, s.batch_seconds / std::max(probe, 1e-7));
  const int iters = static_cast<int>(std::min(want, static_cast<double>(s.max_iters)));

  for (int pass = 0; pass < s.passes; ++pass)
    for (std::size_t i = 0; i < cands.size(); ++i) {
      if (out[i].status != "ok") continue;
      tick(i, pass);
      out[i].iters = iters;
      batch(x, cands[i], iters, out[i]);
    }
  // One more call after all the timed ones must again be right (catches state that goes
  // bad under repetition: cached plans, reused segments).
  for (std::size_t i = 0; i < cands.size(); ++i) {
    if (out[i].status != "ok") continue;
    b.reset();
    call(x, cands[i]);
    if (!all_ranks(comm, b.check())) out[i].status = "WRONG";
  }
  return out;
}

}  // namespace bench
