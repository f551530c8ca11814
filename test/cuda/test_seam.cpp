// The staging pipeline on the test seam (seam_ops.hpp), with real MPI: every
// point-to-point algorithm plus shared_memory and hierarchical (their node schedules
// staged: StagedNodeCall; under AGX_VIRTUAL_NODE_SIZE on several nodes), uniform and
// v layouts (zeros, one big block, reversed displacements with gaps), in place and out
// of place, one big message or many small pieces and chunks, a 4 KiB mirror bound
// (calls cut into slices), and "mixed" calls where every third rank has host buffers
// and runs the host executor (in the same slices where the call is cut). The receive buffer
// ("device" memory) is checked byte for byte, including the gaps and guard bytes, and
// no copy may still be queued when a call returns. Every call carries the checks the
// settings ask for (AGX_INTEGRITY: seam-integrity-np3), as a device call does.
//
//   test_seam [--fault=drop|early]   a fault must make the check fail (exit 1)

#include "seam_ops.hpp"

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>

#include "api/context.hpp"
#include "core/comm_context.hpp"
#include "core/executor.hpp"
#include "core/planner.hpp"
#include "cuda/pinned_pool.hpp"
#include "cuda/staging.hpp"
#include "hier/hier.hpp"
#include "hier/hier_context.hpp"

#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using agx::Algorithm;
using agx::Buffers;
using agx::Layout;
constexpr std::size_t guard = 64;
constexpr auto poison = std::byte{0xCC};

std::byte pattern(int block, std::size_t i, int iter) {
  return static_cast<std::byte>((block * 131 + static_cast<int>(i % 251) * 7 + iter * 17 + 1) & 0xff);
}

struct Case {
  std::vector<std::size_t> bytes, offsets;
  bool uniform = true;
  std::size_t extent = 0;
  Layout layout() const {
    return uniform ? Layout::uniform(static_cast<int>(bytes.size()), bytes.empty() ? 0 : bytes[0])
                   : Layout::varying(bytes, offsets);
  }
};

Case uniform_case(int n, std::size_t block) {
  Case c;
  for (int i = 0; i < n; ++i) c.bytes.push_back(block), c.offsets.push_back(block * static_cast<std::size_t>(i));
  c.extent = block * static_cast<std::size_t>(n);
  return c;
}

/// v layout: zeros, one big block, displacements in reverse rank order with gaps.
Case varying_case(int n) {
  Case c;
  c.uniform = false;
  std::size_t at = 0;
  c.bytes.resize(static_cast<std::size_t>(n));
  c.offsets.resize(static_cast<std::size_t>(n));
  for (int i = n - 1; i >= 0; --i) {
    const auto u = static_cast<std::size_t>(i);
    c.bytes[u] = i % 3 == 1 ? 0 : (i == 0 ? 9000 : static_cast<std::size_t>(i * 37 + 5));
    c.offsets[u] = at;
    at += c.bytes[u] + 13;
  }
  c.extent = at;
  return c;
}

struct Totals {
  long calls = 0, failures = 0;
};

void run_case(agx::CommContext& ctx, agx::test::SeamOps& ops, agx::cuda::PinnedPool& pool,
              agx::AlgorithmChoice choice, const Case& c, bool in_place, bool mixed,
              const agx::cuda::StagingSettings& st, int iter, Totals& t) {
  const Algorithm a = choice.id;
  const int me = ctx.rank();
  const Layout layout = c.layout();
  const bool host_rank = mixed && me % 3 == 1;
  const std::size_t own = c.bytes[static_cast<std::size_t>(me)];
  std::vector<std::byte> host_recv, host_send;
  std::byte* recv = nullptr;
  std::byte* send = nullptr;
  if (host_rank) {
    host_recv.assign(c.extent + 2 * guard, poison);
    host_send.resize(own + 1);
    recv = host_recv.data() + guard;
    send = host_send.data();
  } else {
    recv = ops.device_alloc(c.extent + 2 * guard, poison) + guard;
    send = ops.device_alloc(own + 1, std::byte{0});
  }
  std::byte* own_at = in_place ? recv + c.offsets[static_cast<std::size_t>(me)] : send;
  for (std::size_t i = 0; i < own; ++i) own_at[i] = pattern(me, i, iter);  // test writes its own "device" data
  const Buffers b{in_place ? nullptr : send, recv, in_place};
  const agx::Checks checks = agx::Checks::of(a);

  const bool node_algorithm = a == Algorithm::shared_memory || a == Algorithm::hierarchical;
  if (host_rank) {
    if (node_algorithm) {  // the node call on the round engine, as device calls run it
      agx::hier::NodeCallPtr call = agx::hier::start_node_call(ctx, a, b, layout);
      while (!agx::hier::test_node_call(*call)) {
      }
    }
    else if (agx::cuda::slicing_of(layout, st.mirror_bytes).slices == 1)  // the plain executor
      agx::execute(ctx.schedule(choice), b, layout, ctx.comm(), ctx.next_tag(), st.piece_bytes, checks);
    else {  // the same slices as the staging ranks
      agx::cuda::HostStagingCall h(ctx.schedule(choice), b, layout, ctx.comm(), ctx.next_tag(), st, checks);
      while (!h.test()) {
      }
    }
  } else if (node_algorithm) {  // its node schedule staged (StagedNodeCall)
    agx::cuda::StagedNodeCall call(ops, pool, ctx, a, b, layout, st);
    while (!call.test()) {
    }
  } else {
    agx::cuda::run_staging(ops, pool, ctx.staged_schedule(choice), b, layout, ctx.comm(), ctx.next_tag(), st,
                           checks);
  }

  long bad = 0;
  std::vector<char> expect_block(c.extent, -1);
  for (std::size_t r = 0; r < c.bytes.size(); ++r)
    for (std::size_t i = 0; i < c.bytes[r]; ++i) expect_block[c.offsets[r] + i] = static_cast<char>(r);
  for (std::size_t k = 0; k < c.extent + 2 * guard; ++k) {
    const std::byte got = recv[static_cast<std::ptrdiff_t>(k) - static_cast<std::ptrdiff_t>(guard)];
    std::byte want = poison;
    if (k >= guard && k < guard + c.extent && expect_block[k - guard] >= 0) {
      const int r = expect_block[k - guard];
      want = pattern(r, k - guard - c.offsets[static_cast<std::size_t>(r)], iter);
    }
    bad += got != want;
  }
  if (!host_rank && ops.pending() != 0) bad += 1000000;
  ++t.calls;
  if (bad != 0) {
    ++t.failures;
    if (t.failures <= 5)
      std::fprintf(stderr, "rank %d: %s %s %s%s piece %zu chunk %zu: %ld bad bytes%s\n", me,
                   std::string(agx::to_string(a)).c_str(), c.uniform ? "uniform" : "v",
                   in_place ? "in-place" : "out-of-place", mixed ? " mixed" : "", st.piece_bytes,
                   st.chunk_bytes, bad % 1000000, bad >= 1000000 ? " (copies still queued)" : "");
  }
  if (!host_rank) ops.device_free_all();
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  agx::test::Fault fault = agx::test::Fault::none;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--fault=drop") == 0) fault = agx::test::Fault::drop_copy;
    if (std::strcmp(argv[i], "--fault=early") == 0) fault = agx::test::Fault::early_completion;
  }
  int n = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  agx::CommContext& ctx = agx::context(MPI_COMM_WORLD);
  agx::test::SeamOps ops(1234u + static_cast<unsigned>(me), fault);
  agx::cuda::PinnedPool pool(ops);
  Totals t;
  int iter = 0;
  // Whole blocks; 1000-byte messages with 333-byte chunks; and a 4 KiB mirror, which cuts
  // the larger calls into slices (staging.hpp).
  const std::vector<agx::cuda::StagingSettings> settings = {
      {1u << 20, 1u << 20, 64u << 20}, {1000, 333, 64u << 20}, {1000, 333, 4096}};
  // (Under AGX_VIRTUAL_NODE_SIZE the ranks span several nodes: hierarchical's leaders
  // then exchange the nodes' blocks, and shared_memory cannot serve.)
  const int nodes = agx::hier::hier_context(ctx).topo.nnodes;
  for (const agx::AlgorithmChoice& a : agx::algorithm_variants()) {
    if (a.id == Algorithm::shared_memory && nodes > 1) continue;
    if (a.id != Algorithm::shared_memory && a.id != Algorithm::hierarchical &&
        !agx::planner_for(a.id).unsupported_reason({n, 0, a.radix}).empty())
      continue;
    std::vector<Case> cases;
    for (std::size_t block : {0u, 1u, 7u, 4099u, 70001u}) cases.push_back(uniform_case(n, block));
    cases.push_back(varying_case(n));
    for (const Case& c : cases)
      for (bool in_place : {false, true})
        for (bool mixed : {false, true})
          for (const auto& st : settings)
            run_case(ctx, ops, pool, a, c, in_place, mixed, st, ++iter, t);
    if (fault != agx::test::Fault::none) break;  // one algorithm is enough to show the failure
  }
  long failures = 0;
  MPI_Allreduce(&t.failures, &failures, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  // Pooled mirrors: a handful of power-of-two sizes, never one per call.
  const bool pooled = ops.pinned_allocations() <= 8;
  if (!pooled) std::fprintf(stderr, "rank %d: %zu pinned allocations for %ld calls\n", me, ops.pinned_allocations(), t.calls);
  int all_pooled = 0, mine = pooled ? 1 : 0;
  MPI_Allreduce(&mine, &all_pooled, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (me == 0)
    std::printf("seam staging: %d ranks on %d nodes, %ld calls per rank, %ld failed checks, pool %s%s\n", n,
                nodes, t.calls, failures, all_pooled ? "reused" : "NOT reused",
                fault == agx::test::Fault::none ? "" : " (fault injected)");
  MPI_Finalize();
  return failures == 0 && all_pooled ? 0 : 1;
}
