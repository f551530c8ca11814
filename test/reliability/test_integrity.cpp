// Integrity checks (AGX_INTEGRITY) and their test seam (AGX_TEST_FLIP=<rank>:<round>).
//
//   test_integrity [--expect-detection | --expect-unnoticed]
//
// For every algorithm (forced), the regular and v form (with empty blocks), in place and
// out of place, blocking, nonblocking and persistent calls, every rank checks its result
// and the error it got against a prediction made from the schedules of all ranks
// (planned here with agx's own planners):
//   the flip   rank R flips bit 0 of the first non-empty block it receives in round K
//              (lib/hier's paths: round 0, the first non-empty block after its own);
//   spreading  a rank that receives that block later from a rank that holds the flipped
//              copy holds it flipped too.
// --expect-detection (run with AGX_INTEGRITY=1): rank R raises MPI_ERR_OTHER "block B
// (from rank B) corrupted: received from peer P in round K of algorithm A, crc expected
// X got Y"; the ranks it spread to raise "arrived marked corrupted: rank R found it
// corrupted in round K"; everybody else succeeds; every rank's data is as predicted.
// --expect-unnoticed (AGX_INTEGRITY unset): nobody raises, and the flipped ranks hold
// the corrupted data: without the checks the corruption goes unnoticed.
// Without AGX_TEST_FLIP: every call must succeed with exact data (no false alarms).

#include <agx/agx.hpp>

#include "core/planner.hpp"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <regex>
#include <string>
#include <vector>

using agx::Algorithm;

namespace {

int rank = 0, n = 0, failed = 0, checked = 0, detected = 0, flipped = 0;
enum class Mode { clean, detection, unnoticed } mode = Mode::clean;
std::optional<std::pair<int, int>> flip;  // AGX_TEST_FLIP

struct Form {
  const char* name;
  bool v, in_place;
};

std::vector<int> counts_of(const Form& f) {
  std::vector<int> c(static_cast<std::size_t>(n));
  for (int b = 0; b < n; ++b) c[static_cast<std::size_t>(b)] = f.v ? (b % 3 == 1 ? 0 : 2 + b) : 5;
  return c;
}

int value(int b, int i, unsigned salt) { return static_cast<int>(salt) * 100000 + 1000 * b + i; }

// Where the flip happens and to whom it spreads: the block, and per rank the round in
// which that rank came to hold the flipped copy and the peer it came from (-1: never).
struct Prediction {
  int block = -1, flip_peer = -1;
  std::vector<int> bad_round, bad_peer;
  bool flipped(int r) const { return bad_round[static_cast<std::size_t>(r)] >= 0; }
};

Prediction predict(agx::AlgorithmChoice choice, const std::vector<int>& counts) {
  const Algorithm a = choice.id;
  Prediction p;
  p.bad_round.assign(static_cast<std::size_t>(n), -1);
  p.bad_peer.assign(static_cast<std::size_t>(n), -1);
  if (!flip || flip->first >= n) return p;
  const int R = flip->first, K = flip->second;
  if (a == Algorithm::shared_memory || a == Algorithm::hierarchical) {
    if (K != 0) return p;
    for (int k = 1; k < n && p.block < 0; ++k)
      if (counts[static_cast<std::size_t>((R + k) % n)] > 0) p.block = (R + k) % n;
    if (p.block >= 0) p.bad_round[static_cast<std::size_t>(R)] = 0;
    return p;
  }
  std::vector<agx::Schedule> s;
  for (int r = 0; r < n; ++r) s.push_back(agx::planner_for(a).plan({n, r, choice.radix}));
  const auto& mine = s[static_cast<std::size_t>(R)];
  if (static_cast<std::size_t>(K) >= mine.rounds.size()) return p;
  for (const agx::Transfer& t : mine.rounds[static_cast<std::size_t>(K)].recvs)
    for (const agx::BlockSpan& sp : t.blocks)
      for (int b = sp.first; b < sp.first + sp.count && p.block < 0; ++b)
        if (counts[static_cast<std::size_t>(b)] > 0) p.block = b, p.flip_peer = t.peer;
  if (p.block < 0) return p;
  p.bad_round[static_cast<std::size_t>(R)] = K;
  std::size_t rounds = 0;
  for (const auto& x : s) rounds = std::max(rounds, x.rounds.size());
  for (std::size_t r = static_cast<std::size_t>(K) + 1; r < rounds; ++r)
    for (int x = 0; x < n; ++x) {
      const auto& sx = s[static_cast<std::size_t>(x)];
      if (r >= sx.rounds.size()) continue;
      for (const agx::Transfer& t : sx.rounds[r].recvs)
        for (const agx::BlockSpan& sp : t.blocks)
          if (p.block >= sp.first && p.block < sp.first + sp.count) {
            const int since = p.bad_round[static_cast<std::size_t>(t.peer)];
            if (since >= 0 && static_cast<std::size_t>(since) < r) {
              p.bad_round[static_cast<std::size_t>(x)] = static_cast<int>(r);
              p.bad_peer[static_cast<std::size_t>(x)] = t.peer;
            }
          }
    }
  return p;
}

void fail(const std::string& where, const std::string& what) {
  ++failed;
  if (failed <= 20) std::fprintf(stderr, "FAIL rank %d of %d: %s: %s\n", rank, n, where.c_str(), what.c_str());
}

void run(agx::AlgorithmChoice choice, const Form& f, const char* call, unsigned salt) {
  const Algorithm a = choice.id;
  const std::string algo(agx::to_string(a));  // reports name the algorithm, not its radix
  const std::string where = agx::to_string(choice) + " " + f.name + " " + call;
  const std::vector<int> counts = counts_of(f);
  std::vector<int> displs(counts.size());
  int total = 0;
  for (std::size_t b = 0; b < counts.size(); ++b) displs[b] = total, total += counts[b];
  const int mine = counts[static_cast<std::size_t>(rank)];
  std::vector<int> send(static_cast<std::size_t>(mine)), recv(static_cast<std::size_t>(total), -1);
  for (int i = 0; i < mine; ++i) send[static_cast<std::size_t>(i)] = value(rank, i, salt);
  if (f.in_place)
    for (int i = 0; i < mine; ++i)
      recv[static_cast<std::size_t>(displs[static_cast<std::size_t>(rank)] + i)] = value(rank, i, salt);
  agx::Allgather<int> gather(MPI_COMM_WORLD, {a, true, choice.radix});
  std::string error;
  int error_class = MPI_SUCCESS;
  const std::span<const int> s(send);
  const std::span<int> r(recv);
  try {
    const std::string how = call;
    if (how == "blocking") {
      if (f.v && f.in_place) gather.v_in_place(r, counts, displs);
      else if (f.v) gather.v(s, r, counts, displs);
      else if (f.in_place) gather.in_place(r);
      else gather(s, r);
    } else if (how == "start") {
      agx::Request q = f.v ? (f.in_place ? gather.start_v_in_place(r, counts, displs)
                                         : gather.start_v(s, r, counts, displs))
                           : (f.in_place ? gather.start_in_place(r) : gather.start(s, r));
      q.wait();
    } else {
      agx::Plan p = f.v ? (f.in_place ? gather.plan_v_in_place(r, counts, displs)
                                      : gather.plan_v(s, r, counts, displs))
                        : (f.in_place ? gather.plan_in_place(r) : gather.plan(s, r));
      p.start();
      p.wait();
    }
  } catch (const agx::Error& e) {
    error = e.what();
    error_class = e.error_class();
  }
  ++checked;

  const Prediction p = predict(choice, counts);
  const bool flipped_here = p.block >= 0 && p.flipped(rank);
  if (flipped_here) ++flipped;
  // The data: exact, except the flipped copy of the block where the flip reached.
  for (int b = 0; b < n; ++b)
    for (int i = 0; i < counts[static_cast<std::size_t>(b)]; ++i) {
      int want = value(b, i, salt);
      if (flipped_here && b == p.block && i == 0) want ^= 1;
      const int got = recv[static_cast<std::size_t>(displs[static_cast<std::size_t>(b)] + i)];
      if (got != want) {
        fail(where, "block " + std::to_string(b) + " element " + std::to_string(i) + " is " +
                        std::to_string(got) + ", want " + std::to_string(want));
        return;
      }
    }
  // The error.
  std::string want;  // a regular expression; empty: no error
  if (mode == Mode::detection && flipped_here) {
    const std::string B = std::to_string(p.block);
    const std::string head = "agx \\(AGX_INTEGRITY\\): block " + B + " \\(from rank " + B + "\\) ";
    const bool hier = a == Algorithm::shared_memory || a == Algorithm::hierarchical;
    const int R = flip->first, K = flip->second;
    if (hier)
      want = head + "corrupted: in the shared-memory stage of algorithm " + algo +
             " \\(end-to-end check after the call\\), crc expected 0x[0-9a-f]{8} got 0x[0-9a-f]{8}";
    else if (rank == R)
      want = head + "corrupted: received from peer " + std::to_string(p.flip_peer) + " in round " +
             std::to_string(K) + " of algorithm " + algo + ", crc expected 0x[0-9a-f]{8} got 0x[0-9a-f]{8}";
    else
      want = head + "arrived marked corrupted: rank " + std::to_string(R) +
             " found it corrupted in round " + std::to_string(K) + " \\(received from peer " +
             std::to_string(p.bad_peer[static_cast<std::size_t>(rank)]) + " in round " +
             std::to_string(p.bad_round[static_cast<std::size_t>(rank)]) + " of algorithm " + algo + "\\)";
  }
  if (want.empty()) {
    if (!error.empty()) fail(where, "unexpected error: " + error);
    return;
  }
  if (error.empty()) {
    fail(where, "no error; wanted " + want);
  } else if (error_class != MPI_ERR_OTHER || !std::regex_match(error, std::regex(want))) {
    fail(where, "error class " + std::to_string(error_class) + " '" + error + "', wanted '" + want + "'");
  } else {
    ++detected;
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--expect-detection") mode = Mode::detection;
    else if (a == "--expect-unnoticed") mode = Mode::unnoticed;
  }
  if (const char* f = std::getenv("AGX_TEST_FLIP"); f != nullptr && *f != '\0') {
    int r = 0, k = 0;
    if (std::sscanf(f, "%d:%d", &r, &k) == 2) flip = {r, k};
  }
  if ((mode == Mode::clean) != !flip) {
    if (rank == 0) std::fprintf(stderr, "test_integrity: AGX_TEST_FLIP and the mode disagree\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const Form forms[] = {{"regular", false, false}, {"in-place", false, true},
                        {"v", true, false}, {"v-in-place", true, true}};
  unsigned salt = 1;
  for (const agx::AlgorithmChoice& e : agx::algorithm_variants()) {
    const bool hier = !agx::algorithm_info(e.id).point_to_point;
    if (!hier && !agx::planner_for(e.id).unsupported_reason({n, 0, e.radix}).empty()) continue;
    try {  // shared_memory cannot serve ranks of several (virtual) nodes
      agx::choose_algorithm(MPI_COMM_WORLD, agx::Layout::uniform(n, 4), {e.id, true, e.radix});
    } catch (const agx::Error&) {
      continue;
    }
    for (const Form& f : forms)
      for (const char* call : {"blocking", "start", "plan"}) run(e, f, call, salt++);
  }
  int mine[4] = {checked, failed, detected, flipped}, sums[4] = {0, 0, 0, 0};
  MPI_Reduce(mine, sums, 4, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("N=%d: %d calls checked, %d corrupted copies predicted, %d errors raised as "
                "predicted, %d failed\n", n, sums[0], sums[3], sums[2], sums[1]);
    // A flip run in which nothing was flipped or detected would prove nothing.
    if (mode != Mode::clean && sums[3] == 0) {
      std::printf("FAIL: the flip seam never acted\n");
      sums[1] = 1;
    }
    if (mode == Mode::detection && sums[2] != sums[3]) {
      std::printf("FAIL: %d corrupted copies but %d errors\n", sums[3], sums[2]);
      sums[1] = 1;
    }
  }
  MPI_Bcast(&sums[1], 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return sums[1] == 0 ? 0 : 1;
}
