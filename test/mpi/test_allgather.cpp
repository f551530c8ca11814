// The MPI test matrix of the C++ API, run by `meson test` at many rank counts.
//
// For every communicator (world, reversed order, split in two), every algorithm of the
// registry forced by name at each of its radices (agx::algorithm_variants()) plus auto,
// element types of 1, 4, 8, 12 and 16 bytes, counts {0, 1, 7, 1024,
// 131075}, in place and out of place, regular and v form (uneven with zeros, one big
// block; displacements in reverse order with gaps), the result is checked byte for byte
// against an analytic pattern, guard bytes and gaps must stay untouched, and regular
// results are cross-checked against the MPI library's own MPI_Allgather.
// Also: bad input is rejected with the right error class before any communication,
// calls back to back and interleaved on two communicators.
//
// Options: --quick (smaller matrix for oversubscribed runs: no count 131075, no
// complex<double>), --large-on-world (the whole matrix on the world communicator, the quick
// one on the reversed and split ones: the high rank counts), --expect-algo NAME[:k=K] (auto
// calls must run NAME with radix K, the default radix where none is given: used with
// AGX_ALGO; a NAME that does not parse fails the run), --expect-bad-algo (AGX_ALGO is invalid).

#include <agx/agx.hpp>

#include "pattern.hpp"

#include <climits>
#include <cstdint>
#include <complex>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

using agx::Algorithm;
using namespace agx_test;

namespace {

int world_rank = 0;
long passed = 0, failed = 0;
unsigned salt_counter = 1;
std::optional<agx::AlgorithmChoice> expect_auto;

struct Context {
  MPI_Comm comm;
  const char* comm_name;
  agx::AlgorithmChoice algo;
  const char* type_name;
  std::size_t count;
  bool in_place;
  const char* form;
};

void report(const Context& c, int n, const std::string& what) {
  ++failed;
  if (failed > 20) return;  // enough to diagnose
  std::fprintf(stderr,
               "FAIL world rank %d: algorithm=%s N=%d comm=%s type=%s count=%zu %s form=%s: %s\n",
               world_rank, agx::to_string(c.algo).c_str(), n, c.comm_name,
               c.type_name, c.count, c.in_place ? "in-place" : "out-of-place", c.form, what.c_str());
}

// Compares `got` with the expected image: blocks at their displacements, sentinel elsewhere.
bool check_image(const Context& c, int n, Guarded& recv, const std::vector<std::size_t>& counts,
                 const std::vector<std::size_t>& displs, std::size_t elem, unsigned salt) {
  std::vector<unsigned char> want(recv.size(), sentinel);
  for (int b = 0; b < n; ++b)
    fill(reinterpret_cast<std::byte*>(want.data()) + displs[b] * elem, salt, b, counts[b], elem);
  long where = 0;
  if (!recv.guards_intact(where)) {
    report(c, n, "guard byte changed at byte offset " + std::to_string(where));
    return false;
  }
  if (want.empty() || std::memcmp(want.data(), recv.data(), want.size()) == 0) return true;
  std::size_t i = 0;
  while (static_cast<unsigned char>(recv.data()[i]) == want[i]) ++i;
  std::string owner = "a gap";
  for (int b = 0; b < n; ++b)
    if (i >= displs[b] * elem && i < (displs[b] + counts[b]) * elem)
      owner = "block " + std::to_string(b) + " element " + std::to_string(i / elem - displs[b]);
  report(c, n, "first mismatch at element index " + std::to_string(i / elem) + " (byte " +
                   std::to_string(i) + ", in " + owner + ")");
  return false;
}

// What the call must run: the forced algorithm; for auto, what --expect-algo names (with
// AGX_ALGO) or else what the selector predicts for this very call (agx::choose_algorithm,
// the choice agx-info prints), asked before the call. Auto never reports `auto` itself.
// With --expect-algo the choice the call makes must also carry the expected radix (the
// blocking call reports its algorithm only; started calls report the radix, see
// check_started_choice).
Algorithm expected_algorithm(const Context& c, int n, const agx::Layout& layout) {
  if (c.algo.id != Algorithm::automatic) return c.algo.id;
  if (!expect_auto) return agx::choose_algorithm(c.comm, layout, {}, c.in_place).id;
  const agx::AlgorithmChoice chosen = agx::choose_algorithm(c.comm, layout, {}, c.in_place);
  if (chosen != *expect_auto)
    report(c, n, "chose " + agx::full_name(chosen) + " instead of " + agx::full_name(*expect_auto));
  return expect_auto->id;
}

// With --expect-algo: a started call of the same input reports the expected algorithm
// with the expected radix (Request::choice), and gathers right.
template <class T>
bool check_started_choice(const Context& c, int n, std::span<const T> send, std::span<T> out) {
  const agx::Allgather<T> gather(c.comm);
  agx::Request r = gather.start(send, out);
  const agx::AlgorithmChoice ran = r.choice();
  r.wait();
  if (ran == *expect_auto) return true;
  report(c, n, "a started call ran " + agx::full_name(ran) + " instead of " + agx::full_name(*expect_auto));
  return false;
}

bool check_algorithm(const Context& c, int n, Algorithm want, Algorithm used) {
  if (used == want && used != Algorithm::automatic) return true;
  report(c, n, "ran " + std::string(agx::to_string(used)) + " instead of " +
                   std::string(agx::to_string(want)));
  return false;
}

template <class T>
void run_regular(Context c) {
  int n = 0, r = 0;
  MPI_Comm_size(c.comm, &n);
  MPI_Comm_rank(c.comm, &r);
  const unsigned salt = salt_counter++;
  const std::size_t elem = sizeof(T), count = c.count;
  Guarded recv(n * count * elem);
  std::vector<T> send(count);
  fill(reinterpret_cast<std::byte*>(send.data()), salt, r, count, elem);
  std::span<T> out(reinterpret_cast<T*>(recv.data()), n * count);
  if (c.in_place && count > 0) std::memcpy(recv.data() + r * count * elem, send.data(), count * elem);
  agx::Allgather<T> gather(c.comm, {c.algo.id, true, c.algo.radix});
  try {
    const Algorithm want = expected_algorithm(c, n, agx::Layout::uniform(n, count * elem));
    const Algorithm used = c.in_place ? gather.in_place(out) : gather(send, out);
    std::vector<std::size_t> counts(n, count), displs(n);
    for (int b = 0; b < n; ++b) displs[b] = b * count;
    if (check_algorithm(c, n, want, used) && check_image(c, n, recv, counts, displs, elem, salt)) ++passed;
    if (expect_auto && c.algo.id == Algorithm::automatic && !c.in_place &&
        check_started_choice<T>(c, n, send, out) && check_image(c, n, recv, counts, displs, elem, salt))
      ++passed;
  } catch (const agx::Error& e) {
    report(c, n, std::string("threw: ") + e.what());
    return;
  }
  // Cross-check with the MPI library's own all-gather on the same input.
  if (!c.in_place && std::is_same_v<T, double> && count * elem * n <= INT_MAX) {
    std::vector<unsigned char> ref(n * count * elem);
    MPI_Allgather(send.data(), static_cast<int>(count * elem), MPI_BYTE, ref.data(),
                  static_cast<int>(count * elem), MPI_BYTE, c.comm);
    if (!ref.empty() && std::memcmp(ref.data(), recv.data(), ref.size()) != 0) report(c, n, "differs from MPI_Allgather");
    else ++passed;
  }
}

template <class T>
void run_v(Context c, bool one_big) {
  int n = 0, r = 0;
  MPI_Comm_size(c.comm, &n);
  MPI_Comm_rank(c.comm, &r);
  const unsigned salt = salt_counter++;
  const std::size_t elem = sizeof(T);
  std::vector<std::size_t> counts(n), displs(n);
  for (int b = 0; b < n; ++b) {
    if (one_big) counts[b] = b == n / 2 ? 3 * c.count : (b % 2 ? 0 : std::min<std::size_t>(c.count, 1));
    else counts[b] = (b % 3 == 1 || c.count == 0) ? 0 : c.count + b;
  }
  std::size_t at = 2;  // reverse order, gaps of 3 elements
  for (int b = n - 1; b >= 0; --b) {
    displs[b] = at;
    at += counts[b] + 3;
  }
  Guarded recv(at * elem);
  std::vector<T> send(counts[r]);
  fill(reinterpret_cast<std::byte*>(send.data()), salt, r, counts[r], elem);
  if (c.in_place && counts[r] > 0) std::memcpy(recv.data() + displs[r] * elem, send.data(), counts[r] * elem);
  std::span<T> out(reinterpret_cast<T*>(recv.data()), at);
  agx::Allgather<T> gather(c.comm, {c.algo.id, true, c.algo.radix});
  std::vector<long long> icounts(counts.begin(), counts.end());
  std::vector<int> idispls(displs.begin(), displs.end());
  std::vector<std::size_t> block_bytes(counts), offsets(displs);
  for (int b = 0; b < n; ++b) block_bytes[b] *= elem, offsets[b] *= elem;
  try {
    const Algorithm want = expected_algorithm(c, n, agx::Layout::varying(block_bytes, offsets));
    const Algorithm used = c.in_place ? gather.v_in_place(out, icounts, idispls)
                                      : gather.v(send, out, icounts, idispls);
    if (check_algorithm(c, n, want, used) && check_image(c, n, recv, counts, displs, elem, salt)) ++passed;
  } catch (const agx::Error& e) {
    report(c, n, std::string("threw: ") + e.what());
  }
}

template <class T>
void run_type(MPI_Comm comm, const char* comm_name, agx::AlgorithmChoice algo, const char* type_name,
              bool quick) {
  for (std::size_t count : {0, 1, 7, 1024, 131075}) {
    if (count == 131075 && (quick || (sizeof(T) != 1 && sizeof(T) != 12))) continue;
    for (bool in_place : {false, true}) {
      Context c{comm, comm_name, algo, type_name, count, in_place, "regular"};
      run_regular<T>(c);
      c.form = "v-uneven";
      run_v<T>(c, false);
      if (count <= 1024) {
        c.form = "v-one-big";
        run_v<T>(c, true);
      }
    }
  }
}

// auto, then every registered algorithm at each of its radices.
std::vector<agx::AlgorithmChoice> all_choices() {
  std::vector<agx::AlgorithmChoice> v{{Algorithm::automatic}};
  for (const auto& a : agx::algorithm_variants()) v.push_back(a);
  return v;
}

// The number of nodes `comm` spans, as the MPI library sees them (one everywhere but on a
// cluster: test/cluster).
int node_count(MPI_Comm comm) {
  int rank = 0, node_rank = 0, leaders = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &node_rank);
  const int leader = node_rank == 0 ? 1 : 0;
  MPI_Allreduce(&leader, &leaders, 1, MPI_INT, MPI_SUM, comm);
  MPI_Comm_free(&node);
  return leaders;
}

// shared_memory forced on a communicator of several nodes: every call (regular and v, in
// place or not) is refused with MPI_ERR_ARG, on every rank, before any communication.
void run_refused(MPI_Comm comm, const char* comm_name, agx::AlgorithmChoice algo) {
  int n = 0;
  MPI_Comm_size(comm, &n);
  for (bool in_place : {false, true}) {
    for (bool v : {false, true}) {
      Context c{comm, comm_name, algo, "uint8", 7, in_place, v ? "v-uneven" : "regular"};
      std::vector<unsigned char> send(7, 1), recv(7 * static_cast<std::size_t>(n));
      std::vector<long long> counts(static_cast<std::size_t>(n), 7);
      std::vector<int> displs(static_cast<std::size_t>(n));
      for (int b = 0; b < n; ++b) displs[b] = 7 * b;
      agx::Allgather<unsigned char> gather(comm, {algo.id, true, algo.radix});
      try {
        if (v && in_place) gather.v_in_place(recv, counts, displs);
        else if (v) gather.v(send, recv, counts, displs);
        else if (in_place) gather.in_place(recv);
        else gather(send, recv);
        report(c, n, "ran on a communicator that spans several nodes");
      } catch (const agx::Error& e) {
        if (e.error_class() != MPI_ERR_ARG) report(c, n, std::string("refused with the wrong class: ") + e.what());
        else ++passed;
      }
    }
  }
}

void run_matrix(MPI_Comm comm, const char* comm_name, bool quick) {
  const bool several_nodes = node_count(comm) > 1;
  for (const agx::AlgorithmChoice& a : all_choices()) {
    if (a.id == Algorithm::shared_memory && several_nodes) {
      run_refused(comm, comm_name, a);
      continue;
    }
    run_type<unsigned char>(comm, comm_name, a, "uint8", quick);
    run_type<float>(comm, comm_name, a, "float", quick);
    run_type<double>(comm, comm_name, a, "double", quick);
    run_type<Vec3>(comm, comm_name, a, "vec3", quick);
    if (!quick) run_type<std::complex<double>>(comm, comm_name, a, "complex<double>", quick);
  }
}

// Two communicators used alternately: world, then the split half, then world again.
// (shared_memory only where both are on one node: run_matrix checks its refusal elsewhere)
// The salt of each call must agree across `a`: the halves of the split may have run
// different numbers of calls before (a half on one node runs forced shared_memory, a half
// spanning nodes only checks its refusal, as on 3 nodes x 1 rank), so it starts from the
// largest salt any rank has reached.
void run_interleaved(MPI_Comm a, MPI_Comm b) {
  MPI_Allreduce(MPI_IN_PLACE, &salt_counter, 1, MPI_UNSIGNED, MPI_MAX, a);
  const bool several_nodes = node_count(a) > 1 || node_count(b) > 1;
  for (const agx::AlgorithmChoice& algo : all_choices()) {
    if (algo.id == Algorithm::shared_memory && several_nodes) continue;
    for (std::size_t count : {1, 1000}) {
      Context ca{a, "world(interleaved)", algo, "int", count, false, "regular"};
      Context cb{b, "split(interleaved)", algo, "int", count, false, "regular"};
      run_regular<int>(ca);
      run_regular<int>(cb);
      run_regular<int>(ca);
      ca.in_place = cb.in_place = true;
      run_regular<int>(cb);
      run_regular<int>(ca);
    }
  }
}

// Communicators freed and made again in another rank order, with the same shape each
// time: a repeated call may reuse the last call's choice (lib/api/entry.cpp), never the
// state of a freed communicator whose handle the new one may have taken.
void run_freed_handles() {
  int n = 0, r = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  for (int round = 0; round < 4; ++round) {
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, 0, round % 2 ? n - 1 - r : r, &c);
    Context ctx{c, round % 2 ? "freed-reversed" : "freed-world", {Algorithm::automatic, 0}, "int",
                1000, false, "regular"};
    run_regular<int>(ctx);
    run_regular<int>(ctx);  // the repeated shape
    MPI_Comm_free(&c);
  }
}

// Sizes whose bytes overflow: MPI_ERR_COUNT with a message that says so, never a
// wrapped size. The spans claim far more elements than their memory holds, on purpose:
// the checks must reject the call before anything is touched.
template <class Expect>
void run_overflow_errors(Expect& expect, std::vector<int>& recv) {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const auto un = static_cast<std::size_t>(n);
  constexpr std::size_t max = SIZE_MAX, two62 = std::size_t{1} << 62;
  auto* bytes = reinterpret_cast<std::byte*>(recv.data());
  auto says_overflow = [](const agx::Error& e) {
    const std::string m = e.what();
    return m.find("overflow") != std::string::npos || m.find("more bytes than") != std::string::npos ||
           m.find("ends past the largest") != std::string::npos;
  };
  auto with_message = [&](auto&& call) {  // another message turns into a wrong class
    return [&, call] {
      try {
        call();
      } catch (const agx::Error& e) {
        if (!says_overflow(e)) throw agx::Error(MPI_ERR_OTHER, e.what());
        throw;
      }
    };
  };
  agx::Allgather<std::byte> g(MPI_COMM_WORLD);
  if (n >= 2) expect("out-of-place-total-overflow", MPI_ERR_COUNT, with_message([&] {
    // 2^62-byte blocks: 2^63 bytes or more in all (past PTRDIFF_MAX, or past SIZE_MAX)
    const std::size_t total = un <= 3 ? two62 * un : max;
    g(std::span<const std::byte>(bytes, two62), std::span<std::byte>(bytes, total));
  }));
  expect("in-place-total-overflow", MPI_ERR_COUNT, with_message([&] {
    g.in_place(std::span<std::byte>(bytes, max - max % un));  // N blocks of SIZE_MAX / N
  }));
  std::vector<long long> huge_counts(un, static_cast<long long>(two62)), zeros(un, 0);
  if (n >= 2) expect("v-total-overflow", MPI_ERR_COUNT, with_message([&] {
    g.v_in_place(std::span<std::byte>(bytes, two62), huge_counts, zeros);  // each fits, not all
  }));
  std::vector<long long> ones(un, 1), last(un);
  for (std::size_t i = 0; i < un; ++i) last[i] = static_cast<long long>((two62 >> 1) - 1 - i);
  expect("v-end-overflow", MPI_ERR_COUNT, with_message([&] {
    // 2^61 words of 8 bytes: displacement + count fits in elements, not in bytes
    agx::Allgather<std::uint64_t>(MPI_COMM_WORLD)
        .v_in_place(std::span<std::uint64_t>(reinterpret_cast<std::uint64_t*>(bytes), two62 >> 1),
                    ones, last);
  }));
  std::vector<std::size_t> sizes(un, 16), offsets(un, 0);
  offsets[un - 1] = max - 8;
  expect("bytes-layout-end-overflow", MPI_ERR_COUNT, with_message([&] {
    agx::allgather_bytes(MPI_COMM_WORLD, agx::Buffers{nullptr, bytes, true},
                         agx::Layout::varying(sizes, offsets));
  }));
  expect("bytes-uniform-overflow", MPI_ERR_COUNT, with_message([&] {
    agx::allgather_bytes(MPI_COMM_WORLD, agx::Buffers{nullptr, bytes, true},
                         agx::Layout::uniform(n, static_cast<std::size_t>(PTRDIFF_MAX) / un + 1));
  }));
}

// Bad input: an agx::Error of the right class on every rank, nothing written to recv.
void run_errors() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const auto un = static_cast<std::size_t>(n);
  agx::Allgather<int> gather(MPI_COMM_WORLD);
  std::vector<int> send(4, 7);
  std::vector<int> recv(4 * un + 8, -1);
  auto expect = [&](const char* what, int want_class, auto&& call) {
    std::fill(recv.begin(), recv.end(), -1);
    Context c{MPI_COMM_WORLD, "world", {Algorithm::automatic}, "int", 4, false, what};
    try {
      call();
      report(c, n, "was accepted");
      return;
    } catch (const agx::Error& e) {
      if (e.error_class() != want_class) {
        report(c, n, "error class " + std::to_string(e.error_class()) + " (" + e.what() + ")");
        return;
      }
    }
    for (int v : recv)
      if (v != -1) { report(c, n, "wrote to the receive buffer"); return; }
    ++passed;
  };
  std::span<int> all(recv);
  expect("recv-too-small", MPI_ERR_COUNT, [&] { gather(send, all.first(4 * un - 1)); });
  // Parameters: a radix below 2, a radix for an algorithm without one, or for auto.
  for (const auto& [what, options] :
       {std::pair{"radix-1", agx::Options{.algorithm = Algorithm::bruck, .radix = 1}},
        std::pair{"radix-negative", agx::Options{.algorithm = Algorithm::bruck, .radix = -4}},
        std::pair{"radix-for-ring", agx::Options{.algorithm = Algorithm::ring, .radix = 4}},
        std::pair{"radix-for-auto", agx::Options{.radix = 4}}})
    expect(what, MPI_ERR_ARG, [&] { agx::Allgather<int>(MPI_COMM_WORLD, options)(send, all.first(4 * un)); });
  expect("null-send", MPI_ERR_BUFFER, [&] { gather(std::span<const int>(static_cast<const int*>(nullptr), 4), all); });
  expect("null-recv", MPI_ERR_BUFFER, [&] { gather(send, std::span<int>(static_cast<int*>(nullptr), 4 * un)); });
  expect("overlap", MPI_ERR_BUFFER, [&] { gather(all.subspan(2, 4), all.first(4 * un)); });
  if (n > 1) expect("in-place-size", MPI_ERR_COUNT, [&] { gather.in_place(all.first(4 * un + 1)); });
  std::vector<int> counts(un, 4), displs(un);
  std::iota(displs.begin(), displs.end(), 0);
  for (auto& d : displs) d *= 4;
  expect("v-negative-count", MPI_ERR_COUNT, [&] {
    auto bad = counts;
    bad[un - 1] = -1;
    gather.v(send, all, bad, displs);
  });
  expect("v-displacement-past-end", MPI_ERR_ARG, [&] {
    auto bad = displs;
    bad[0] = static_cast<int>(recv.size()) - 2;
    gather.v(send, all, counts, bad);
  });
  expect("v-negative-displacement", MPI_ERR_COUNT, [&] {
    auto bad = displs;
    bad[0] = -4;
    gather.v(send, all, counts, bad);
  });
  expect("v-counts-length", MPI_ERR_ARG, [&] {
    std::vector<int> short_counts(un + 1, 4);
    gather.v(send, all, short_counts, displs);
  });
  expect("v-overflowing-count", MPI_ERR_COUNT, [&] {
    std::vector<long long> huge(un, 4);
    huge[0] = LLONG_MAX / 2;
    gather.v(send, all, huge, displs);
  });
  expect("v-send-size", MPI_ERR_COUNT, [&] { gather.v(std::span<const int>(send).first(3), all, counts, displs); });
  run_overflow_errors(expect, recv);
  expect("null-comm", MPI_ERR_COMM, [&] { agx::Allgather<int>{MPI_COMM_NULL}(send, all); });
  if (n >= 2) {
    MPI_Comm half = MPI_COMM_NULL, inter = MPI_COMM_NULL;
    const int color = world_rank < n / 2 ? 0 : 1;
    MPI_Comm_split(MPI_COMM_WORLD, color, world_rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, color == 0 ? n / 2 : 0, 99, &inter);
    expect("inter-communicator", MPI_ERR_COMM, [&] { agx::Allgather<int>{inter}(send, all); });
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
  }
}

void run_bad_env() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::vector<int> send(2, world_rank), recv(2 * n);
  Context c{MPI_COMM_WORLD, "world", {Algorithm::automatic}, "int", 2, false, "bad-AGX_ALGO"};
  try {
    agx::allgather<int>(MPI_COMM_WORLD, send, recv);
    report(c, n, "an invalid AGX_ALGO was accepted");
  } catch (const agx::Error& e) {
    if (e.error_class() == MPI_ERR_ARG && std::strstr(e.what(), "AGX_ALGO") != nullptr) ++passed;
    else report(c, n, std::string("wrong error: ") + e.what());
  }
  c.algo = {Algorithm::ring};  // an explicit option does not read AGX_ALGO
  run_regular<int>(c);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  bool quick = false, large_on_world = false, bad_env = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--large-on-world") large_on_world = true;
    else if (a == "--expect-bad-algo") bad_env = true;
    else if (a == "--expect-algo" && i + 1 < argc) {
      std::string why;
      expect_auto = agx::parse_algorithm_choice(argv[++i], &why);
      if (!expect_auto) {  // a check that cannot be made fails the run
        if (world_rank == 0) std::fprintf(stderr, "FAIL --expect-algo %s: %s\n", argv[i], why.c_str());
        MPI_Finalize();
        return 1;
      }
    }
  }
  if (bad_env) {
    run_bad_env();
  } else {
    run_errors();
    MPI_Comm reversed = MPI_COMM_NULL, split = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, 0, n - 1 - world_rank, &reversed);
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &split);
    run_matrix(MPI_COMM_WORLD, "world", quick);
    run_matrix(reversed, "reversed", quick || large_on_world);
    run_matrix(split, world_rank % 2 ? "split-odd" : "split-even", quick || large_on_world);
    run_interleaved(MPI_COMM_WORLD, split);
    run_freed_handles();
    MPI_Comm_free(&reversed);
    MPI_Comm_free(&split);
  }
  long totals[2] = {passed, failed}, sums[2] = {0, 0};
  MPI_Reduce(totals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (world_rank == 0) std::printf("N=%d: %ld passed, %ld failed\n", n, sums[0], sums[1]);
  MPI_Finalize();
  return sums[1] == 0 && failed == 0 ? 0 : 1;
}
