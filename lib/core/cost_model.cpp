#include "core/cost_model.hpp"

#include <agx/error.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <queue>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace agx {

int Placement::count_nodes(const std::vector<int>& node_of) {
  return static_cast<int>(std::set<int>(node_of.begin(), node_of.end()).size());
}

Placement Placement::with_routes(std::shared_ptr<const Routes> routes) const {
  Placement p = *this;
  p.routes_ = std::move(routes);
  return p;
}

Placement Placement::with_groups(std::vector<int> group_of_node) const {
  Placement p = *this;
  p.group_of_node_ = std::move(group_of_node);
  for (int node : node_of_)
    if (node < 0 || node >= static_cast<int>(p.group_of_node_.size()))
      throw Error(MPI_ERR_ARG, "agx: Placement::with_groups: node " + std::to_string(node) +
                                   " has no group");
  return p;
}

double copy_s_per_byte_at(const CostParams& params, std::size_t call_bytes) {
  const CopyRates& pts = params.copy_rates;
  if (pts.empty()) return params.copy_s_per_byte;
  if (call_bytes <= pts.front().bytes) return pts.front().s_per_byte;
  for (std::size_t i = 1; i < pts.size(); ++i) {
    if (call_bytes > pts[i].bytes) continue;
    const double f = std::log(static_cast<double>(call_bytes) / static_cast<double>(pts[i - 1].bytes)) /
                     std::log(static_cast<double>(pts[i].bytes) / static_cast<double>(pts[i - 1].bytes));
    return pts[i - 1].s_per_byte + f * (pts[i].s_per_byte - pts[i - 1].s_per_byte);
  }
  return pts.back().s_per_byte;
}

std::vector<int> sampled_ranks(int n) {
  std::vector<int> ranks;
  if (n <= 256) {
    for (int r = 0; r < n; ++r) ranks.push_back(r);
    return ranks;
  }
  int p = 1;
  while (p * 2 <= n) p *= 2;
  std::set<int> s{0, 1, 2, n / 2, n / 2 + 1, n - 2, n - 1, p - 1, std::min(p, n - 1),
                  std::max(0, n - p - 1), n - p};
  return {s.begin(), s.end()};
}

namespace {

struct Load {  // one rank, one round, one level: the messages priced by the level's α/β
  std::size_t msgs_out = 0, msgs_in = 0, bytes_out = 0, bytes_in = 0;
  std::size_t largest = 0;  // the largest message sent or received
  bool far = false;  // network level: a message leaves the group (or no groups are known)
};

std::size_t transfer_bytes(const Transfer& t, const Layout& layout) {
  std::size_t bytes = 0;
  for (const BlockSpan& s : t.blocks)
    for (int b = s.first; b < s.first + s.count; ++b) bytes += layout.bytes(b);
  return bytes;
}

}  // namespace

namespace {

// A routed message of a round: from its start (both ends in the round) it takes its
// path's latency plus its delay on the slowest link of its path.
struct Flow {
  int from, to;
  double start, bytes, latency, delay;
};

// The flows `on` one link share it as SimGrid's fluid model shares a link: at any
// instant the flows there progress at equal rates, rate/(flows there) each (processor
// sharing), each from its start; a fat pipe gives each flow the whole rate. Raises each
// flow's delay to its time on this link. Virtual time V grows at 1/(flows there) per
// second, so a flow that starts at V0 leaves when V reaches V0 + its bytes·β. `alone`:
// every flow as if alone on the link (a chooser's bound, predict_plans).
void share_link(const RouteLink& link, std::vector<int>& on, std::vector<Flow>& flows, bool alone) {
  if (alone || link.fatpipe || on.size() == 1) {
    for (int f : on) flows[static_cast<std::size_t>(f)].delay = std::max(flows[static_cast<std::size_t>(f)].delay, flows[static_cast<std::size_t>(f)].bytes * link.s_per_byte);
    return;
  }
  std::sort(on.begin(), on.end(), [&](int a, int b) {
    return flows[static_cast<std::size_t>(a)].start < flows[static_cast<std::size_t>(b)].start;
  });
  using Leaving = std::pair<double, int>;  // (virtual time it leaves, flow)
  std::priority_queue<Leaving, std::vector<Leaving>, std::greater<>> there;
  double v = 0, t = flows[static_cast<std::size_t>(on.front())].start;
  for (std::size_t next = 0; next < on.size() || !there.empty();) {
    const double arrives = next < on.size() ? flows[static_cast<std::size_t>(on[next])].start
                                            : std::numeric_limits<double>::infinity();
    const auto active = static_cast<double>(there.size());
    const double leaves = there.empty() ? std::numeric_limits<double>::infinity()
                                        : t + (there.top().first - v) * active;
    if (arrives <= leaves) {
      if (active > 0) v += (arrives - t) / active;
      t = arrives;
      const Flow& f = flows[static_cast<std::size_t>(on[next++])];
      there.emplace(v + f.bytes * link.s_per_byte, on[next - 1]);
    } else {
      Flow& f = flows[static_cast<std::size_t>(there.top().second)];
      v = there.top().first;
      t = leaves;
      f.delay = std::max(f.delay, t - f.start);
      there.pop();
    }
  }
}

// The prediction over the schedules `plans` of the sampled `ranks` (see the header).
double predict_plans(const std::vector<Schedule>& plans, const std::vector<int>& ranks,
                     const Layout& layout, const Placement& placement, const CostParams& params,
                     bool in_place, double at_most, bool alone = false) {
  const int n = layout.nranks();
  // With routes the group links are links of the routes: no group term of its own.
  const bool groups = placement.has_groups() && params.group_link_s_per_byte > 0 && placement.routes() == nullptr;
  const bool near_alpha = placement.has_groups() && params.group_alpha_s > 0;
  std::size_t nrounds = 0;
  for (const Schedule& s : plans) nrounds = std::max(nrounds, s.rounds.size());
  const std::array<LevelCost, 2> cost{params.node, params.network};  // indexed by Level
  // Routes: every rank keeps its own clock (the time it enters the round); a round's
  // routed messages are flows that start once both ends have entered it, share each
  // link of their paths with the flows there at the same time, and arrive at their
  // receiver (see the header). arrival: key from·n + to.
  const Routes* routes = placement.routes();
  std::vector<double> clock(routes ? static_cast<std::size_t>(n) : 0, 0.0);
  std::vector<Flow> flows;
  std::vector<std::vector<int>> link_flows(routes ? routes->links.size() : 0);
  std::vector<int> touched, path;
  std::unordered_map<long long, double> arrival;
  std::vector<std::pair<double, bool>> arrivals;  // a rank's routed receives: time, eager
  const auto route = [&](int from, int to) -> const std::vector<int>& {
    path.clear();
    routes->path(placement.node_of(from), placement.node_of(to), path);
    return path;
  };
  const auto latency_of = [&](const std::vector<int>& links) {
    double latency = routes->per_message_s;
    for (int id : links) latency += routes->links[static_cast<std::size_t>(id)].latency_s;
    return latency;
  };
  std::size_t call_bytes = 0;  // what each rank's receive buffer holds
  for (int b = 0; b < n; ++b) call_bytes += layout.bytes(b);
  // In place at the 4 MiB rate: there the shared-memory path's copies run at the cached
  // rate in some runs and 2-2.6x slower in others (docs/hierarchy.md, "Copies and 4K
  // aliasing"), so the cached rate would choose it where, taken over runs, it loses.
  const double gamma = in_place ? params.copy_s_per_byte : copy_s_per_byte_at(params, call_bytes);
  double total = 0;
  // A round's per-rank tallies (kept across rounds: a round only resets them).
  std::unordered_map<int, std::size_t> nic_bytes;  // network bytes leaving each node
  std::unordered_map<long long, std::size_t> group_bytes;  // group a -> b (key a·n + b)
  std::vector<std::array<Load, 2>> loads(plans.size());
  std::vector<std::size_t> copied(plans.size()), local(plans.size()), read(plans.size());
  std::vector<char> node_ops(plans.size());  // 1: node-level operations, 2: device-level
  // Ranks per node, counted on the first write (a write copies its blocks to every peer).
  std::unordered_map<int, int> node_size;
  const auto peers_of = [&](int r) {
    if (node_size.empty())
      for (int q = 0; q < n; ++q) ++node_size[placement.node_of(q)];
    return static_cast<std::size_t>(node_size[placement.node_of(r)] - 1);
  };
  std::vector<double> routed_done(plans.size());
  // Device copies (staged schedules): each rank's device clock, this round's to_device bytes.
  std::vector<double> device_clock(plans.size(), 0.0);
  // A CUDA IPC schedule (device-level node operations): its own device copy precedes the
  // event its peers' reads wait for, so it is part of its round, not beside the rounds.
  std::vector<char> ipc(plans.size(), 0);
  std::vector<double> own_device(plans.size(), 0.0);  // a round's such copy
  for (std::size_t i = 0; i < plans.size(); ++i)
    for (const Round& round : plans[i].rounds)
      for (const NodeOp& op : round.node) ipc[i] |= op.level == Level::device;
  std::vector<std::size_t> to_host(plans.size()), to_device(plans.size());
  const LevelCost& dev = params.device;
  const auto chunk = static_cast<double>(std::max<std::size_t>(params.device_chunk_bytes, 1));
  // Rank i's round that delivered to_device[i] bytes ended at `end`: its copies follow.
  const auto to_device_after = [&](std::size_t i, double end) {
    if (to_device[i] == 0) return;
    const auto y = static_cast<double>(to_device[i]);
    device_clock[i] = std::max(device_clock[i] + dev.alpha_s + dev.beta_s_per_byte * y,
                               end + dev.alpha_s + dev.beta_s_per_byte * std::min(y, chunk));
  };
  for (std::size_t k = 0; k < nrounds; ++k) {
    if (total > at_most) return total;  // a lower bound already above at_most (see the header)
    if (routes) {  // the round's flows, shared link by link
      // A round with a rendezvous message: every rank enters it when the last one does
      // (see the header).
      bool rendezvous = false;
      for (std::size_t i = 0; i < plans.size() && !rendezvous; ++i)
        if (k < plans[i].rounds.size())
          for (const Transfer& t : plans[i].rounds[k].sends)
            if (routes->rendezvous_bytes > 0 && transfer_bytes(t, layout) >= routes->rendezvous_bytes) rendezvous = true;
      if (rendezvous)
        for (std::size_t i = 0; i < plans.size(); ++i) clock[static_cast<std::size_t>(ranks[i])] = total;
      flows.clear();
      for (int id : touched) link_flows[static_cast<std::size_t>(id)].clear();
      touched.clear();
      for (std::size_t i = 0; i < plans.size(); ++i) {
        if (k >= plans[i].rounds.size()) continue;
        const int from = ranks[i];
        for (const Transfer& t : plans[i].rounds[k].sends) {
          const std::vector<int>& links = route(from, t.peer);
          if (links.empty()) continue;
          const auto f = static_cast<int>(flows.size());
          flows.push_back({from, t.peer, std::max(clock[static_cast<std::size_t>(from)], clock[static_cast<std::size_t>(t.peer)]),
                           static_cast<double>(transfer_bytes(t, layout)), latency_of(links), 0.0});
          for (int id : links) {
            auto& on = link_flows[static_cast<std::size_t>(id)];
            if (on.empty()) touched.push_back(id);
            on.push_back(f);
          }
        }
      }
      // `alone` (a chooser's bound over fewer ranks): every flow as if alone on its links.
      // A link shared in time is not monotone in the flows' starts (an unpriced receiver's
      // clock counts as 0, so a flow may start earlier than it would and meet another),
      // but a flow alone is never slower than shared: the bound stays below the whole.
      for (int id : touched)
        share_link(routes->links[static_cast<std::size_t>(id)], link_flows[static_cast<std::size_t>(id)], flows, alone);
      arrival.clear();
      for (const Flow& f : flows) {
        double& a = arrival[static_cast<long long>(f.from) * n + f.to];
        a = std::max(a, f.start + f.latency + f.delay);
      }
    }
    // Network bytes leaving each node this round (sampled ranks only beyond 256 ranks);
    // bytes from group a to group b, when groups are modelled; per rank: its loads, the
    // bytes of its puts, gets and writes, of its reads, of its local copies, whether it has node operations,
    // when its routed messages are done.
    nic_bytes.clear();
    group_bytes.clear();
    std::fill(loads.begin(), loads.end(), std::array<Load, 2>{});
    std::fill(copied.begin(), copied.end(), 0);
    std::fill(read.begin(), read.end(), 0);
    std::fill(own_device.begin(), own_device.end(), 0.0);
    std::fill(local.begin(), local.end(), 0);
    std::fill(node_ops.begin(), node_ops.end(), 0);
    std::fill(routed_done.begin(), routed_done.end(), 0.0);
    std::fill(to_host.begin(), to_host.end(), 0);
    std::fill(to_device.begin(), to_device.end(), 0);
    for (std::size_t i = 0; i < plans.size(); ++i) {
      if (k >= plans[i].rounds.size()) continue;
      const int r = ranks[i];
      const Round& round = plans[i].rounds[k];
      const auto mark_far = [&](Load& l, int peer) {
        l.far = l.far || !near_alpha || placement.group_of(r) != placement.group_of(peer);
      };
      // A message on its route (routes given and the pair has a path): when it arrives;
      // else < 0. A sender that is not priced (a chooser's bound on fewer ranks, at_most)
      // counts as entering the round at 0, its message as alone on its links.
      const auto on_route = [&](int from, int to, std::size_t bytes) {
        if (!routes) return -1.0;
        if (auto it = arrival.find(static_cast<long long>(from) * n + to); it != arrival.end()) return it->second;
        const std::vector<int>& links = route(from, to);
        if (links.empty()) return -1.0;
        double alone = 0;
        for (int id : links) alone = std::max(alone, routes->links[static_cast<std::size_t>(id)].s_per_byte);
        return clock[static_cast<std::size_t>(to)] + latency_of(links) + alone * static_cast<double>(bytes);
      };
      arrivals.clear();
      const double entered = routes ? clock[static_cast<std::size_t>(r)] : 0.0;
      double sends_wait = entered;  // the slowest rendezvous send on its route
      for (const Transfer& t : round.sends) {
        Load& l = loads[i][static_cast<int>(t.level)];
        const std::size_t bytes = transfer_bytes(t, layout);
        if (const double at = on_route(r, t.peer, bytes); at >= 0) {
          if (routes->rendezvous_bytes > 0 && bytes >= routes->rendezvous_bytes) sends_wait = std::max(sends_wait, at);
          continue;
        }
        mark_far(l, t.peer);
        ++l.msgs_out;
        l.largest = std::max(l.largest, bytes);
        l.bytes_out += bytes;
        if (groups && placement.group_of(r) != placement.group_of(t.peer))
          group_bytes[static_cast<long long>(placement.group_of(r)) * n + placement.group_of(t.peer)] += bytes;
      }
      for (const Transfer& t : round.recvs) {
        Load& l = loads[i][static_cast<int>(t.level)];
        const std::size_t bytes = transfer_bytes(t, layout);
        if (const double at = on_route(t.peer, r, bytes); at >= 0) {
          arrivals.emplace_back(at, routes->rendezvous_bytes == 0 || bytes < routes->rendezvous_bytes);
          continue;
        }
        mark_far(l, t.peer);
        ++l.msgs_in;
        l.largest = std::max(l.largest, bytes);
        l.bytes_in += bytes;
      }
      // The routed receives in the order they arrive, each eager one followed by the
      // receiver's overhead (see the header).
      std::sort(arrivals.begin(), arrivals.end());
      double done = sends_wait;
      for (double t = entered; const auto& [at, eager] : arrivals) {
        t = std::max(t, at) + (eager ? routes->recv_overhead_s : 0.0);
        done = std::max(done, t);
      }
      routed_done[i] = done;
      for (const NodeOp& op : round.node) {
        node_ops[i] = op.level == Level::device ? 2 : 1;  // (σ: the round's flag synchronization, signals and waits included)
        using K = NodeOp::Kind;
        if (op.kind == K::signal || op.kind == K::wait || op.kind == K::expose || op.kind == K::release)
          continue;  // no bytes
        // (a write: to each peer; a read: at the single copy's rate, below)
        const std::size_t copies = op.kind == K::write ? peers_of(r) : 1;
        std::size_t& into = op.kind == K::read ? read[i] : copied[i];
        for (const BlockSpan& span : op.blocks)
          for (int b = span.first; b < span.first + span.count; ++b) into += copies * layout.bytes(b);
      }
      for (const DeviceCopy& d : round.device)
        for (const BlockSpan& span : d.blocks)
          for (int b = span.first; b < span.first + span.count; ++b)
            (d.kind == DeviceCopy::Kind::to_host ? to_host : to_device)[i] += layout.bytes(b);
      if (!in_place)  // the round's local copies (the own block): nothing to copy in place
        for (const Copy& c : round.copies)
          for (const BlockSpan& span : c.blocks)
            for (int b = span.first; b < span.first + span.count; ++b) {
              if (c.level != Level::device) {
                local[i] += layout.bytes(b);
                continue;
              }
              const double copy = dev.alpha_s + params.device_copy_s_per_byte * static_cast<double>(layout.bytes(b));
              if (ipc[i]) own_device[i] += copy;
              else device_clock[i] = std::max(device_clock[i], copy);
            }
      nic_bytes[placement.node_of(r)] += loads[i][static_cast<int>(Level::network)].bytes_out;
    }
    double round_time = 0;
    for (std::size_t i = 0; i < plans.size(); ++i) {
      if (routes && k >= plans[i].rounds.size()) continue;
      double rank_time = routes ? 0.0 : routed_done[i];
      for (int lv = 0; lv < 2; ++lv) {
        const Load& l = loads[i][lv];
        std::size_t bytes = std::max(l.bytes_out, l.bytes_in);
        const bool network = lv == static_cast<int>(Level::network);
        if (network) bytes = std::max(bytes, nic_bytes[placement.node_of(ranks[i])]);
        const std::size_t msgs = std::max(l.msgs_out, l.msgs_in);
        if (msgs == 0) continue;
        const double alpha = network && !l.far ? params.group_alpha_s : cost[lv].alpha_s;
        const bool rendezvous = cost[lv].eager_bytes > 0 && l.largest > cost[lv].eager_bytes;
        const double t = alpha + cost[lv].beta_s_per_byte * static_cast<double>(bytes) +
                         (rendezvous ? cost[lv].rendezvous_s : 0.0) +
                         cost[lv].overhead_s * static_cast<double>(msgs - 1);
        rank_time = std::max(rank_time, t);
      }
      const double own = gamma * static_cast<double>(local[i]);  // the round's local copies
      rank_time = std::max(rank_time, own_device[i]);  // (an IPC schedule's own device copy)
      if (node_ops[i] == 2) {
        // CUDA IPC (device-level single copy): a round of lib/cuda's synchronization, then
        // the reads from the peers' devices (its own copy: own_device, above).
        rank_time = std::max(rank_time, params.device_peer.alpha_s +
                                            params.device_peer.beta_s_per_byte * static_cast<double>(read[i]));
      } else if (node_ops[i]) {
        // Puts and gets: one flag synchronization, then copies by this rank's core, which
        // also makes the round's local copies; messages of the round overlap them. Reads
        // (single copy) at the node level's rate: the kernel copy that the MPI library's
        // own large messages on a node take too.
        rank_time = std::max(rank_time, params.node_sync_s + own +
                                            gamma * static_cast<double>(copied[i]) +
                                            params.node.beta_s_per_byte * static_cast<double>(read[i]));
      } else {
        rank_time = std::max(rank_time, own);  // local copies overlap the round's messages
      }
      if (to_host[i] > 0) {  // the sends wait for the chunks they read, a put for all
        const auto x = static_cast<double>(to_host[i]);
        bool put = false;
        for (const NodeOp& op : plans[i].rounds[k].node) put = put || op.kind == NodeOp::Kind::put;
        rank_time = put ? dev.alpha_s + dev.beta_s_per_byte * x + rank_time
                        : std::max(dev.alpha_s + dev.beta_s_per_byte * std::min(x, chunk) + rank_time,
                                   dev.alpha_s + dev.beta_s_per_byte * x);
      }
      if (routes) {  // the rank's clock: its routed messages, the rest of the round after it entered
        double& c = clock[static_cast<std::size_t>(ranks[i])];
        c = std::max(c + rank_time, routed_done[i]);
        total = std::max(total, c);
        to_device_after(i, c);
      }
      round_time = std::max(round_time, rank_time);
    }
    if (routes) continue;  // total: the latest clock
    for (const auto& [pair, bytes] : group_bytes)
      round_time = std::max(round_time, params.network.alpha_s + params.group_link_s_per_byte *
                                                                     static_cast<double>(bytes));
    total += round_time;
    for (std::size_t i = 0; i < plans.size(); ++i) to_device_after(i, total);
  }
  for (double d : device_clock) total = std::max(total, d);  // the last device copies
  return total;
}

std::vector<int> prediction_ranks(const Placement& placement, const CostParams& params) {
  const int n = placement.nranks();
  if (placement.routes() != nullptr) {  // link loads need every rank's messages
    std::vector<int> all(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) all[static_cast<std::size_t>(r)] = r;
    return all;
  }
  std::vector<int> ranks = sampled_ranks(n);
  if (placement.has_groups() && params.group_link_s_per_byte > 0 && static_cast<int>(ranks.size()) < n) {
    std::set<int> s(ranks.begin(), ranks.end());
    for (int r = 0; r < n; ++r)
      if (placement.group_of(r) == placement.group_of(0)) s.insert(r);
    ranks.assign(s.begin(), s.end());
  }
  return ranks;
}

// The prediction over the schedules `plan_of(rank)` makes, bounded by at_most (see the
// header): beyond 256 ranks, the sampled ranks' prediction first, a lower bound of the
// whole (every term of a round is a sum or a maximum over the ranks priced, so fewer
// ranks never price more; with routes every flow is priced alone there, see
// predict_plans); then every rank's, stopping once the rounds so far pass at_most.
template <class PlanOf>
double predict_bounded(PlanOf plan_of, const Layout& layout, const Placement& placement,
                       const CostParams& params, bool in_place, double at_most) {
  const auto predict_over = [&](const std::vector<int>& ranks, bool alone) {
    std::vector<Schedule> plans;
    plans.reserve(ranks.size());
    for (int r : ranks) plans.push_back(plan_of(r));
    return predict_plans(plans, ranks, layout, placement, params, in_place, at_most, alone);
  };
  const std::vector<int> ranks = prediction_ranks(placement, params);
  if (at_most < std::numeric_limits<double>::infinity()) {
    const std::vector<int> few = sampled_ranks(placement.nranks());
    if (few.size() * 4 <= ranks.size())
      if (const double bound = predict_over(few, true); bound > at_most) return bound;
  }
  return predict_over(ranks, false);
}

}  // namespace

double predict_seconds(const Planner& planner, const Layout& layout, const Placement& placement,
                       const CostParams& params, bool in_place, int radix, double at_most) {
  return predict_bounded(
      [&](int r) {  // a planner of messages plans without the placement: mark them
        Schedule s = planner.plan({layout.nranks(), r, radix});
        place_levels(s, placement.node_of());
        return s;
      },
      layout, placement, params, in_place, at_most);
}

namespace {

// The node planners' shape of a call (placement, leaders, inter-node algorithm, total),
// staged through the segment: single copy, direct write and CUDA IPC are set by the caller.
NodeShape node_shape(const Layout& layout, const Placement& placement, const NodeStageParams& stage) {
  NodeShape shape;
  shape.node_of.resize(static_cast<std::size_t>(placement.nranks()));
  for (int r = 0; r < placement.nranks(); ++r) shape.node_of[static_cast<std::size_t>(r)] = placement.node_of(r);
  shape.leaders = stage.leaders;
  shape.inter = stage.inter;
  for (int b = 0; b < layout.nranks(); ++b) shape.total_bytes += layout.bytes(b);
  return shape;
}

}  // namespace

double predict_staged(const AlgorithmChoice& a, const Layout& layout, const Placement& placement,
                      const CostParams& params, bool in_place, const NodeStageParams& stage) {
  const auto inf = std::numeric_limits<double>::infinity();
  if (a.id == Algorithm::shared_memory && placement.nodes() != 1) return inf;
  if (a.id == Algorithm::shared_memory || a.id == Algorithm::hierarchical) {
    // The node schedule that runs on a mirror: staged puts and gets (no single copy, no
    // direct write: they have no staged form).
    const NodeShape shape = node_shape(layout, placement, stage);
    return predict_bounded([&](int r) { return stage_on_device(plan_node_algorithm(a.id, shape, r)); },
                           layout, placement, params, in_place, inf);
  }
  const Planner& planner = planner_for(a.id);
  return predict_bounded(
      [&](int r) {
        Schedule s = planner.plan({layout.nranks(), r, a.radix});
        place_levels(s, placement.node_of());
        return stage_on_device(s);
      },
      layout, placement, params, in_place, inf);
}

double predict_node_algorithm(Algorithm a, const Layout& layout, const Placement& placement,
                              const CostParams& params, bool in_place, const NodeStageParams& stage,
                              double at_most) {
  NodeShape shape = node_shape(layout, placement, stage);
  shape.direct_write = stage.direct_write;
  const double staged = predict_bounded([&](int r) { return plan_node_algorithm(a, shape, r); },
                                        layout, placement, params, in_place, at_most);
  if (!stage.single_copy || stage.direct_write || placement.nodes() != 1) return staged;
  // One node, single copy allowed: the faster of the two, as lib/hier's trials keep it.
  // (Both bounded by at_most: when both exceed it, so does their minimum.)
  shape.single_copy = true;
  return std::min(staged, predict_bounded([&](int r) { return plan_node_algorithm(a, shape, r); },
                                          layout, placement, params, in_place, at_most));
}

double predict_ipc(const Layout& layout, const Placement& placement, const CostParams& params,
                   bool in_place) {
  if (placement.nodes() != 1) return std::numeric_limits<double>::infinity();
  NodeShape shape;
  shape.node_of.assign(static_cast<std::size_t>(placement.nranks()), 0);
  shape.device_ipc = true;
  return predict_bounded([&](int r) { return plan_node_algorithm(Algorithm::shared_memory, shape, r); },
                         layout, placement, params, in_place, std::numeric_limits<double>::infinity());
}

double predict_algorithm(const AlgorithmChoice& a, const Layout& layout, const Placement& placement,
                         const CostParams& params, bool in_place, const NodeStageParams& stage,
                         double at_most) {
  if (a.id == Algorithm::shared_memory && placement.nodes() != 1)
    return std::numeric_limits<double>::infinity();
  if (a.id == Algorithm::shared_memory || a.id == Algorithm::hierarchical)
    return predict_node_algorithm(a.id, layout, placement, params, in_place, stage, at_most);
  return predict_seconds(planner_for(a.id), layout, placement, params, in_place, a.radix, at_most);
}

}  // namespace agx
