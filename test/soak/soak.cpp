// Soak test: random all-gathers for a while, every result checked.
//
//   soak [--seconds S] [--iterations N] [--seed X] [--only I] [--verbose]
//   (or SOAK_SECONDS, SOAK_ITERATIONS, SOAK_SEED, SOAK_ONLY, SOAK_VERBOSE=1; defaults:
//   20 s, seed from rank 0's clock)
//
// Each iteration draws, from a generator seeded with (seed, iteration) so that every
// rank draws the same: a communicator (world, reversed, two halves, odd/even, a
// duplicate, or a fresh duplicate or split made and freed in the iteration), an
// algorithm (auto or any of agx::algorithm_variants()), an element type (1, 4,
// 8 or 12 bytes), regular or v form (per-rank counts with zeros, blocks in a random
// order with random gaps), in place or not, block sizes from 0 to 400000 elements,
// and a mode: one blocking call, one to four nonblocking calls in flight (completed
// in a per-rank random order, by wait() or test() polling), or a persistent plan
// started one to four times with new data each time. Every result is compared with
// the analytic pattern (pattern.hpp), with sentinel guards around the buffer and in
// every gap. A forced algorithm that cannot serve a call (shared_memory across
// virtual nodes) must be refused with MPI_ERR_ARG; it counts as declined.
//
// Rank 0 decides when time is up and tells the others each iteration. A failure
// prints the seed and iteration; `--seed X --only I` replays that iteration alone.
// The last line counts the calls checked on rank 0 and over all ranks.

#include <agx/agx.hpp>

#include "pattern.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using agx::Algorithm;
using namespace agx_test;

namespace {

int world_rank = 0, world_size = 0;
long checked = 0, declined = 0, failures = 0;
unsigned long long seed = 0;
long iteration = 0;
bool verbose = false;  // --verbose / SOAK_VERBOSE=1: every call on stderr before it runs

// --- the communicators ---------------------------------------------------------------

struct Comm {
  MPI_Comm comm = MPI_COMM_NULL;
  std::string name;
};
std::vector<Comm> pool;

void make_pool() {
  MPI_Comm c = MPI_COMM_NULL;
  pool.push_back({MPI_COMM_WORLD, "world"});
  MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - 1 - world_rank, &c);
  pool.push_back({c, "reversed"});
  MPI_Comm_split(MPI_COMM_WORLD, world_rank < world_size / 2, world_rank, &c);
  pool.push_back({c, world_rank < world_size / 2 ? "lower-half" : "upper-half"});
  MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_size - world_rank, &c);
  pool.push_back({c, world_rank % 2 ? "odd-reversed" : "even-reversed"});
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  pool.push_back({c, "dup"});
}

// --- one call ------------------------------------------------------------------------

constexpr std::size_t elem_sizes[] = {1, 4, 8, 12};
constexpr const char* type_names[] = {"uint8", "uint32", "uint64", "vec3"};

struct Case {
  MPI_Comm comm = MPI_COMM_NULL;
  std::string comm_name;
  int n = 0, r = 0;
  agx::AlgorithmChoice algo;
  int type = 0;
  std::size_t elem = 1;
  bool v = false, in_place = false;
  std::vector<std::size_t> counts, displs;  // elements
  std::size_t total = 0;                    // receive buffer, elements
  unsigned salt = 0;
  std::vector<unsigned char> send;
  std::unique_ptr<Guarded> recv;
  std::vector<long long> vcounts;  // the v arguments as the caller passes them
  std::vector<int> vdispls;

  std::string label() const {
    std::size_t most = 0, sum = 0;
    for (std::size_t c : counts) most = std::max(most, c), sum += c;
    return "comm=" + comm_name + " N=" + std::to_string(n) + " algorithm=" +
           agx::to_string(algo) + " type=" + type_names[type] +
           (v ? " form=v" : " form=regular") + (in_place ? " in-place" : " out-of-place") +
           " elements=" + std::to_string(sum) + " largest-block=" + std::to_string(most);
  }

  // New data for the next start: send buffer (or own block in place) and sentinels.
  void fill_data(unsigned new_salt) {
    salt = new_salt;
    send.resize(counts[static_cast<std::size_t>(r)] * elem);
    fill(reinterpret_cast<std::byte*>(send.data()), salt, r, counts[static_cast<std::size_t>(r)], elem);
    std::memset(recv->data(), sentinel, recv->size());
    if (in_place && !send.empty())
      std::memcpy(recv->data() + displs[static_cast<std::size_t>(r)] * elem, send.data(), send.size());
  }

  bool check(const char* mode) const;
};

void report(const Case& c, const char* mode, const std::string& what) {
  if (failures++ < 20)
    std::fprintf(stderr, "soak FAIL seed %llu iteration %ld world rank %d: %s mode=%s: %s\n",
                 seed, iteration, world_rank, c.label().c_str(), mode, what.c_str());
}

bool Case::check(const char* mode) const {
  long where = 0;
  if (!recv->guards_intact(where)) {
    report(*this, mode, "guard byte changed at byte offset " + std::to_string(where));
    return false;
  }
  std::vector<unsigned char> want(recv->size(), sentinel);
  for (int b = 0; b < n; ++b)
    fill(reinterpret_cast<std::byte*>(want.data()) + displs[static_cast<std::size_t>(b)] * elem,
         salt, b, counts[static_cast<std::size_t>(b)], elem);
  const auto* got = reinterpret_cast<const unsigned char*>(recv->data());
  if (want.empty() || std::memcmp(want.data(), got, want.size()) == 0) {
    ++checked;
    return true;
  }
  std::size_t i = 0;
  while (got[i] == want[i]) ++i;
  std::string owner = "a gap";
  for (int b = 0; b < n; ++b) {
    const std::size_t lo = displs[static_cast<std::size_t>(b)] * elem,
                      hi = lo + counts[static_cast<std::size_t>(b)] * elem;
    if (i >= lo && i < hi) owner = "block " + std::to_string(b);
  }
  report(*this, mode, "first mismatch at byte " + std::to_string(i) + " (in " + owner + ")");
  return false;
}

// Typed access to a Case: the calls of agx::Allgather<T>.
template <class T>
struct Typed {
  static std::span<const T> send(Case& c) {
    return {reinterpret_cast<const T*>(c.send.data()), c.send.size() / sizeof(T)};
  }
  static std::span<T> recv(Case& c) {
    return {reinterpret_cast<T*>(c.recv->data()), c.total};
  }
  static agx::Allgather<T> gather(const Case& c) { return agx::Allgather<T>(c.comm, {c.algo.id, true, c.algo.radix}); }

  static Algorithm blocking(Case& c) {
    const auto g = gather(c);
    if (c.v)
      return c.in_place ? g.v_in_place(recv(c), c.vcounts, c.vdispls)
                        : g.v(send(c), recv(c), c.vcounts, c.vdispls);
    return c.in_place ? g.in_place(recv(c)) : g(send(c), recv(c));
  }
  static agx::Request start(Case& c) {
    const auto g = gather(c);
    if (c.v)
      return c.in_place ? g.start_v_in_place(recv(c), c.vcounts, c.vdispls)
                        : g.start_v(send(c), recv(c), c.vcounts, c.vdispls);
    return c.in_place ? g.start_in_place(recv(c)) : g.start(send(c), recv(c));
  }
  static agx::Plan plan(Case& c) {
    const auto g = gather(c);
    if (c.v)
      return c.in_place ? g.plan_v_in_place(recv(c), c.vcounts, c.vdispls)
                        : g.plan_v(send(c), recv(c), c.vcounts, c.vdispls);
    return c.in_place ? g.plan_in_place(recv(c)) : g.plan(send(c), recv(c));
  }
};

template <class F>
auto by_type(int type, F&& f) {
  switch (type) {
    case 0: return f(Typed<std::uint8_t>{});
    case 1: return f(Typed<std::uint32_t>{});
    case 2: return f(Typed<std::uint64_t>{});
    default: return f(Typed<Vec3>{});
  }
}

// --- drawing -------------------------------------------------------------------------

using Rng = std::mt19937_64;

std::size_t draw(Rng& rng, std::size_t lo, std::size_t hi) {
  return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
}

std::size_t draw_count(Rng& rng) {
  const std::size_t p = draw(rng, 0, 99);
  if (p < 15) return 0;
  if (p < 50) return draw(rng, 1, 16);
  if (p < 85) return draw(rng, 17, 2048);
  if (p < 99) return draw(rng, 2049, 65536);
  return draw(rng, 65537, 400000);
}

// The draws of one call come from a generator of its own, seeded by one draw of the
// iteration's: how many numbers a call draws depends on its communicator's size, which
// differs between the ranks of split communicators, and the iteration's generator must
// stay the same on every rank.
Case draw_case(Rng& iteration_rng, MPI_Comm comm, const std::string& comm_name, unsigned salt) {
  Rng rng(iteration_rng());
  Case c;
  c.comm = comm;
  c.comm_name = comm_name;
  MPI_Comm_size(comm, &c.n);
  MPI_Comm_rank(comm, &c.r);
  static const std::vector<agx::AlgorithmChoice> algos = [] {
    std::vector<agx::AlgorithmChoice> v{{Algorithm::automatic}};
    for (const auto& a : agx::algorithm_variants()) v.push_back(a);
    return v;
  }();
  c.algo = algos[draw(rng, 0, algos.size() - 1)];
  c.type = static_cast<int>(draw(rng, 0, 3));
  c.elem = elem_sizes[c.type];
  c.v = draw(rng, 0, 1) == 1;
  c.in_place = draw(rng, 0, 1) == 1;
  const auto un = static_cast<std::size_t>(c.n);
  c.counts.assign(un, 0);
  c.displs.assign(un, 0);
  // Element budget per call: large blocks are rare, and large calls at many ranks rarer.
  if (!c.v) {
    std::size_t count = draw_count(rng);
    count = std::min(count, std::size_t{1200000} / un);
    for (std::size_t b = 0; b < un; ++b) c.counts[b] = count, c.displs[b] = b * count;
    c.total = count * un;
  } else {
    for (std::size_t b = 0; b < un; ++b)
      c.counts[b] = std::min(draw_count(rng), std::size_t{1200000} / un);
    std::vector<std::size_t> order(un);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::shuffle(order.begin(), order.end(), rng);
    std::size_t at = draw(rng, 0, 5);
    for (std::size_t b : order) {
      c.displs[b] = at;
      at += c.counts[b] + draw(rng, 0, 5);
    }
    c.total = at + draw(rng, 0, 3);
    c.vcounts.assign(c.counts.begin(), c.counts.end());
    c.vdispls.assign(c.displs.begin(), c.displs.end());
  }
  c.recv = std::make_unique<Guarded>(c.total * c.elem);
  c.fill_data(salt);
  return c;
}

// --- the modes -----------------------------------------------------------------------

bool cannot_serve(const agx::Error& e) {
  return e.error_class() == MPI_ERR_ARG && std::strstr(e.what(), "cannot serve") != nullptr;
}

void trace(const Case& c, const char* mode) {
  if (verbose)
    std::fprintf(stderr, "soak: iteration %ld world rank %d: %s mode=%s\n", iteration, world_rank,
                 c.label().c_str(), mode);
}

void run_blocking(Case& c) {
  trace(c, "blocking");
  try {
    by_type(c.type, [&](auto t) { return decltype(t)::blocking(c); });
    c.check("blocking");
  } catch (const agx::Error& e) {
    if (cannot_serve(e)) ++declined;
    else report(c, "blocking", std::string("threw: ") + e.what());
  }
}

void run_nonblocking(std::vector<Case>& cases, Rng& local) {
  std::vector<agx::Request> requests(cases.size());
  std::vector<bool> started(cases.size(), false);
  for (std::size_t k = 0; k < cases.size(); ++k) {
    trace(cases[k], "nonblocking");
    try {
      requests[k] = by_type(cases[k].type, [&](auto t) { return decltype(t)::start(cases[k]); });
      started[k] = true;
    } catch (const agx::Error& e) {
      if (cannot_serve(e)) ++declined;
      else report(cases[k], "nonblocking", std::string("start threw: ") + e.what());
    }
  }
  std::vector<std::size_t> order(cases.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), local);  // differs between ranks: legal
  for (std::size_t k : order) {
    if (!started[k]) continue;
    try {
      if (local() % 2 == 0) requests[k].wait();
      else
        while (!requests[k].test()) sched_yield();
      cases[k].check("nonblocking");
    } catch (const agx::Error& e) {
      report(cases[k], "nonblocking", std::string("wait threw: ") + e.what());
    }
  }
}

void run_persistent(Case& c, int starts, Rng& local, unsigned& salt) {
  trace(c, "persistent");
  agx::Plan p;
  try {
    p = by_type(c.type, [&](auto t) { return decltype(t)::plan(c); });
  } catch (const agx::Error& e) {
    if (cannot_serve(e)) ++declined;
    else report(c, "persistent", std::string("plan threw: ") + e.what());
    return;
  }
  for (int s = 0; s < starts; ++s) {
    if (s > 0) c.fill_data(salt++);
    try {
      p.start();
      if (local() % 2 == 0) p.wait();
      else
        while (!p.test()) sched_yield();
      if (!c.check("persistent")) return;
    } catch (const agx::Error& e) {
      report(c, "persistent", std::string("start " + std::to_string(s) + " threw: ") + e.what());
      return;
    }
  }
}

// One iteration: the same draws on every rank (rng), rank-local completion order (local).
void run_iteration(long it) {
  iteration = it;
  std::seed_seq seq{static_cast<unsigned>(seed), static_cast<unsigned>(seed >> 32),
                    static_cast<unsigned>(it), static_cast<unsigned>(it >> 32)};
  Rng rng(seq);
  Rng local(rng() ^ (static_cast<std::uint64_t>(world_rank) * 0x9E3779B97F4A7C15ull));
  unsigned salt = static_cast<unsigned>(it) * 16u + 1u;

  // A fresh communicator now and then (one iteration in ten): contexts are made and
  // freed with it.
  MPI_Comm fresh = MPI_COMM_NULL;
  std::string fresh_name;
  const std::size_t p = draw(rng, 0, 19);
  std::size_t pick = pool.size();
  if (p == 0) {
    MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
    fresh_name = "fresh-dup";
  } else if (p == 1) {
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 3, -world_rank, &fresh);
    fresh_name = "fresh-split3";
  } else {
    pick = draw(rng, 0, pool.size() - 1);
  }
  auto comm_of = [&](std::size_t k) -> std::pair<MPI_Comm, std::string> {
    if (k >= pool.size()) return {fresh, fresh_name};
    return {pool[k].comm, pool[k].name};
  };

  const std::size_t mode = draw(rng, 0, 9);
  if (mode < 5) {
    auto [comm, name] = comm_of(pick);
    Case c = draw_case(rng, comm, name, salt++);
    run_blocking(c);
  } else if (mode < 8) {
    const std::size_t k = draw(rng, 1, 4);
    std::vector<Case> cases;
    for (std::size_t i = 0; i < k; ++i) {
      auto [comm, name] = comm_of(i == 0 ? pick : draw(rng, 0, pool.size() - 1));
      cases.push_back(draw_case(rng, comm, name, salt++));
    }
    run_nonblocking(cases, local);
  } else {
    auto [comm, name] = comm_of(pick);
    Case c = draw_case(rng, comm, name, salt++);
    run_persistent(c, static_cast<int>(draw(rng, 1, 4)), local, salt);
  }
  if (fresh != MPI_COMM_NULL) MPI_Comm_free(&fresh);
}

const char* option(int argc, char** argv, const char* flag, const char* env) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return argv[i + 1];
  return std::getenv(env);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const char* s = option(argc, argv, "--seconds", "SOAK_SECONDS");
  const char* n = option(argc, argv, "--iterations", "SOAK_ITERATIONS");
  const char* x = option(argc, argv, "--seed", "SOAK_SEED");
  const char* only = option(argc, argv, "--only", "SOAK_ONLY");
  const char* v = std::getenv("SOAK_VERBOSE");
  verbose = (v != nullptr && std::strcmp(v, "1") == 0);
  for (int i = 1; i < argc; ++i) verbose = verbose || std::strcmp(argv[i], "--verbose") == 0;
  const double seconds = s != nullptr ? std::atof(s) : (n != nullptr ? 0.0 : 20.0);
  const long iterations = n != nullptr ? std::atol(n) : -1;
  seed = x != nullptr ? std::strtoull(x, nullptr, 0)
                      : static_cast<unsigned long long>(
                            std::chrono::system_clock::now().time_since_epoch().count());
  MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);  // rank 0's clock decides
  make_pool();
  if (world_rank == 0) {
    if (only != nullptr) std::printf("soak: %d ranks, seed %llu, iteration %s only\n", world_size, seed, only);
    else if (iterations >= 0) std::printf("soak: %d ranks, seed %llu, %ld iterations\n", world_size, seed, iterations);
    else std::printf("soak: %d ranks, seed %llu, %g s\n", world_size, seed, seconds);
    std::fflush(stdout);
  }
  const auto t0 = std::chrono::steady_clock::now();
  long it = only != nullptr ? std::atol(only) : 0;
  long done = 0;
  for (;;) {
    int go = 1;
    if (world_rank == 0) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      go = only != nullptr ? done == 0
                           : (iterations >= 0 ? done < iterations : elapsed < seconds);
    }
    MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!go) break;
    run_iteration(it++);
    ++done;
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (Comm& c : pool)
    if (c.comm != MPI_COMM_WORLD) MPI_Comm_free(&c.comm);
  long mine[3] = {checked, declined, failures}, sums[3] = {0, 0, 0};
  MPI_Reduce(mine, sums, 3, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (world_rank == 0)
    std::printf("soak: %d ranks, seed %llu, %ld iterations in %.1f s: %ld calls checked on rank 0, "
                "%ld over all ranks, %ld declined (cannot serve), %ld failures\n",
                world_size, seed, done, elapsed, checked, sums[0], sums[1], sums[2]);
  MPI_Finalize();
  return sums[2] == 0 ? 0 : 1;
}
