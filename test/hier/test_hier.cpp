// MPI test of the hierarchical and shared-memory all-gathers (run at many rank counts
// and virtual-node placements by test/hier/meson.build).
//
// For every block size, out of place and in place, uniform and v form (zeros,
// displacements in reverse order with gaps), on two interleaved communicators (the
// world and a reversed copy), each call twice back to back with different data:
// the receive buffer must hold exactly the analytic pattern of every block, gaps and
// guards around the buffer must be untouched. `shared_memory` must run on one node and
// refuse several. Usage: test_hier [expected_nodes] [--expect-inter NAME[:k=K]
// [--radix-takes-effect]] (checked on the world communicator). With --expect-inter, every
// hierarchical call on the world communicator must have planned its inter-node stage with
// that algorithm and radix (the default radix where none is given; a NAME that does not
// parse fails); with --radix-takes-effect the radix must also make a difference at the
// world's node count (bruck: k < nodes; locality_bruck: k < nodes and k divides them,
// else its schedule is Bruck's k = 2 or one group round): a run meant to show a radix
// fails where it would pass on another schedule.

#include <agx/agx.hpp>

#include "api/context.hpp"
#include "core/comm_context.hpp"
#include "hier/hier.hpp"
#include "hier/hier_context.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr unsigned char sentinel = 0xA5;
constexpr std::size_t guard = 64;

unsigned char pattern(unsigned salt, int rank, std::size_t i) {
  unsigned x = salt * 2654435761u ^ static_cast<unsigned>(rank) * 40503u ^ static_cast<unsigned>(i) * 2246822519u;
  x ^= x >> 15;
  const auto b = static_cast<unsigned char>(x);
  return b == sentinel ? 0x5A : b;
}

int failures = 0;

void fail(int rank, const std::string& what) {
  if (failures++ < 5) std::fprintf(stderr, "rank %d: FAIL %s\n", rank, what.c_str());
}

struct Case {
  agx::Algorithm algo;
  std::size_t size;
  bool in_place, v_form;
};

std::string name(const Case& c, const char* comm) {
  return std::string(agx::to_string(c.algo)) + " size=" + std::to_string(c.size) +
         (c.in_place ? " in-place" : " out-of-place") + (c.v_form ? " v" : " uniform") + " on " + comm;
}

void run_case(MPI_Comm comm, const char* comm_name, const Case& c, unsigned salt, int nnodes) {
  int n = 0, me = 0;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &me);
  std::vector<std::size_t> bytes(static_cast<std::size_t>(n)), offs(bytes.size());
  std::size_t extent = 0;
  if (!c.v_form) {
    for (int i = 0; i < n; ++i) { bytes[i] = c.size; offs[i] = c.size * static_cast<std::size_t>(i); }
    extent = c.size * static_cast<std::size_t>(n);
  } else {  // zeros at i % 3 == 1, reverse order, 5-byte gaps
    std::size_t at = 5;
    for (int i = n; i-- > 0;) {
      bytes[i] = i % 3 == 1 ? 0 : c.size + static_cast<std::size_t>(i) * 3;
      offs[i] = at;
      at += bytes[i] + 5;
    }
    extent = at;
  }
  std::vector<unsigned char> store(extent + 2 * guard, sentinel);
  unsigned char* recv = store.data() + guard;
  std::vector<unsigned char> send(bytes[me] + 1);
  unsigned char* own = c.in_place ? recv + offs[me] : send.data();
  for (std::size_t i = 0; i < bytes[me]; ++i) own[i] = pattern(salt, me, i);
  const agx::Layout layout = c.v_form ? agx::Layout::varying(bytes, offs) : agx::Layout::uniform(n, c.size);
  const agx::Buffers buffers{c.in_place ? nullptr : send.data(), recv, c.in_place};
  const bool must_refuse = c.algo == agx::Algorithm::shared_memory && nnodes > 1;
  try {
    agx::allgather_bytes(comm, buffers, layout, agx::Options{c.algo});
    if (must_refuse) fail(me, name(c, comm_name) + ": ran on " + std::to_string(nnodes) + " nodes");
  } catch (const agx::Error& e) {
    if (!must_refuse) fail(me, name(c, comm_name) + ": " + e.what());
    return;
  }
  std::vector<unsigned char> want(store.size(), sentinel);
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < bytes[r]; ++i) want[guard + offs[r] + i] = pattern(salt, r, i);
  for (std::size_t i = 0; i < store.size(); ++i)
    if (store[i] != want[i]) {
      fail(me, name(c, comm_name) + ": byte " + std::to_string(static_cast<long>(i) - static_cast<long>(guard)) +
                   " is " + std::to_string(store[i]) + ", expected " + std::to_string(want[i]));
      break;
    }
}

int nodes_of(MPI_Comm comm) {
  return agx::hier::hier_context(agx::context(comm)).topo.nnodes;
}

// Why radix `c.radix` makes no difference to c's schedule over `nodes` nodes; empty
// when it does (lib/core/planners/bruck.cpp, locality_bruck.cpp).
std::string radix_without_effect(const agx::AlgorithmChoice& c, int nodes) {
  const std::string k = std::to_string(c.radix), g = std::to_string(nodes);
  if (c.radix == 0) return {};
  if (c.radix >= nodes) return "k=" + k + " >= " + g + " nodes: one round whatever k";
  if (c.id == agx::Algorithm::locality_bruck && nodes % c.radix != 0)
    return "k=" + k + " does not divide " + g + " nodes: Bruck's k=2 runs";
  return {};
}

// --expect-inter: the inter-node choice of every hierarchical plan of `h` (at least one).
void check_inter(agx::hier::HierContext& h, const agx::AlgorithmChoice& want, bool radix_effect,
                 int nodes, int me) {
  if (const std::string why = radix_without_effect(want, nodes); radix_effect && !why.empty())
    fail(me, "--radix-takes-effect: " + agx::full_name(want) + " on " + std::to_string(nodes) +
                 " nodes: " + why);
  int plans = 0;
  for (const auto& [key, plan] : h.node_schedules) {
    if (key.first != agx::Algorithm::hierarchical) continue;
    ++plans;
    if (key.second != want)
      fail(me, "a hierarchical call ran " + agx::full_name(key.second) + " between nodes instead of " +
                   agx::full_name(want));
  }
  if (plans == 0) fail(me, "--expect-inter: no hierarchical call was planned on the world communicator");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int n = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm reversed = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, 0, n - 1 - me, &reversed);

  const int world_nodes = nodes_of(MPI_COMM_WORLD), reversed_nodes = nodes_of(reversed);
  std::optional<agx::AlgorithmChoice> expect_inter;
  bool radix_effect = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--radix-takes-effect") {
      radix_effect = true;
    } else if (a == "--expect-inter" && i + 1 < argc) {
      std::string why;
      expect_inter = agx::parse_algorithm_choice(argv[++i], &why);
      if (!expect_inter) fail(me, "--expect-inter " + std::string(argv[i]) + ": " + why);
    } else if (world_nodes != std::atoi(argv[i])) {
      fail(me, "expected " + a + " nodes, topology has " + std::to_string(world_nodes));
    }
  }
  // Ranks of different (virtual) nodes never share a node communicator.
  // The node communicator is made on first use (collective over the communicator).
  agx::hier::HierContext& h = agx::hier::hier_context(agx::context(MPI_COMM_WORLD));
  const agx::hier::Topology& t = h.topo;
  int node_comm_size = 0;
  MPI_Comm_size(h.node_comm(), &node_comm_size);
  if (node_comm_size != t.local_size()) fail(me, "node communicator does not match the node");
  const std::string report = agx::hier::describe(agx::context(MPI_COMM_WORLD));  // collective
  if (me == 0) std::printf("%s", report.c_str());

  unsigned salt = 1;
  for (agx::Algorithm algo : {agx::Algorithm::hierarchical, agx::Algorithm::shared_memory})
    for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000},
                             std::size_t{70001}, std::size_t{300000}})
      for (bool v_form : {false, true})
        for (bool in_place : {false, true}) {
          const Case c{algo, size, in_place, v_form};
          for (int rep = 0; rep < 2; ++rep) {  // back to back, interleaved communicators
            run_case(MPI_COMM_WORLD, "world", c, salt++, world_nodes);
            run_case(reversed, "reversed", c, salt++, reversed_nodes);
          }
        }
  // Growth and shrink back: a large call after many small ones, then small again.
  for (std::size_t size : {std::size_t{3}, std::size_t{1} << 20, std::size_t{5}})
    run_case(MPI_COMM_WORLD, "world", {agx::Algorithm::hierarchical, size, false, false}, salt++, world_nodes);

  // Blocking and nonblocking node calls alternating on one communicator: every call
  // finishes its generation of both watermarks (ready and done flags), so none is left
  // ahead of a gap. (A blocking call without receives into the segment once left its
  // `ready` generation open; every later nonblocking call then piled up behind it, and
  // each finish sorted the pile: 3 us per call at N = 2 grew to 470 us after 10^5 calls.)
  {
    const agx::Algorithm algo = world_nodes > 1 ? agx::Algorithm::hierarchical : agx::Algorithm::shared_memory;
    const agx::Allgather<int> g(MPI_COMM_WORLD, agx::Options{algo});
    for (std::size_t count : {std::size_t{2}, std::size_t{3000}}) {  // inline and staged
      std::vector<int> send(count, me), all(count * static_cast<std::size_t>(n), -1);
      for (int i = 0; i < 20; ++i) {
        g(std::span<const int>(send), std::span<int>(all));
        agx::Request r = g.start(std::span<const int>(send), std::span<int>(all));
        r.wait();
      }
      for (std::size_t i = 0; i < all.size(); ++i)
        if (all[i] != static_cast<int>(i / count)) {
          fail(me, "alternating blocking and nonblocking calls: element " + std::to_string(i) + " is " +
                       std::to_string(all[i]));
          break;
        }
    }
    if (h.ready_ahead() != 0 || h.done_ahead() != 0)
      fail(me, "alternating blocking and nonblocking calls left " + std::to_string(h.ready_ahead()) +
                   " / " + std::to_string(h.done_ahead()) +
                   " finished calls ahead of the ready / done watermark");
  }

  if (expect_inter) check_inter(h, *expect_inter, radix_effect, world_nodes, me);
  else if (radix_effect) fail(me, "--radix-takes-effect needs --expect-inter");

  MPI_Comm_free(&reversed);  // frees its segment and communicators (attribute callback)
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (me == 0) std::printf("%s: %d ranks, %d nodes, %d failure(s)\n", total ? "FAIL" : "ok", n, world_nodes, total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
