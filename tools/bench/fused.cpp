// agx-bench --fused K: K separate calls, one fused call, K MPI_Allgather calls
// (tools/bench/fused.hpp).

#include "fused.hpp"
#include "timing.hpp"

#include <agx/agx.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace bench {

namespace {

unsigned char value(int k, int rank, std::size_t i) {
  return static_cast<unsigned char>((k * 131 + rank * 17 + static_cast<int>(i % 251)) & 0xFF);
}

/// K members of `bytes` per rank: send blocks and receive buffers.
struct Members {
  int k = 0, nranks = 1, rank = 0;
  std::size_t bytes = 0;
  std::vector<std::vector<unsigned char>> send, recv;

  Members(int k_, std::size_t bytes_, int nranks_, int rank_)
      : k(k_), nranks(nranks_), rank(rank_), bytes(bytes_),
        send(static_cast<std::size_t>(k_)), recv(static_cast<std::size_t>(k_)) {
    for (int m = 0; m < k; ++m) {
      auto& s = send[static_cast<std::size_t>(m)];
      s.resize(bytes);
      for (std::size_t i = 0; i < bytes; ++i) s[i] = value(m, rank, i);
      recv[static_cast<std::size_t>(m)].assign(bytes * static_cast<std::size_t>(nranks), 0);
    }
  }
  void clear() {
    for (auto& r : recv) std::fill(r.begin(), r.end(), 0);
  }
  bool check() const {
    for (int m = 0; m < k; ++m)
      for (int r = 0; r < nranks; ++r)
        for (std::size_t i = 0; i < bytes; ++i)
          if (recv[static_cast<std::size_t>(m)][static_cast<std::size_t>(r) * bytes + i] != value(m, r, i))
            return false;
    return true;
  }
};

/// Verifies `call` once (which also warms up), then times it; returns the median of the
/// slowest rank's seconds per call, or a negative value for a wrong result.
double measure(MPI_Comm comm, const Settings& s, Members& m, const std::function<void()>& call) {
  m.clear();
  const double t0 = MPI_Wtime();
  call();
  double once = MPI_Wtime() - t0;
  int ok = m.check() ? 1 : 0, all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
  if (!all_ok) return -1;
  MPI_Allreduce(MPI_IN_PLACE, &once, 1, MPI_DOUBLE, MPI_MAX, comm);
  const double t = barrier_median(comm, s.passes, once, s.batch_seconds, s.max_iters, call);
  ok = m.check() ? 1 : 0;  // and after the last timed call
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
  return all_ok ? t : -1;
}

int run_one_k(MPI_Comm comm, const Settings& s, int k, std::FILE* csv) {
  int rank = 0, nranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  if (rank == 0)
    std::printf("# agx-bench --fused %d, N=%d: median seconds per K calls (slowest rank)\n"
                "%10s %4s %12s %12s %12s %9s %9s %s\n",
                k, nranks, "bytes", "K", "separate", "fused", "mpi", "fus/sep", "fus/mpi", "ran");
  int bad = 0;
  for (const std::size_t bytes : s.sizes) {
    Members m(k, bytes, nranks, rank);
    agx::Algorithm ran = agx::Algorithm::automatic;
    agx::FusedWay way = agx::FusedWay::direct;
    std::size_t calls = 0;
    std::string error;
    double sep = -1, fus = -1, mpi = -1;
    try {
      sep = measure(comm, s, m, [&] {
        for (int j = 0; j < k; ++j)
          agx::allgather(comm, std::span<const unsigned char>(m.send[static_cast<std::size_t>(j)]),
                         std::span<unsigned char>(m.recv[static_cast<std::size_t>(j)]));
      });
      agx::Group g(comm);
      for (int j = 0; j < k; ++j)
        g.add(std::span<const unsigned char>(m.send[static_cast<std::size_t>(j)]),
              std::span<unsigned char>(m.recv[static_cast<std::size_t>(j)]));
      fus = measure(comm, s, m, [&] {
        const agx::FusedResult r = g.run();
        ran = r.algorithm;
        way = r.way;
        calls = r.calls;
      });
    } catch (const agx::Error& e) {
      error = e.what();
    }
    if (s.mpi)
      mpi = measure(comm, s, m, [&] {
        const int c = static_cast<int>(bytes);
        for (int j = 0; j < k; ++j)
          PMPI_Allgather(m.send[static_cast<std::size_t>(j)].data(), c, MPI_BYTE,
                         m.recv[static_cast<std::size_t>(j)].data(), c, MPI_BYTE, comm);
      });
    const bool wrong = sep < 0 || fus < 0 || (s.mpi && mpi < 0) || !error.empty();
    bad += wrong;
    if (rank != 0) continue;
    const std::string status = !error.empty() ? "error: " + error : wrong ? "WRONG" : "ok";
    // What the fused call ran: the algorithm and way of its largest call, and how many
    // all-gathers the group ran as (1: fused as one; K: every member alone).
    const std::string algorithm(agx::to_string(ran));
    std::printf("%10zu %4d %12.3e %12.3e %12.3e %9.2f %9.2f %s %s, %zu call%s%s\n", bytes, k, sep, fus,
                mpi, sep > 0 ? fus / sep : 0.0, mpi > 0 ? fus / mpi : 0.0, algorithm.c_str(),
                agx::to_string(way), calls, calls == 1 ? "" : "s",
                status == "ok" ? "" : ("  " + status).c_str());
    if (csv != nullptr)
      std::fprintf(csv, "%d,%d,%zu,%.9e,%.9e,%.9e,%s,%s,%zu,%s\n", nranks, k, bytes, sep, fus, mpi,
                   algorithm.c_str(), agx::to_string(way), calls, status.c_str());
  }
  if (rank == 0 && bad > 0) std::fprintf(stderr, "agx-bench: K=%d: %d size(s) WRONG or failed\n", k, bad);
  return bad;
}

}  // namespace


int run_fused(MPI_Comm comm, const Settings& s) {
  int rank = 0, nranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  std::FILE* csv = nullptr;
  if (rank == 0 && !s.csv.empty()) {
    csv = std::fopen(s.csv.c_str(), "w");
    if (csv != nullptr) std::fprintf(csv, "# %s\nN,K,bytes,separate_s,fused_s,mpi_s,algorithm,way,calls,status\n", s.command_line.c_str());
  }
  const std::vector<int> ks = s.fused_ks.empty() ? std::vector<int>{s.fused} : s.fused_ks;
  int bad = 0;
  for (const int k : ks) bad += run_one_k(comm, s, k, csv);
  if (csv != nullptr) std::fclose(csv);
  return bad > 0 ? 1 : 0;
}

}  // namespace bench
