// The node-level planners: `shared_memory` and `hierarchical` as schedules, pure
// functions of (placement, leaders, inter-node algorithm) -> one rank's rounds. The
// validator proves them like every other planner (test/unit/test_node_schedules.cpp),
// and the cost model prices what they plan (core/cost_model.hpp).
//
// shared_memory (all N ranks on one node), staged through the node's segment:
//   round 0   put the own block into the segment and signal it (the own flag rises
//             as the copy goes); copy it into the own receive buffer (out of place),
//             as every schedule does
//   round 1   wait for every other block and get it (each chunk as its owner's flag
//             shows it)
//
//     r0 r1 r2 r3  --put-->  segment [B0 B1 B2 B3]  --get-->  every rank's buffer
//
//   Bytes: each rank copies M in and (N-1)·M out; no message. Restriction: one node.
//   (Blocks of at most 4024 B travel inside the flag lines: the same two rounds, other
//   copies; lib/hier/node_copies.hpp. Large ones may go by single copy, below.)
//
// shared_memory by direct write (NodeShape::direct_write: every receive buffer of the
// call lies in memory the node maps, agx::allocate or MPI_Alloc_mem; lib/hier agrees on
// that before the call, hier/direct_write.hpp):
//   round 0   write the own block straight into every other rank's receive buffer and
//             signal it (the flag rises once every copy is made); copy it into the own
//             receive buffer (out of place)
//   round 1   wait for every other block: once its writer's flag shows it, it is in
//             this rank's receive buffer
//
//     r0 --write--> [B0 . . .] [B0 . . .] [B0 . . .]   (r1's, r2's, r3's buffers)
//
//   Bytes: each rank writes (N-1)·M into its peers' buffers (N·M out of place, the
//   copy bound), nothing read twice, no segment. Restriction: one node.
//
// shared_memory by single copy (NodeShape::single_copy: heap buffers, the kernel's
// copy between processes available; lib/hier picks it per size class by timing it
// against staging, hier/copy_choice.hpp):
//   round 0   expose the own block where it lies and signal it (the flag publishes its
//             address); copy it into the own receive buffer (out of place)
//   round 1   wait for every other block and read it straight from its owner's buffer;
//             the read over, tell the owners this rank is done with their buffers
//   round 2   release the own block: wait until every other rank has read it, so the
//             caller's send buffer is its own again when the call returns
//
//     r1, r2, r3 --read--> r0's send buffer   (and likewise for every block)
//
//   Bytes: each rank reads (N-1)·M once, at the kernel copy's speed; no segment.
//   Restriction: one node.
//
// shared_memory by CUDA IPC (NodeShape::device_ipc: device buffers, lib/cuda/ipc.hpp),
// the single-copy schedule at the device level; a rank exposes its device receive
// buffer (its allocation is what CUDA IPC maps), so the own block goes there first:
//   round 0   copy~device the own block into the own receive buffer (out of place)
//   round 1   expose~device it there and signal~device it (the ready event, recorded after
//             the copy on the same stream; the handles travel in lib/cuda's exchange)
//   round 2   wait~device for every other block and read~device it from its owner's
//             receive buffer (the stream waits for the owner's event, then copies)
//   round 3   release~device: until every other rank has read the own block
//
//   Bytes: each rank copies M on its device and reads (N-1)·M from its peers' devices.
//   Restriction: one node.
//
// hierarchical (nodes j = 0..J-1 numbered by lowest rank, L leaders per node):
//   round 0        every rank puts its block into its node's segment and signals it
//   round 1        every rank waits for its own node's other blocks and gets them; the
//                  leaders' sends from the segment carry them too. The leaders also run
//   rounds 1..I    the inter-node schedule of I rounds, planned over J "ranks" by the
//                  inter-node algorithm: leader l of node j sends, from the segment,
//                  slice l of each node aggregate that schedule names, to leader l of
//                  the peer node, which receives it into its segment. Slice l of a
//                  node of m members: the blocks of its members [l·m/L, (l+1)·m/L).
//                  A leader signals what it received into the segment at the end of
//                  the round that received it
//   rounds 2..I+1  every rank waits for the blocks that came in inter-node round k and
//                  gets them in round k+2, while the leaders' next round is on the wire
//
//   4 ranks round-robin on 2 nodes (node 0 = {0, 2}, node 1 = {1, 3}), one leader:
//     round 0   all put:            seg0 [B0 B2]         seg1 [B1 B3]
//     round 1   0 gets B2, 2 gets B0; 0 sends [B0 B2] to 1 (segment to segment) and
//               receives [B1 B3]; 1 and 3 likewise
//     round 2   all get the other node's blocks from their own segment
//
//   Bytes: M in and (N-1)·M out per rank; leader l moves slice l of the aggregates as
//   the inter-node algorithm moves J blocks. One rank per node: the inter-node schedule
//   itself on the ranks' buffers; one node: shared_memory.

#include "core/planner.hpp"
#include "core/registry.hpp"

#include <agx/error.hpp>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

namespace agx {
namespace {

constexpr std::size_t small_total_bytes = 64 * 1024;

// Nodes numbered by their lowest rank; members of each node by increasing rank.
struct Nodes {
  std::vector<int> node_of;                // normalized
  std::vector<std::vector<int>> members;
};

Nodes normalize(const std::vector<int>& raw) {
  Nodes out;
  std::map<int, int> index;
  out.node_of.resize(raw.size());
  for (std::size_t r = 0; r < raw.size(); ++r) {
    auto [it, fresh] = index.try_emplace(raw[r], static_cast<int>(index.size()));
    if (fresh) out.members.emplace_back();
    out.node_of[r] = it->second;
    out.members[static_cast<std::size_t>(it->second)].push_back(static_cast<int>(r));
  }
  return out;
}

// The ranks in `ranks` (increasing) as spans of consecutive ranks.
void append_runs(std::vector<BlockSpan>& spans, const std::vector<int>& ranks, std::size_t lo,
                 std::size_t hi) {
  for (std::size_t i = lo; i < hi; ++i) {
    const int r = ranks[i];
    if (!spans.empty() && spans.back().first + spans.back().count == r) ++spans.back().count;
    else spans.push_back({r, 1});
  }
}

// Slice l of L of node j's members: [l·m/L, (l+1)·m/L).
void append_slice(std::vector<BlockSpan>& spans, const Nodes& nodes, int j, int l, int L) {
  const auto& m = nodes.members[static_cast<std::size_t>(j)];
  const std::size_t size = m.size(), ul = static_cast<std::size_t>(l), uL = static_cast<std::size_t>(L);
  append_runs(spans, m, size * ul / uL, size * (ul + 1) / uL);
}

// Rounds of the longest inter-node schedule of `a` over `nnodes` (every node plans it).
std::size_t inter_rounds(AlgorithmChoice a, int nnodes) {
  static std::mutex mutex;
  static std::map<std::pair<AlgorithmChoice, int>, std::size_t> cache;
  std::lock_guard lock(mutex);
  auto [it, fresh] = cache.try_emplace({a, nnodes}, 0);
  if (fresh)
    for (int j = 0; j < nnodes; ++j)
      it->second = std::max(it->second, planner_for(a.id).plan({nnodes, j, a.radix}).rounds.size());
  return it->second;
}

// How shared_memory places its blocks (see above).
enum class OneNode : unsigned char { staged, direct_write, single_copy, device_ipc };

// The single-copy schedule at the device level (see above).
Schedule device_ipc(int n, int rank) {
  using K = NodeOp::Kind;
  Schedule s{n, rank, {}};
  s.rounds.resize(n > 1 ? 4 : 1);
  s.rounds[0].copies.push_back({{{rank, 1}}, Level::device});
  if (n > 1) {
    std::vector<BlockSpan> others;
    if (rank > 0) others.push_back({0, rank});
    if (rank + 1 < n) others.push_back({rank + 1, n - rank - 1});
    add_node_op(s.rounds[1], K::expose, {{rank, 1}});
    add_node_op(s.rounds[1], K::signal, {{rank, 1}});
    add_node_op(s.rounds[2], K::wait, others);
    add_node_op(s.rounds[2], K::read, std::move(others));
    add_node_op(s.rounds[3], K::release, {{rank, 1}});
    for (Round& r : s.rounds)
      for (NodeOp& op : r.node) op.level = Level::device;
  }
  return s;
}

// shared_memory's rounds: the own block placed (put, written into the peers' buffers,
// or exposed) and signalled, then every other block waited for (and got from the
// segment, or read from its owner's buffer, unless written); an exposed block is
// released in a third round.
Schedule one_node(int n, int rank, OneNode how) {
  using K = NodeOp::Kind;
  if (how == OneNode::device_ipc) return device_ipc(n, rank);
  Schedule s{n, rank, {}};
  if (n > 1) {
    s.rounds.resize(how == OneNode::single_copy ? 3 : 2);
    const K place = how == OneNode::direct_write ? K::write : how == OneNode::single_copy ? K::expose : K::put;
    add_node_op(s.rounds[0], place, {{rank, 1}});
    add_node_op(s.rounds[0], K::signal, {{rank, 1}});
    std::vector<BlockSpan> others;
    if (rank > 0) others.push_back({0, rank});
    if (rank + 1 < n) others.push_back({rank + 1, n - rank - 1});
    add_node_op(s.rounds[1], K::wait, others);
    if (how == OneNode::staged) add_node_op(s.rounds[1], K::get, std::move(others));
    if (how == OneNode::single_copy) {
      add_node_op(s.rounds[1], K::read, std::move(others));
      add_node_op(s.rounds[2], K::release, {{rank, 1}});
    }
  }
  add_own_copy(s);
  return s;
}

OneNode one_node_kind(const NodeShape& shape) {
  return shape.device_ipc     ? OneNode::device_ipc
         : shape.direct_write ? OneNode::direct_write
         : shape.single_copy  ? OneNode::single_copy
                              : OneNode::staged;
}

Schedule shared_memory(int n, int rank) { return one_node(n, rank, OneNode::staged); }

Schedule hierarchical(const NodeShape& shape, int rank) {
  const int n = static_cast<int>(shape.node_of.size());
  const Nodes nodes = normalize(shape.node_of);
  const int nnodes = static_cast<int>(nodes.members.size());
  if (nnodes == 1) return shared_memory(n, rank);
  const AlgorithmChoice inter = hier_inter_algorithm(nnodes, shape.total_bytes, shape.inter);
  if (nnodes == n) return planner_for(inter.id).plan({n, rank, inter.radix});  // node j is rank j
  const int node = nodes.node_of[static_cast<std::size_t>(rank)];
  const auto& mine = nodes.members[static_cast<std::size_t>(node)];
  const int local = static_cast<int>(std::find(mine.begin(), mine.end(), rank) - mine.begin());
  const int L = hier_leaders(shape);
  const std::size_t I = inter_rounds(inter, nnodes);

  Schedule s{n, rank, {}};
  s.rounds.resize(I + 2);
  add_node_op(s.rounds[0], NodeOp::Kind::put, {{rank, 1}});
  add_node_op(s.rounds[0], NodeOp::Kind::signal, {{rank, 1}});
  std::vector<BlockSpan> own_node;
  for (int r : mine)
    if (r != rank) append_runs(own_node, std::vector<int>{r}, 0, 1);
  add_node_op(s.rounds[1], NodeOp::Kind::wait, own_node);
  add_node_op(s.rounds[1], NodeOp::Kind::get, std::move(own_node));
  // The inter-node schedule of this node (its leaders run it, each on its slices).
  const Schedule between = planner_for(inter.id).plan({nnodes, node, inter.radix});
  if (local < L) {
    for (std::size_t k = 0; k < between.rounds.size(); ++k) {
      Round& round = s.rounds[1 + k];
      std::vector<BlockSpan> received;  // into the segment in this round: signalled at its end
      for (int pass = 0; pass < 2; ++pass) {
        const auto& list = pass == 0 ? between.rounds[k].sends : between.rounds[k].recvs;
        for (const Transfer& t : list) {
          std::vector<BlockSpan> blocks;
          for (const BlockSpan& span : t.blocks)
            for (int j = span.first; j < span.first + span.count; ++j)
              append_slice(blocks, nodes, j, local, L);
          const int peer = nodes.members[static_cast<std::size_t>(t.peer)][static_cast<std::size_t>(local)];
          if (pass == 0) {
            add_send(round, peer, std::move(blocks), Place::segment);
          } else {
            received.insert(received.end(), blocks.begin(), blocks.end());
            add_recv(round, peer, std::move(blocks), Place::segment);
          }
        }
      }
      add_node_op(round, NodeOp::Kind::signal, std::move(received));
    }
  }
  // Every rank waits for the blocks the leaders received in inter-node round k, and gets
  // them, in round k + 2: the copies out of the segment follow the wire round by round.
  for (std::size_t k = 0; k < between.rounds.size(); ++k) {
    std::vector<int> arrived;  // the nodes whose aggregates came in inter-node round k
    for (const Transfer& t : between.rounds[k].recvs)
      for (const BlockSpan& span : t.blocks)
        for (int j = span.first; j < span.first + span.count; ++j) arrived.push_back(j);
    std::sort(arrived.begin(), arrived.end());
    std::vector<BlockSpan> remote;
    for (int r = 0; r < n; ++r)
      if (std::binary_search(arrived.begin(), arrived.end(), nodes.node_of[static_cast<std::size_t>(r)]))
        append_runs(remote, std::vector<int>{r}, 0, 1);
    add_node_op(s.rounds[2 + k], NodeOp::Kind::wait, remote);
    add_node_op(s.rounds[2 + k], NodeOp::Kind::get, std::move(remote));
  }
  add_own_copy(s);
  return s;
}

}  // namespace

AlgorithmChoice hier_inter_algorithm(int nnodes, std::size_t total_bytes,
                                     std::optional<AlgorithmChoice> forced) {
  Algorithm a = Algorithm::ring;
  if (forced) a = forced->id;
  else if (nnodes == 1) a = Algorithm::direct;
  else if (total_bytes <= small_total_bytes)
    a = (nnodes & (nnodes - 1)) == 0 ? Algorithm::recursive_doubling : Algorithm::bruck;
  else a = nnodes % 2 == 0 ? Algorithm::neighbor_exchange : Algorithm::ring;
  if (a == Algorithm::automatic || a == Algorithm::hierarchical || a == Algorithm::shared_memory)
    throw Error(MPI_ERR_ARG, "agx: inter-node algorithm '" + std::string(to_string(a)) +
                                 "' is not a point-to-point algorithm");
  const AlgorithmChoice choice = resolve({a, forced ? forced->radix : 0});
  const std::string why = planner_for(a).unsupported_reason({nnodes, 0, choice.radix});
  if (!why.empty())
    throw Error(MPI_ERR_ARG, "agx: inter-node algorithm '" + to_string(choice) +
                                 "' cannot serve " + std::to_string(nnodes) + " nodes: " + why);
  return choice;
}

int hier_leaders(const NodeShape& shape) {
  const Nodes nodes = normalize(shape.node_of);
  std::size_t smallest = shape.node_of.size();
  for (const auto& m : nodes.members) smallest = std::min(smallest, m.size());
  return std::max(1, std::min(shape.leaders, static_cast<int>(smallest)));
}

Schedule plan_node_algorithm(Algorithm a, const NodeShape& shape, int rank) {
  const int n = static_cast<int>(shape.node_of.size());
  if (rank < 0 || rank >= n)
    throw Error(MPI_ERR_ARG, "agx: rank " + std::to_string(rank) + " outside a placement of " +
                                 std::to_string(n) + " ranks");
  if (a == Algorithm::shared_memory) {
    if (normalize(shape.node_of).members.size() != 1)
      throw Error(MPI_ERR_ARG, "agx: algorithm 'shared_memory' cannot serve ranks on several nodes");
    return one_node(n, rank, one_node_kind(shape));
  }
  if (a == Algorithm::hierarchical) {
    if (normalize(shape.node_of).members.size() == 1)
      return one_node(n, rank, one_node_kind(shape));  // (hierarchical on one node is shared_memory)
    return hierarchical(shape, rank);
  }
  throw Error(MPI_ERR_ARG, "agx: '" + std::string(to_string(a)) + "' is not a node-level algorithm");
}

}  // namespace agx
