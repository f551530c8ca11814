#pragma once
// The cost model: the predicted time of a schedule, computed from the schedule itself
// (rounds, bytes per message, the level each operation is marked with (core/schedule.hpp:
// the cost model marks a planner's messages from the placement), how many messages a rank
// handles per round), never from a per-algorithm formula that could drift from its plan.
//
//   time = Σ_rounds max_ranks max_levels [ α_l + ρ_l + o_l · (msgs_l - 1) + β_l · bytes_l ]
//          + γ · own block
//
// α_l: one round's latency; o_l: each further message of the round (they overlap, so o is
// far below α); ρ_l: a rendezvous, added where the round's largest message on level l is
// above the level's eager limit (the MPI library then hands the message over in a second
// step; 0 where not measured); msgs_l / bytes_l: the larger of what a rank sends and receives on level l
// (levels run in parallel, a rank's messages on one level share its link). On the network
// level, the bytes of all ranks of a node that cross it in the same round share the NIC.
// γ: the local copies (a schedule's copy operations: the own block, out of place; none
// in place), per byte at the rate of a call of this size (copy_s_per_byte_at: copies
// whose data stays in the caches run faster; in place at copy_s_per_byte, the 4 MiB
// rate, for the reason cost_model.cpp gives).
// Node-level operations (puts and gets on the node's segment, core/schedule.hpp): a rank's
// round with any of them costs at least σ + γ · (bytes it puts and gets), σ one flag
// synchronization (CostParams::node_sync_s); its messages of that round overlap them.
// So shared_memory and hierarchical are priced from their schedules too.
// Device-level operations (a staged schedule, stage_on_device: device buffers staged
// through a host mirror) run on the device's copy engines beside the rounds, at
// CostParams::device (α_d, β_d: PCIe), chunk by chunk (device_chunk_bytes):
//   to_host of X bytes in a round:  that round ≥ max(α_d + β_d·min(X, chunk) + its
//                                   messages, α_d + β_d·X) (a send waits for the chunks it reads);
//                                   with a put (a staged node schedule): α_d + β_d·X + the
//                                   rest of the round (the put waits for the whole block)
//   to_device of Y bytes in round k: a per-rank device clock d = max(d + α_d + β_d·Y,
//                                   end of round k + α_d + β_d·min(Y, chunk)) (copies follow the
//                                   receives; the last chunk's copy follows the round)
//   the own copy on the device:     d ≥ α_d + X · device_copy_s_per_byte (its own stream)
// and the call ends at the later of its last round and its ranks' device clocks.
//
// Groups (optional): nodes may be placed in groups joined by one link per pair of groups,
// as a dragonfly's groups are by their global links. Then, per round, the bytes that all
// ranks of group a send to group b share that link:
//          round ≥ α_network + β_group · max over (a, b) of bytes(a → b)
// Off unless the caller knows the groups (Placement::with_groups and β_group > 0);
// libagx does not detect them, the simulator passes its platform's. With groups and
// CostParams::group_alpha_s, a network message inside a group has that α instead of the
// network's (the longest path's), and a rank's network round the largest α of its messages.
//
// Routes (optional, Placement::with_routes): the links of a platform and the path between
// any two nodes, as a simulator knows them (libagx does not know its own). Then, up to
// kRoutedRanks ranks (the link loads need every rank's schedule), every rank keeps its
// own clock, the time it enters a round (rounds are no barriers: a rank goes on once its
// own messages are done, as an MPI library's ranks do), and every message between two
// ranks is a flow on its own path:
//          start   = the later of its two ranks' clocks (a message is handed over
//                    once its receive is posted, as SMPI does by default)
//          arrival = start + per_message_s + Σ latency of its links
//                    + its longest time on one link of its path
// A link is shared as SimGrid's fluid model shares one: the flows on it at one instant
// progress at equal rates (processor sharing, from each flow's start); a fat pipe gives
// each the whole rate. So two flows share a link only while both are on it: the short
// far messages of Bruck's last rounds, sent by ranks that reach that round at different
// instants, mostly do not meet, while flows that start together split the rate as
// before. A round with a message of rendezvous_bytes or more begins for every rank when
// the last one enters it, a barrier: SMPI's times of such rounds follow that (neighbour
// exchange at 1 MiB on the dragonfly 64 × 8: simulated 278 µs, barrier rounds 275 µs,
// per-rank clocks 235 µs; docs/scale.md). A rank's routed messages of a round, both levels together (one
// wait for all of them), then cost what an MPI library that hands small messages over
// eagerly and large ones by rendezvous spends: a message below rendezvous_bytes (eager;
// every message when it is 0) costs its sender nothing more and its receiver
// recv_overhead_s once it has arrived, one message at a time in the order they arrive;
// a message of rendezvous_bytes or more keeps its sender until it is delivered and
// costs no CPU time:
//          done = max(t_n, the slowest rendezvous send),  t_0 = its clock,
//                 t_j = max(t_(j-1), arrival_j) + (eager_j ? recv_overhead_s : 0)
// over its receives in the order of their arrival; its clock then moves to the later of
// that and its clock plus the rest of its round (level-priced messages inside its node,
// node operations, copies). The prediction is the latest clock after the last round.
// This replaces, where a route exists, α_l, β_l, o_l, the NIC sharing, the group term and
// group α: two messages that meet on a router link share it, a message to a near node
// pays fewer hops, a rank that sends many messages and receives few pays for the few.

#include <agx/bytes.hpp>

#include "core/planner.hpp"

#include <array>
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace agx {

struct LevelCost {
  double alpha_s = 0;           ///< latency of a round with one message each way
  double beta_s_per_byte = 0;   ///< per byte on the wire
  double overhead_s = 0;        ///< each further message in the same round
  double rendezvous_s = 0;      ///< added to a round with a message above eager_bytes
  std::size_t eager_bytes = 0;  ///< largest message sent eagerly; 0: no rendezvous step
};

/// One point of the copy rate by call size (CostParams::copy_rates).
struct CopyRate {
  std::size_t bytes = 0;  ///< bytes per rank of the call (what each rank's receive buffer holds)
  double s_per_byte = 0;
};

/// Up to eight CopyRate points in increasing bytes (fixed storage: CostParams stays a
/// plain value).
class CopyRates {
 public:
  static constexpr std::size_t capacity = 8;
  /// This machine's points (agx-tune at N = 2, docs/tuning.md): the built-in default of
  /// CostParams::copy_rates.
  static CopyRates measured_here() {
    CopyRates r;
    r.push_back({64 << 10, 1.0 / 30e9});
    r.push_back({256 << 10, 1.0 / 23e9});
    r.push_back({1 << 20, 1.0 / 19e9});
    r.push_back({4 << 20, 1.0 / 16e9});
    r.push_back({16 << 20, 1.0 / 3.6e9});
    return r;
  }
  void push_back(const CopyRate& c) {
    if (count_ < capacity) points_[count_++] = c;
  }
  void clear() { count_ = 0; }
  bool empty() const { return count_ == 0; }
  bool full() const { return count_ == capacity; }
  std::size_t size() const { return count_; }
  const CopyRate& operator[](std::size_t i) const { return points_[i]; }
  const CopyRate& front() const { return points_[0]; }
  const CopyRate& back() const { return points_[count_ - 1]; }
  const CopyRate* begin() const { return points_.data(); }
  const CopyRate* end() const { return points_.data() + count_; }

 private:
  std::array<CopyRate, capacity> points_{};
  std::size_t count_ = 0;
};

/// α/β per level and the local copy cost. Built-in defaults: docs/tuning.md. The node
/// α is the latency of a round of MPI point-to-point inside a node, 2 µs; above the MPI
/// library's eager limit (4 KiB in Open MPI's vader) a rendezvous adds 4 µs (at N = 2,
/// one message each way, measured through agx: 1 KiB 2.4 µs, 4 KiB 5.4 µs, 16 KiB 9.6 µs
/// in place, where the α-β line alone said 5.1 µs and so preferred point-to-point to
/// shared memory at 16 KiB, which was twice as fast out of place).
struct CostParams {
  LevelCost node{2.0e-6, 1.0 / 5.3e9, 0.1e-6, 4.0e-6, 4000};
  LevelCost network{3.0e-6, 1.0 / 11.0e9, 0.5e-6};
  double copy_s_per_byte = 1.0 / 9.2e9;  ///< every rank copying 4 MiB at once (agx-tune, this machine)
  /// The copy rate by the size of the call (copy_s_per_byte_at, below): copies of a call
  /// whose data stays in the caches run faster than those of a 4 MiB copy. Points of
  /// (bytes per rank of the call, s/byte), increasing bytes, measured by agx-tune as
  /// copy_s_per_byte at several sizes; empty: copy_s_per_byte at every size. Built in:
  /// this machine's points (measured_here), with which `auto` takes shared_memory at
  /// N = 2 up to 2 MiB out of place, measured faster by agx-bench and by OSU's sweep
  /// (docs/results.md); a tuning file's copy.rate lines replace them, and a file with
  /// copy_s_per_byte and no copy.rate line has that one rate at every size.
  CopyRates copy_rates = CopyRates::measured_here();
  /// One shared-memory synchronization among the ranks of a node (flags, no MPI).
  double node_sync_s = 0.2e-6;
  /// Per byte on the one link between two groups of nodes; 0: no group level.
  double group_link_s_per_byte = 0;
  /// α of a network message between two nodes of the same group (fewer hops than the
  /// longest path that network.alpha_s stands for); 0: network.alpha_s. Needs groups in
  /// the placement (Placement::with_groups); a network round then costs the largest α of
  /// its messages. Set by the simulator from its platform (the tuning file does not yet).
  double group_alpha_s = 0;
  /// Copies between device and host memory (staged schedules): α of one copy, β over
  /// PCIe. Uncalibrated defaults for an H100/H200-class node (docs/gpu.md); lib/cuda
  /// sets them from its path model.
  LevelCost device{8e-6, 1.0 / 25e9};
  double device_copy_s_per_byte = 1.0 / 1000e9;  ///< device to device (the own block)
  /// Device-level node operations (CUDA IPC's single copy, NodeShape::device_ipc): α of a
  /// round of them (an event, a wait, a barrier of lib/cuda's), β of a read from a peer's
  /// device (NVLink or PCIe peer to peer). lib/cuda sets them from its path model.
  LevelCost device_peer{2e-6, 1.0 / 150e9};
  std::size_t device_chunk_bytes = std::size_t{1} << 20;  ///< staging's chunk
};

/// One link of a routed network (Routes).
struct RouteLink {
  double s_per_byte = 0;
  double latency_s = 0;
  bool fatpipe = false;  ///< every message gets the full rate (no sharing)
};

/// A platform's links and the path between two nodes over them (see the comment above).
struct Routes {
  std::vector<RouteLink> links;
  /// Appends the links from node `from` to node `to` (from == to: a message inside the
  /// node; no links appended: that pair is priced by its level's α/β).
  std::function<void(int from, int to, std::vector<int>& links)> path;
  double per_message_s = 0;    ///< added to each message's time on its path
  double recv_overhead_s = 0;  ///< the receiver's CPU time per eager message, once arrived
  std::size_t rendezvous_bytes = 0;  ///< messages this large or larger: rendezvous (0: none)
};

/// Routes are used up to this many ranks (the link loads need every rank's schedule);
/// beyond, the level model with its sampled ranks.
constexpr int kRoutedRanks = 4096;

/// Seconds per byte of the local copies (own block, puts and gets) of an out-of-place call whose
/// receive buffer holds `call_bytes` on each rank: copy_rates interpolated log-linearly
/// in bytes, the first or last point's rate outside them; copy_s_per_byte without points.
double copy_s_per_byte_at(const CostParams& params, std::size_t call_bytes);

/// Which node each rank is on; messages between nodes cross the network.
class Placement {
 public:
  static Placement single_node(int nranks) { return Placement(std::vector<int>(nranks, 0)); }
  explicit Placement(std::vector<int> node_of)
      : node_of_(std::move(node_of)), nodes_(count_nodes(node_of_)) {}
  /// The same placement with nodes in groups: group_of_node[j] is node j's group.
  Placement with_groups(std::vector<int> group_of_node) const;
  /// The same placement with the network's routes (a simulator's platform).
  Placement with_routes(std::shared_ptr<const Routes> routes) const;
  /// The routes, when given and usable at this rank count; else null.
  const Routes* routes() const { return routes_ && nranks() <= kRoutedRanks ? routes_.get() : nullptr; }
  int nranks() const { return static_cast<int>(node_of_.size()); }
  int node_of(int rank) const { return node_of_[static_cast<std::size_t>(rank)]; }
  const std::vector<int>& node_of() const { return node_of_; }
  int nodes() const { return nodes_; }  ///< (counted once: calls ask it per call)
  bool has_groups() const { return !group_of_node_.empty(); }
  /// The group of a rank's node (0 without groups).
  int group_of(int rank) const {
    return has_groups() ? group_of_node_[static_cast<std::size_t>(node_of(rank))] : 0;
  }

 private:
  static int count_nodes(const std::vector<int>& node_of);
  std::vector<int> node_of_;
  int nodes_ = 0;
  std::vector<int> group_of_node_;  // empty: no groups
  std::shared_ptr<const Routes> routes_;
};

/// Predicted seconds of `planner` for this call. Exact over all ranks up to 256 ranks;
/// beyond, over a fixed sample of ranks (the first, last, middle, and the ranks where
/// folding algorithms change role), the same on every rank; with groups, the sample also
/// holds every rank of rank 0's group, so that group's outgoing links are counted exactly.
/// `radix` is the planner's parameter (Problem::radix).
///
/// `at_most` (every predict_* below): a chooser's best time so far. The prediction is exact
/// when it is at most `at_most`; when it is more, a lower bound of it that is above
/// `at_most` may come back instead, which is all a chooser needs to drop the candidate
/// (Selector, core/select.cpp): the prices of fewer ranks (a round's terms are sums and
/// maxima over the ranks priced; with routes, each of their messages alone on its links,
/// since a link shared in time is not monotone in when messages start) or of the first
/// rounds. So a chooser that prices the
/// likely winners first skips most of the work of the rest: at 4096 ranks with routes,
/// the N − 1 rounds of every rank's ring. at_most = 0 gives a cheap lower bound.
double predict_seconds(const Planner& planner, const Layout& layout, const Placement& placement,
                       const CostParams& params, bool in_place = false, int radix = 0,
                       double at_most = std::numeric_limits<double>::infinity());

/// How a node stage is cut: leaders per node, the inter-node algorithm (unset: the
/// rule of hier_inter_algorithm, core/planner.hpp).
struct NodeStageParams {
  int leaders = 1;
  std::optional<AlgorithmChoice> inter;
  bool direct_write = false;  ///< one node: shared_memory by direct write (NodeShape)
  /// One node: shared_memory may read by single copy (NodeShape::single_copy), priced as
  /// the faster of it and staging (lib/hier times the two on the first calls of a size
  /// and keeps the faster)
  bool single_copy = false;
};

/// shared_memory or hierarchical, priced from the schedule their planner makes for this
/// placement (lib/core/planners/node_planner.cpp): puts and gets cost a flag synchronization plus
/// their bytes at the copy rate (a write its bytes once per peer on the node, a read its
/// bytes at the node level's point-to-point rate), the leaders' messages as any other.
double predict_node_algorithm(Algorithm a, const Layout& layout, const Placement& placement,
                              const CostParams& params, bool in_place,
                              const NodeStageParams& stage = {},
                              double at_most = std::numeric_limits<double>::infinity());

/// Any concrete algorithm with its parameters (schedules, shared_memory, hierarchical).
/// Infinity when the algorithm cannot serve this placement (shared_memory across nodes).
double predict_algorithm(const AlgorithmChoice& a, const Layout& layout, const Placement& placement,
                         const CostParams& params, bool in_place,
                         const NodeStageParams& stage = {},
                         double at_most = std::numeric_limits<double>::infinity());

/// An algorithm on device buffers staged through host mirrors: the price of every rank's
/// staged schedule (stage_on_device), device copies included; for shared_memory and
/// hierarchical the node schedule cut as `stage` says, with its puts and gets (the
/// staged form: single copy and direct write have none). Infinity where the algorithm
/// cannot serve the placement.
double predict_staged(const AlgorithmChoice& a, const Layout& layout, const Placement& placement,
                      const CostParams& params, bool in_place, const NodeStageParams& stage = {});

/// CUDA IPC on one node: shared_memory's single-copy schedule at the device level
/// (NodeShape::device_ipc), priced as planned (the own copy on the device clock, the reads
/// at device_peer). Infinity across nodes.
double predict_ipc(const Layout& layout, const Placement& placement, const CostParams& params,
                   bool in_place);

/// The ranks whose schedules the prediction looks at.
std::vector<int> sampled_ranks(int nranks);

}  // namespace agx
