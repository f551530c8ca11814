// SimNodes and SimNodeSegment: node-level operations under SMPI (see sim_node.hpp).

#include "sim_node.hpp"

#include <simgrid/actor.h>
#include <simgrid/cond.h>
#include <simgrid/mutex.h>

#include <agx/error.hpp>

#include "core/mpi_check.hpp"

#include <cstring>
#include <map>

namespace agx::sim {

struct NodeState {
  std::vector<std::uint64_t> put;      // per local rank: the generation of its last put
  std::vector<std::uint64_t> arrived;  // per rank of other nodes: the generation in which a
                                       // leader of this node signalled its block in the segment
  std::vector<std::byte> memory;     // checked runs: the segment itself
  std::byte* base = nullptr;
  sg_mutex_t mutex = nullptr;
  sg_cond_t cond = nullptr;
};

namespace {

// Blocks until pred() holds; pred reads the node's flags.
template <class Pred>
void wait_for(NodeState& s, Pred pred) {
  if (pred()) return;
  sg_mutex_lock(s.mutex);
  while (!pred()) sg_cond_wait(s.cond, s.mutex);
  sg_mutex_unlock(s.mutex);
}

void raise(NodeState& s, std::uint64_t& flag, std::uint64_t gen) {
  sg_mutex_lock(s.mutex);
  flag = gen;
  sg_cond_notify_all(s.cond);
  sg_mutex_unlock(s.mutex);
}

void spend(double seconds) {
  if (seconds > 0) sg_actor_sleep_for(seconds);
}

}  // namespace

SimNodes::SimNodes(const std::vector<int>& node_of, MPI_Comm comm, int tag, std::byte* segment,
                   std::size_t segment_bytes, NodeCopyCost cost, bool copy_data)
    : node_of_(node_of), local_of_(node_of.size()), cost_(cost), copy_data_(copy_data) {
  int rank = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  std::map<int, std::vector<int>> members;
  for (std::size_t r = 0; r < node_of.size(); ++r) {
    auto& m = members[node_of[r]];
    local_of_[r] = static_cast<int>(m.size());
    m.push_back(static_cast<int>(r));
  }
  rank_ = rank;
  node_ = node_of_[static_cast<std::size_t>(rank)];
  local_ = local_of_[static_cast<std::size_t>(rank)];
  const std::vector<int>& mine = members[node_];
  owner_ = local_ == 0;
  unsigned long long address = 0;
  if (owner_) {
    state_ = new NodeState;
    state_->put.assign(mine.size(), 0);
    state_->arrived.assign(node_of.size(), 0);
    if (segment == nullptr) {
      state_->memory.resize(segment_bytes);
      state_->base = state_->memory.data();
    } else {
      state_->base = segment;
    }
    state_->mutex = sg_mutex_init();
    state_->cond = sg_cond_init();
    address = reinterpret_cast<std::uintptr_t>(state_);
    for (std::size_t l = 1; l < mine.size(); ++l)
      check_mpi(MPI_Send(&address, 1, MPI_UNSIGNED_LONG_LONG, mine[l], tag, comm), "MPI_Send");
  } else {
    check_mpi(MPI_Recv(&address, 1, MPI_UNSIGNED_LONG_LONG, mine[0], tag, comm, MPI_STATUS_IGNORE),
              "MPI_Recv");
    state_ = reinterpret_cast<NodeState*>(static_cast<std::uintptr_t>(address));
  }
}

SimNodes::~SimNodes() {
  if (!owner_) return;  // (the driver ends every call on every rank before this)
  sg_cond_destroy(state_->cond);
  sg_mutex_destroy(state_->mutex);
  delete state_;
}

SimNodeSegment::SimNodeSegment(SimNodes& nodes, const Schedule& planned, const Schedule& executed,
                               const Layout& layout)
    : nodes_(nodes), gen_(nodes.next_gen()) {
  // The segment holds every block, node-major, members by rank (as lib/hier's).
  const int n = layout.nranks();
  std::map<int, std::vector<int>> by_node;
  for (int r = 0; r < n; ++r) by_node[nodes.node_of()[static_cast<std::size_t>(r)]].push_back(r);
  std::vector<std::size_t>& bytes = bytes_;  // (Layout does not own its spans)
  bytes.resize(static_cast<std::size_t>(n));
  offsets_.resize(bytes.size());
  std::size_t total = 0;
  for (const auto& [node, members] : by_node)
    for (int r : members) {
      offsets_[static_cast<std::size_t>(r)] = total;
      bytes[static_cast<std::size_t>(r)] = layout.bytes(r);
      total += layout.bytes(r);
    }
  seg_layout_ = Layout::varying(bytes, offsets_);
  seg_buffers_ = Buffers{nullptr, nodes.state().base, true};
  if (planned.rounds.size() != executed.rounds.size())
    throw Error(MPI_ERR_INTERN, "agx-sim: executed schedule differs in rounds from the planned one");
  for (std::size_t k = 0; k < planned.rounds.size(); ++k) {
    const Round& p = planned.rounds[k];
    const Round& e = executed.rounds[k];
    for (std::size_t i = 0; i < p.sends.size() && i < e.sends.size(); ++i) planned_of_[&e.sends[i]] = &p.sends[i];
  }
}

void SimNodeSegment::put(const NodeOp& op, const Buffers& mine, const Layout& layout, bool signal) {
  NodeState& s = nodes_.state();
  std::size_t bytes = 0;
  for (const BlockSpan& span : op.blocks)
    for (int b = span.first; b < span.first + span.count; ++b) {
      const std::size_t len = layout.bytes(b);
      bytes += len;
      if (!nodes_.copy_data() || len == 0) continue;
      const void* from = (b == nodes_.rank() && !mine.in_place)
                             ? mine.send
                             : static_cast<const std::byte*>(mine.recv) + layout.offset(b);
      std::memcpy(s.base + offsets_[static_cast<std::size_t>(b)], from, len);
    }
  spend(nodes_.cost().sync_s + nodes_.cost().copy_s_per_byte * static_cast<double>(bytes));
  if (signal) raise(s, s.put[static_cast<std::size_t>(nodes_.local())], gen_);
}

// As lib/hier's staged segment: the own block's flag; each block received into the
// segment shows up with the signal that covers it (lib/hier: the leader's count of such
// signals; here, per block).
void SimNodeSegment::signal(const NodeOp& op) {
  NodeState& s = nodes_.state();
  for (const BlockSpan& span : op.blocks)
    for (int b = span.first; b < span.first + span.count; ++b) {
      if (nodes_.node_of()[static_cast<std::size_t>(b)] == nodes_.node())
        raise(s, s.put[static_cast<std::size_t>(nodes_.local())], gen_);
      else
        raise(s, s.arrived[static_cast<std::size_t>(b)], gen_);
    }
}

bool SimNodeSegment::try_wait(const NodeOp& op) {
  NodeState& s = nodes_.state();
  for (const BlockSpan& span : op.blocks)
    for (int b = span.first; b < span.first + span.count; ++b) {
      if (nodes_.node_of()[static_cast<std::size_t>(b)] == nodes_.node()) {
        const std::size_t l = static_cast<std::size_t>(nodes_.local_of(b));
        wait_for(s, [&] { return s.put[l] >= gen_; });
      } else {
        wait_for(s, [&] { return s.arrived[static_cast<std::size_t>(b)] >= gen_; });
      }
    }
  return true;
}

bool SimNodeSegment::try_get(const NodeOp& op, GetCursor& cursor, const Buffers& mine,
                             const Layout& layout) {
  NodeState& s = nodes_.state();
  const auto& node_of = nodes_.node_of();
  // Copies go block by block as their flags allow; the copy time of the blocks copied so
  // far is spent before each wait, so a late flag delays only what comes after it.
  std::size_t pending = 0;
  for (const BlockSpan& span : op.blocks)
    for (int b = span.first; b < span.first + span.count; ++b) {
      const bool local = node_of[static_cast<std::size_t>(b)] == nodes_.node();
      const std::size_t l = static_cast<std::size_t>(nodes_.local_of(b));
      const auto up = [&] { return local ? s.put[l] >= gen_ : s.arrived[static_cast<std::size_t>(b)] >= gen_; };
      if (!up()) {
        spend(nodes_.cost().copy_s_per_byte * static_cast<double>(pending));
        pending = 0;
        wait_for(s, up);
      }
      const std::size_t len = layout.bytes(b);
      pending += len;
      if (nodes_.copy_data() && len > 0)
        std::memcpy(static_cast<std::byte*>(mine.recv) + layout.offset(b),
                    s.base + offsets_[static_cast<std::size_t>(b)], len);
      ++cursor.block;
    }
  spend(nodes_.cost().sync_s + nodes_.cost().copy_s_per_byte * static_cast<double>(pending));
  return true;
}

bool SimNodeSegment::holds(const Transfer& send) {
  NodeState& s = nodes_.state();
  const auto it = planned_of_.find(&send);
  const Transfer& t = it != planned_of_.end() ? *it->second : send;
  for (const BlockSpan& span : t.blocks)
    for (int b = span.first; b < span.first + span.count; ++b) {
      if (nodes_.node_of()[static_cast<std::size_t>(b)] != nodes_.node()) continue;
      const std::size_t l = static_cast<std::size_t>(nodes_.local_of(b));
      wait_for(s, [&] { return s.put[l] >= gen_; });  // (never needs its own rank's: put earlier)
    }
  return true;
}

void SimNodeSegment::segment_round_done(bool) {}  // (blocks show up with their signals)

}  // namespace agx::sim
