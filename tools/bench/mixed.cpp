// agx-bench --mixed: per step, one all-gather per entry of the size list (each with its
// own send and receive buffers, as a model's layers have theirs), every result verified,
// the step timed as a whole and call by call (tools/bench/mixed.hpp).
//
// Candidates: mpi (PMPI_Allgather, the MPI library itself), mpi-agx (MPI_Allgather: the
// drop-in when libagx_pmpi.so is preloaded) and auto (agx::allgather_bytes). Each pass
// runs --steps steps of every candidate in turn (candidates alternate, so that all see
// the same machine state); a step starts after a barrier and its time is the slowest
// rank's. Before the first pass each candidate runs two untimed steps.

#include "mixed.hpp"

#include "dropin.hpp"

#include <agx/agx.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace bench {

namespace {

unsigned char value(std::size_t call, int rank, std::size_t i) {
  return static_cast<unsigned char>((call * 37 + static_cast<std::size_t>(rank) * 101 + i % 251) & 0xFF);
}

struct Step {
  int nranks = 1, rank = 0;
  std::vector<std::size_t> block;  // bytes per rank of each call
  std::vector<std::vector<unsigned char>> send, recv;

  Step(const std::vector<std::size_t>& totals, int nranks_, int rank_) : nranks(nranks_), rank(rank_) {
    for (std::size_t c = 0; c < totals.size(); ++c) {
      const std::size_t b = std::max<std::size_t>(1, totals[c] / static_cast<std::size_t>(nranks));
      block.push_back(b);
      std::vector<unsigned char> s(b);
      for (std::size_t i = 0; i < b; ++i) s[i] = value(c, rank, i);
      send.push_back(std::move(s));
      recv.emplace_back(b * static_cast<std::size_t>(nranks), 0);
    }
  }
  void clear() {
    for (auto& r : recv) std::memset(r.data(), 0, r.size());
  }
  bool check() const {
    for (std::size_t c = 0; c < block.size(); ++c)
      for (int r = 0; r < nranks; ++r)
        for (std::size_t i = 0; i < block[c]; ++i)
          if (recv[c][static_cast<std::size_t>(r) * block[c] + i] != value(c, r, i)) return false;
    return true;
  }
};

struct Candidate {
  std::string name;
  std::function<void(Step&, std::size_t)> call;
};

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

std::string size_text(std::size_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= (1u << 10) && b % (1u << 10) == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

}  // namespace

int run_mixed(MPI_Comm comm, const Settings& s) {
  int rank = 0, nranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  const Interposer ip;
  Step step(s.mixed, nranks, rank);
  const std::size_t calls = step.block.size();

  std::vector<Candidate> cands;
  if (s.mpi)
    cands.push_back({"mpi", [&](Step& st, std::size_t c) {
                       const int n = static_cast<int>(st.block[c]);
                       PMPI_Allgather(st.send[c].data(), n, MPI_BYTE, st.recv[c].data(), n, MPI_BYTE, comm);
                     }});
  if (s.dropin == Dropin::on || s.dropin == Dropin::require ||
      (s.dropin == Dropin::automatic && ip.loaded()))
    cands.push_back({"mpi-agx", [&](Step& st, std::size_t c) {
                       const int n = static_cast<int>(st.block[c]);
                       MPI_Allgather(st.send[c].data(), n, MPI_BYTE, st.recv[c].data(), n, MPI_BYTE, comm);
                     }});
  cands.push_back({"auto", [&](Step& st, std::size_t c) {
                     agx::allgather_bytes(comm, agx::Buffers{st.send[c].data(), st.recv[c].data(), false},
                                          agx::Layout::uniform(nranks, st.block[c]));
                   }});

  // times[cand][position]: per step; position `calls` is the whole step.
  std::vector<std::vector<std::vector<double>>> times(
      cands.size(), std::vector<std::vector<double>>(calls + 1));
  std::vector<int> right(cands.size(), 1);
  std::vector<double> stamp(calls + 1), spans(calls + 1);
  auto run_step = [&](std::size_t k, bool timed) {
    step.clear();
    MPI_Barrier(comm);
    stamp[0] = MPI_Wtime();
    for (std::size_t c = 0; c < calls; ++c) {
      cands[k].call(step, c);
      stamp[c + 1] = MPI_Wtime();
    }
    if (cands[k].name == s.corrupt) step.recv.back()[0] ^= 1;  // self-test (--corrupt)
    for (std::size_t c = 0; c < calls; ++c) spans[c] = stamp[c + 1] - stamp[c];
    spans[calls] = stamp[calls] - stamp[0];
    MPI_Allreduce(MPI_IN_PLACE, spans.data(), static_cast<int>(calls + 1), MPI_DOUBLE, MPI_MAX, comm);
    int ok = step.check() ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
    right[k] &= ok;
    if (timed)
      for (std::size_t p = 0; p <= calls; ++p) times[k][p].push_back(spans[p]);
  };
  for (std::size_t k = 0; k < cands.size(); ++k)
    for (int w = 0; w < 2; ++w) run_step(k, false);
  for (int pass = 0; pass < s.passes; ++pass)
    for (std::size_t k = 0; k < cands.size(); ++k)
      for (int st = 0; st < s.steps; ++st) run_step(k, true);

  const bool all_right = std::all_of(right.begin(), right.end(), [](int r) { return r != 0; });
  if (rank != 0) return all_right ? 0 : 1;
  std::string list;
  for (const std::size_t t : s.mixed) {
    if (!list.empty()) list.push_back(',');
    list.append(size_text(t));
  }
  std::printf("# agx-bench --mixed, N=%d: steps of %zu all-gathers, totals %s bytes; %d passes of %d "
              "steps per candidate, interleaved; the slowest rank's times\n",
              nranks, calls, list.c_str(), s.passes, s.steps);
  const std::size_t ref = cands.front().name == "mpi" ? 0 : cands.size();
  std::printf("%-8s %12s %12s %12s %9s %s\n", "step", "median_ms", "p10_ms", "p90_ms", "ratio", "verified");
  for (std::size_t k = 0; k < cands.size(); ++k) {
    const double med = quantile(times[k][calls], 0.5);
    const double base = ref < cands.size() ? quantile(times[ref][calls], 0.5) : 0;
    std::printf("%-8s %12.3f %12.3f %12.3f %9.3f %s\n", cands[k].name.c_str(), med * 1e3,
                quantile(times[k][calls], 0.1) * 1e3, quantile(times[k][calls], 0.9) * 1e3,
                base > 0 ? med / base : 0.0, right[k] ? "yes" : "WRONG");
  }
  std::printf("per call, median us (ratio to mpi):\n%-6s %8s", "call", "total");
  for (const auto& c : cands) std::printf(" %18s", c.name.c_str());
  std::printf("\n");
  for (std::size_t p = 0; p < calls; ++p) {
    std::printf("%-6zu %8s", p, size_text(step.block[p] * static_cast<std::size_t>(nranks)).c_str());
    for (std::size_t k = 0; k < cands.size(); ++k) {
      const double med = quantile(times[k][p], 0.5);
      const double base = ref < cands.size() ? quantile(times[ref][p], 0.5) : 0;
      std::printf(" %10.1f (%5.2f)", med * 1e6, base > 0 ? med / base : 0.0);
    }
    std::printf("\n");
  }
  if (!s.csv.empty()) {
    if (std::FILE* f = std::fopen(s.csv.c_str(), "w")) {
      std::fprintf(f, "# %s\nN,candidate,position,total_bytes,samples,median_s,p10_s,p90_s,verified\n",
                   s.command_line.c_str());
      for (std::size_t k = 0; k < cands.size(); ++k)
        for (std::size_t p = 0; p <= calls; ++p) {
          const std::size_t total = p < calls ? step.block[p] * static_cast<std::size_t>(nranks) : 0;
          std::fprintf(f, "%d,%s,%s,%zu,%zu,%.9e,%.9e,%.9e,%s\n", nranks, cands[k].name.c_str(),
                       p < calls ? std::to_string(p).c_str() : "step", total, times[k][p].size(),
                       quantile(times[k][p], 0.5), quantile(times[k][p], 0.1), quantile(times[k][p], 0.9),
                       right[k] ? "yes" : "WRONG");
        }
      std::fclose(f);
    } else {
      std::fprintf(stderr, "agx-bench: cannot write %s\n", s.csv.c_str());
      return 1;
    }
  }
  if (!all_right) std::fprintf(stderr, "agx-bench --mixed: a result was WRONG (see the verified column)\n");
  return all_right ? 0 : 1;
}

}  // namespace bench
