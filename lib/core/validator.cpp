#include "core/validator.hpp"

#include <algorithm>
#include <unordered_map>
#include <sstream>
#include <utility>

namespace agx {
namespace {

std::vector<int> expand(const std::vector<BlockSpan>& spans) {
  std::vector<int> blocks;
  for (const auto& s : spans)
    for (int b = s.first; b < s.first + s.count; ++b) blocks.push_back(b);
  return blocks;
}

// Messages sent from src to dst in one round, received in order.
struct Queue {
  std::vector<std::vector<int>> messages;
  std::size_t next = 0;
};

std::string where(std::size_t round, int rank) {
  std::ostringstream os;
  os << "round " << round << ", rank " << rank << ": ";
  return os.str();
}

// Whether `round` waits for block b (its waits come before its sends from the segment).
bool waits_in(const Round& round, int b) {
  for (const NodeOp& op : round.node)
    if (op.kind == NodeOp::Kind::wait)
      for (const BlockSpan& s : op.blocks)
        if (s.first <= b && b < s.first + s.count) return true;
  return false;
}

}  // namespace

std::string validate(const std::vector<Schedule>& per_rank, const std::vector<int>& node_of) {
  const int n = static_cast<int>(per_rank.size());
  if (!node_of.empty() && static_cast<int>(node_of.size()) != n)
    return "placement has " + std::to_string(node_of.size()) + " ranks for " + std::to_string(n) +
           " schedules";
  std::vector<int> dense(static_cast<std::size_t>(n), 0);  // node ids made 0, 1, 2, ...
  std::unordered_map<int, int> ids;
  for (std::size_t r = 0; r < node_of.size(); ++r)
    dense[r] = ids.try_emplace(node_of[r], static_cast<int>(ids.size())).first->second;
  auto node = [&](int r) { return dense[static_cast<std::size_t>(r)]; };
  // With a placement, a transfer's level must be the one its peers' nodes make it.
  auto misplaced = [&](std::size_t k, int r, const Transfer& t) -> std::string {
    if (node_of.empty()) return {};
    const Level want = node(r) == node(t.peer) ? Level::node : Level::network;
    if (t.level == want) return {};
    return where(k, r) + "marks its transfer with rank " + std::to_string(t.peer) + " " +
           level_name(t.level) + "-level, but the two are " +
           (want == Level::node ? "on one node" : "on different nodes");
  };
  const int nnodes = std::max(1, static_cast<int>(ids.size()));
  // segment[j][b]: node j's segment holds block b; receiver[j][b]: the rank that received
  // it there (-1: put by its owner). A send from the segment of a block that came over
  // the network must be this rank's own earlier receive: no flag orders another's.
  std::vector<std::vector<char>> segment(static_cast<std::size_t>(nnodes), std::vector<char>(n, 0));
  std::vector<std::vector<int>> receiver(static_cast<std::size_t>(nnodes), std::vector<int>(n, -1));
  // Flags: placer[j][b], the rank that put or received block b into node j's segment;
  // signalled[j][b], the round its placer signalled it (-1: not yet; a wait needs an
  // earlier round); waited[r][b], rank r has waited for block b (a get or a send from
  // the segment of a block another rank placed needs that, in the same round or before).
  std::vector<std::vector<int>> placer(static_cast<std::size_t>(nnodes), std::vector<int>(n, -1));
  std::vector<std::vector<long long>> signalled(static_cast<std::size_t>(nnodes), std::vector<long long>(n, -1));
  std::vector<std::vector<char>> waited(static_cast<std::size_t>(n), std::vector<char>(n, 0));
  // writer[j][b]: the rank that wrote block b straight into the receive buffers of node
  // j's other ranks (-1: none); each of them holds it once its wait for it is over.
  std::vector<std::vector<int>> writer(static_cast<std::size_t>(nnodes), std::vector<int>(n, -1));
  // Single copy: exposer[j][b], the rank of node j that exposed block b in its own buffer
  // (-1: none); read_at[r][b], the round rank r read block b from its owner's buffer
  // (-1: not read); released[j][b], the round its exposer released it (-1: not yet);
  // reads[r], rank r's read operations so far (one per schedule: its end is what tells
  // the owners the rank is done with their buffers).
  std::vector<std::vector<int>> exposer(static_cast<std::size_t>(nnodes), std::vector<int>(n, -1));
  std::vector<std::vector<long long>> read_at(static_cast<std::size_t>(n), std::vector<long long>(n, -1));
  std::vector<std::vector<long long>> released(static_cast<std::size_t>(nnodes), std::vector<long long>(n, -1));
  std::vector<int> reads(static_cast<std::size_t>(n), 0);
  std::vector<long long> read_round(static_cast<std::size_t>(n), -1);  // the round of rank r's read
  std::vector<std::pair<int, int>> signals, gets, releases;  // (rank, block) of the round
  std::size_t nrounds = 0;
  for (int r = 0; r < n; ++r) {
    if (per_rank[r].nranks != n || per_rank[r].rank != r)
      return "schedule " + std::to_string(r) + " is planned for another rank or size";
    nrounds = std::max(nrounds, per_rank[r].rounds.size());
  }
  // held[r][b]: rank r holds block b.
  std::vector<std::vector<char>> held(n, std::vector<char>(n, 0));
  for (int r = 0; r < n; ++r) held[r][r] = 1;
  // copied[r]: rank r's own block is in its receive buffer (its copy ran; held[r][r] is
  // true from the start: the send buffer holds it).
  std::vector<char> copied(static_cast<std::size_t>(n), 0);
  std::vector<long long> copied_round(static_cast<std::size_t>(n), -1);  // the round of that copy
  // A rank whose node operations are device-level (CUDA IPC, NodeShape::device_ipc): its
  // buffers are device memory, so its own copy is device-level too.
  std::vector<char> ipc(static_cast<std::size_t>(n), 0);
  for (int r = 0; r < n; ++r)
    for (const Round& round : per_rank[r].rounds)
      for (const NodeOp& op : round.node) ipc[static_cast<std::size_t>(r)] |= op.level == Level::device;
  // A staged rank (its buffers are device memory, its messages run on a host mirror:
  // device-level operations, stage_on_device): its own block is on the mirror once its
  // to_host was issued (a send of it waits for that copy, never for another rank);
  // every other block goes to the device once, in a round that delivers it or later.
  std::vector<char> staged(static_cast<std::size_t>(n), 0), own_on_host(static_cast<std::size_t>(n), 0);
  std::vector<std::vector<char>> on_device(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    if (is_staged(per_rank[r])) {
      // A staged node schedule runs its puts, gets and flags on the mirror; direct write
      // and single copy work on the caller's buffers, which are device memory here.
      for (const Round& round : per_rank[r].rounds)
        for (const NodeOp& op : round.node)
          if (op.level != Level::node || op.kind == NodeOp::Kind::write || op.kind == NodeOp::Kind::expose ||
              op.kind == NodeOp::Kind::read || op.kind == NodeOp::Kind::release)
            return "rank " + std::to_string(r) + " has device copies and a " + level_name(op.level) + "-level " +
                   node_op_name(op.kind) +
                   ": a staged schedule's node operations are node-level puts, gets, signals and waits";
      staged[static_cast<std::size_t>(r)] = 1;
      on_device[static_cast<std::size_t>(r)].assign(static_cast<std::size_t>(n), 0);
    }

  for (std::size_t k = 0; k < nrounds; ++k) {
    std::unordered_map<long long, Queue> in_flight;  // key src * n + dst
    auto key = [n](int src, int dst) { return static_cast<long long>(src) * n + dst; };
    for (int r = 0; r < n; ++r) {
      if (k >= per_rank[r].rounds.size()) continue;
      for (const DeviceCopy& d : per_rank[r].rounds[k].device) {
        if (d.level != Level::device)
          return where(k, r) + "marks a device copy " + level_name(d.level) + "-level";
        if (d.kind != DeviceCopy::Kind::to_host) continue;
        if (k != 0)  // (its chunks are what a send and the own block's checksum wait for from the start)
          return where(k, r) + "copies its own block to the host after round 0";
        for (int b : expand(d.blocks)) {
          if (b != r)
            return where(k, r) + "copies block " + std::to_string(b) +
                   " to the host: only the own block starts on the device";
          if (own_on_host[static_cast<std::size_t>(r)]) return where(k, r) + "copies its own block to the host twice";
          own_on_host[static_cast<std::size_t>(r)] = 1;
        }
      }
      for (const Transfer& t : per_rank[r].rounds[k].sends) {
        if (t.peer < 0 || t.peer >= n || t.peer == r)
          return where(k, r) + "sends to invalid peer " + std::to_string(t.peer);
        if (std::string why = misplaced(k, r, t); !why.empty()) return why;
        std::vector<int> blocks = expand(t.blocks);
        const bool from_segment = t.place == Place::segment;
        for (int b : blocks)
          if (b < 0 || b >= n || !(from_segment ? segment[node(r)][b] : held[r][b]))
            return where(k, r) + "sends block " + std::to_string(b) + " it does not hold" +
                   (from_segment ? " in its node's segment" : "");
        for (int b : blocks)
          if (b == r && staged[static_cast<std::size_t>(r)] && !own_on_host[static_cast<std::size_t>(r)])
            return where(k, r) + "sends its own block before copying it to the host";
        if (from_segment)
          for (int b : blocks) {
            if (receiver[node(r)][b] >= 0 && receiver[node(r)][b] != r)
              return where(k, r) + "sends block " + std::to_string(b) +
                     " from the segment, which rank " + std::to_string(receiver[node(r)][b]) +
                     " received there";
            if (placer[node(r)][b] != r && !waited[r][b] && !waits_in(per_rank[r].rounds[k], b))
              return where(k, r) + "sends block " + std::to_string(b) +
                     " from the segment without waiting for its flag";
          }
        if (from_segment) blocks.push_back(-1);  // the place is part of what must match
        in_flight[key(r, t.peer)].messages.push_back(std::move(blocks));
      }
    }
    std::vector<std::pair<int, int>> arrivals;      // (rank, block), applied after the round
    std::vector<std::pair<int, int>> seg_arrivals;  // (node, block), applied after the round
    for (int r = 0; r < n; ++r) {
      if (k >= per_rank[r].rounds.size()) continue;
      for (const Copy& c : per_rank[r].rounds[k].copies) {
        const bool device = staged[static_cast<std::size_t>(r)] || ipc[static_cast<std::size_t>(r)];
        const Level want = device ? Level::device : Level::node;
        if (c.level != want)
          return where(k, r) + "marks its copy " + level_name(c.level) + "-level, but its buffers are " +
                 (want == Level::device ? "device memory (a staged or IPC schedule)" : "host memory");
        for (int b : expand(c.blocks)) {
          if (b != r)
            return where(k, r) + "copies block " + std::to_string(b) +
                   ", not its own (a copy reads the send buffer, which holds only the own block)";
          if (copied[static_cast<std::size_t>(r)]) return where(k, r) + "copies its own block twice";
          copied[static_cast<std::size_t>(r)] = 1;
          copied_round[static_cast<std::size_t>(r)] = static_cast<long long>(k);
        }
      }
      for (const NodeOp& op : per_rank[r].rounds[k].node) {
        const std::string name = node_op_name(op.kind);
        using K = NodeOp::Kind;
        if (op.level == Level::network)
          return where(k, r) + name + " marked network-level: the segment is the node's";
        if (op.level == Level::device && (op.kind == K::put || op.kind == K::get || op.kind == K::write))
          return where(k, r) + name + " marked device-level: between device buffers only the single copy's "
                                      "operations run (expose, signal, wait, read, release)";
        if ((op.level == Level::device) != (ipc[static_cast<std::size_t>(r)] != 0))
          return where(k, r) + name + " marked node-level beside device-level ones: a rank's buffers are "
                                      "host or device memory, not both";
        if (op.kind == NodeOp::Kind::read && ++reads[static_cast<std::size_t>(r)] > 1)
          return where(k, r) + "reads a second time: a rank reads once (the end of its read tells the owners "
                               "it is done with their buffers)";
        if (op.kind == NodeOp::Kind::read) read_round[static_cast<std::size_t>(r)] = static_cast<long long>(k);
        // Who placed block b on r's node other than by a put (-1: nobody).
        const auto placed_by = [&](int b) {
          return std::max({writer[node(r)][b], exposer[node(r)][b], placer[node(r)][b]});
        };
        for (int b : expand(op.blocks)) {
          if (b < 0 || b >= n) return where(k, r) + name + "s invalid block " + std::to_string(b);
          switch (op.kind) {
            case NodeOp::Kind::put:
              if (!held[r][b]) return where(k, r) + "puts block " + std::to_string(b) + " it does not hold";
              if (b == r && staged[static_cast<std::size_t>(r)] && !own_on_host[static_cast<std::size_t>(r)])
                return where(k, r) + "puts its own block before copying it to the host";
              if (segment[node(r)][b])
                return where(k, r) + "puts block " + std::to_string(b) + " that its node's segment already holds";
              if (writer[node(r)][b] >= 0 || exposer[node(r)][b] >= 0)
                return where(k, r) + "puts block " + std::to_string(b) + ", which rank " +
                       std::to_string(std::max(writer[node(r)][b], exposer[node(r)][b])) +
                       (writer[node(r)][b] >= 0 ? " wrote into its node's buffers" : " exposed in its own buffer");
              seg_arrivals.emplace_back(node(r), b);
              placer[node(r)][b] = r;
              break;
            case NodeOp::Kind::write:
              if (!held[r][b]) return where(k, r) + "writes block " + std::to_string(b) + " it does not hold";
              if (placed_by(b) >= 0)
                return where(k, r) + "writes block " + std::to_string(b) + ", which rank " +
                       std::to_string(placed_by(b)) + " already placed on its node";
              writer[node(r)][b] = r;
              break;
            case NodeOp::Kind::expose:
              if (b != r)
                return where(k, r) + "exposes block " + std::to_string(b) +
                       ", not its own (single copy publishes where the own block lies)";
              // CUDA IPC exposes the receive buffer: the own block must be copied there
              // in an earlier round (its copy is queued before the event that signals it).
              if (op.level == Level::device &&
                  (copied_round[static_cast<std::size_t>(r)] < 0 || copied_round[static_cast<std::size_t>(r)] >= static_cast<long long>(k)))
                return where(k, r) + "exposes its receive buffer's own block before a round has copied it there";
              if (placed_by(b) >= 0)
                return where(k, r) + "exposes block " + std::to_string(b) + ", which rank " +
                       std::to_string(placed_by(b)) + " already placed on its node";
              exposer[node(r)][b] = r;
              break;
            case NodeOp::Kind::read:
              if (exposer[node(r)][b] < 0)
                return where(k, r) + "reads block " + std::to_string(b) + ", which no rank of its node exposed";
              if (held[r][b]) return where(k, r) + "reads block " + std::to_string(b) + " it already holds";
              if (released[node(r)][b] >= 0)
                return where(k, r) + "reads block " + std::to_string(b) + " after rank " +
                       std::to_string(exposer[node(r)][b]) + " released it";
              gets.emplace_back(r, b);  // waited for like a get (below)
              arrivals.emplace_back(r, b);
              read_at[static_cast<std::size_t>(r)][static_cast<std::size_t>(b)] = static_cast<long long>(k);
              break;
            case NodeOp::Kind::release: releases.emplace_back(r, b); break;  // at the round's end
            case NodeOp::Kind::signal: signals.emplace_back(r, b); break;  // at the round's end
            case NodeOp::Kind::wait:
              if (signalled[node(r)][b] < 0)
                return where(k, r) + "waits for block " + std::to_string(b) +
                       ", which no rank of its node signalled in an earlier round";
              // A written block is in this rank's receive buffer once the wait is over.
              if (writer[node(r)][b] >= 0 && writer[node(r)][b] != r && !waited[r][b])
                arrivals.emplace_back(r, b);
              waited[r][b] = 1;
              break;
            case NodeOp::Kind::get:
              if (!segment[node(r)][b])
                return where(k, r) + "gets block " + std::to_string(b) + " before its node's segment holds it";
              if (held[r][b]) return where(k, r) + "gets block " + std::to_string(b) + " it already holds";
              gets.emplace_back(r, b);  // checked against the round's waits below
              arrivals.emplace_back(r, b);
              break;
          }
        }
      }
      // A get is of a block waited for in this round (the wait comes first: a round's
      // waits are issued with its gets) or an earlier one.
      for (const auto& [g, b] : gets)
        if (!waited[g][b])
          return where(k, g) + (exposer[node(g)][b] >= 0 ? "reads" : "gets") + " block " +
                 std::to_string(b) + " without waiting for its flag";
      gets.clear();
    }
    for (int r = 0; r < n; ++r) {
      if (k >= per_rank[r].rounds.size()) continue;
      for (const Transfer& t : per_rank[r].rounds[k].recvs) {
        if (t.peer < 0 || t.peer >= n || t.peer == r)
          return where(k, r) + "receives from invalid peer " + std::to_string(t.peer);
        if (std::string why = misplaced(k, r, t); !why.empty()) return why;
        Queue& queue = in_flight[key(t.peer, r)];
        if (queue.next == queue.messages.size())
          return where(k, r) + "receives from " + std::to_string(t.peer) + " which sends nothing";
        std::vector<int> blocks = expand(t.blocks);
        std::vector<int> sent = queue.messages[queue.next++];
        const bool sent_from_segment = !sent.empty() && sent.back() == -1;
        if (sent_from_segment) sent.pop_back();
        if (sent != blocks)
          return where(k, r) + "receive from " + std::to_string(t.peer) +
                 " does not match the blocks sent";
        (void)sent_from_segment;  // where the sender read them does not matter to the receiver
        const bool to_segment = t.place == Place::segment;
        for (int b : blocks) {
          if (b < 0 || b >= n) return where(k, r) + "receives invalid block " + std::to_string(b);
          if (to_segment ? segment[node(r)][b] : held[r][b])
            return where(k, r) + "receives block " + std::to_string(b) + " twice" +
                   (to_segment ? " into its node's segment" : "");
          if (to_segment && (writer[node(r)][b] >= 0 || exposer[node(r)][b] >= 0))
            return where(k, r) + "receives block " + std::to_string(b) + " into its node's segment, which rank " +
                   std::to_string(std::max(writer[node(r)][b], exposer[node(r)][b])) +
                   (writer[node(r)][b] >= 0 ? " wrote into its node's buffers" : " exposed in its own buffer");
          if (to_segment) {
            seg_arrivals.emplace_back(node(r), b);
            receiver[node(r)][b] = r;
            placer[node(r)][b] = r;
          }
          else arrivals.emplace_back(r, b);
        }
      }
    }
    for (const auto& [k2, queue] : in_flight)
      if (queue.next != queue.messages.size())
        return where(k, static_cast<int>(k2 / n)) + "send to " + std::to_string(k2 % n) +
               " is never received";
    for (const auto& [r, b] : arrivals) {
      if (held[r][b]) return where(k, r) + "receives block " + std::to_string(b) + " twice";
      held[r][b] = 1;
    }
    for (const auto& [j, b] : seg_arrivals) {
      if (segment[j][b])
        return where(k, 0) + "block " + std::to_string(b) + " reaches the segment of node " +
               std::to_string(j) + " twice";
      segment[j][b] = 1;
    }
    // A signal raises the flag of a block its rank placed in the segment by this round's end.
    for (const auto& [r, b] : signals) {
      const int j = node(r);
      if ((!segment[j][b] || placer[j][b] != r) && writer[j][b] != r && exposer[j][b] != r)
        return where(k, r) + "signals block " + std::to_string(b) + ", which it did not put or receive into " +
               (segment[j][b] ? "the segment" : "the segment by this round") + " nor write nor expose";
      if (signalled[j][b] >= 0) return where(k, r) + "signals block " + std::to_string(b) + " twice";
      signalled[j][b] = static_cast<long long>(k);
    }
    signals.clear();
    // A release ends its exposure once every other rank of the node has read the block
    // in an earlier round (the engine waits for their done flags, which rise when their
    // reads are over).
    for (const auto& [r, b] : releases) {
      const int j = node(r);
      if (exposer[j][b] != r) return where(k, r) + "releases block " + std::to_string(b) + ", which it did not expose";
      if (released[j][b] >= 0) return where(k, r) + "releases block " + std::to_string(b) + " twice";
      for (int q = 0; q < n; ++q) {
        if (q == r || node(q) != j) continue;
        const long long at = read_at[static_cast<std::size_t>(q)][static_cast<std::size_t>(b)];
        if (at < 0 || at >= static_cast<long long>(k))
          return where(k, r) + "releases block " + std::to_string(b) + " before rank " + std::to_string(q) +
                 " has read it (" + (at < 0 ? std::string("by this round it has not") : "it reads it in this round") + ")";
      }
      // The release waits for every local rank's done flag, this rank's own too, which
      // rises when this rank's read is over: that read must come in an earlier round.
      if (read_round[static_cast<std::size_t>(r)] < 0 || read_round[static_cast<std::size_t>(r)] >= static_cast<long long>(k))
        return where(k, r) + "releases block " + std::to_string(b) +
               " before its own read is over (the release waits for its own done flag too)";
      released[j][b] = static_cast<long long>(k);
    }
    releases.clear();
    // A to_device copies the receives of its own round, each whole (the engine copies a
    // receive on as it completes, when its round's to_device names all its blocks).
    for (int r = 0; r < n; ++r) {
      if (!staged[static_cast<std::size_t>(r)] || k >= per_rank[r].rounds.size()) continue;
      const Round& round = per_rank[r].rounds[k];
      std::vector<char> named(static_cast<std::size_t>(n), 0), arrived(static_cast<std::size_t>(n), 0);
      for (const DeviceCopy& d : round.device)
        if (d.kind == DeviceCopy::Kind::to_device)
          for (int b : expand(d.blocks))
            if (b >= 0 && b < n) named[static_cast<std::size_t>(b)] = 1;
      // (Receives into the segment bring nothing to the mirror: a later get does.)
      const auto whole = [&](const std::vector<BlockSpan>& spans, const std::string& what) {
        const std::vector<int> blocks = expand(spans);
        int covered = 0;
        for (int b : blocks) {
          arrived[static_cast<std::size_t>(b)] = 1;
          covered += named[static_cast<std::size_t>(b)];
        }
        return covered != 0 && covered != static_cast<int>(blocks.size())
                   ? where(k, r) + "copies part of its " + what + " to the device: it goes there whole"
                   : std::string();
      };
      for (const Transfer& t : round.recvs)
        if (t.place == Place::buffer)
          if (std::string why = whole(t.blocks, "receive from " + std::to_string(t.peer)); !why.empty()) return why;
      for (const NodeOp& op : round.node)
        if (op.kind == NodeOp::Kind::get)
          if (std::string why = whole(op.blocks, "get"); !why.empty()) return why;
      for (const DeviceCopy& d : round.device) {
        if (d.kind != DeviceCopy::Kind::to_device) continue;
        for (int b : expand(d.blocks)) {
          if (b < 0 || b >= n || b == r)
            return where(k, r) + "copies block " + std::to_string(b) +
                   " to the device: only received blocks go there";
          if (!held[r][b])
            return where(k, r) + "copies block " + std::to_string(b) + " to the device before it holds it";
          if (!arrived[static_cast<std::size_t>(b)])
            return where(k, r) + "copies block " + std::to_string(b) +
                   " to the device, which no receive into its buffer or get of this round brought";
          char& there = on_device[static_cast<std::size_t>(r)][static_cast<std::size_t>(b)];
          if (there) return where(k, r) + "copies block " + std::to_string(b) + " to the device twice";
          there = 1;
        }
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    for (int b = 0; b < n; ++b)
      if (!held[r][b])
        return "rank " + std::to_string(r) + " ends without block " + std::to_string(b);
    if (!copied[static_cast<std::size_t>(r)])
      return "rank " + std::to_string(r) + " never copies its own block into its receive buffer";
    const int j = node(r);
    if (exposer[j][r] == r && released[j][r] < 0)
      return "rank " + std::to_string(r) + " exposes block " + std::to_string(r) +
             " and never releases it: its peers may still read the caller's buffer after the call";
    if (staged[static_cast<std::size_t>(r)])
      for (int b = 0; b < n; ++b)
        if (b != r && !on_device[static_cast<std::size_t>(r)][static_cast<std::size_t>(b)])
          return "rank " + std::to_string(r) + " never copies block " + std::to_string(b) +
                 " to its device buffer";
  }
  return {};
}

std::string validate(const Planner& planner, int nranks) {
  std::vector<Schedule> per_rank;
  per_rank.reserve(static_cast<std::size_t>(nranks));
  for (int r = 0; r < nranks; ++r) per_rank.push_back(planner.plan({nranks, r}));
  return validate(per_rank);
}

}  // namespace agx

#include "core/message.hpp"

namespace agx {

std::string validate_messages(const std::vector<Schedule>& per_rank, const Layout& layout,
                              std::size_t max_message_bytes) {
  const int n = static_cast<int>(per_rank.size());
  std::size_t extent = 1;
  for (int b = 0; b < n; ++b) extent = std::max(extent, layout.offset(b) + layout.bytes(b));
  std::vector<std::byte> memory(extent);
  const Buffers buffers{nullptr, memory.data(), true};

  auto sizes = [&](const Transfer& t, int rank) {
    MessagePlan m;
    plan_message(t, rank, buffers, layout, max_message_bytes, m);
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < m.pieces(); ++i) {
      std::size_t bytes = 0;
      for (std::size_t s = m.piece_begin[i]; s < m.piece_begin[i + 1]; ++s) bytes += m.segments[s].bytes;
      out.push_back(bytes);
    }
    return out;
  };
  for (int r = 0; r < n; ++r) {
    for (std::size_t k = 0; k < per_rank[r].rounds.size(); ++k) {
      for (const Transfer& send : per_rank[r].rounds[k].sends) {
        const std::vector<std::size_t> sent = sizes(send, r);
        std::size_t expected_total = 0;
        for (const auto& span : send.blocks)
          for (int b = span.first; b < span.first + span.count; ++b) expected_total += layout.bytes(b);
        std::size_t total = 0;
        for (std::size_t bytes : sent) {
          if (bytes == 0 || bytes > max_message_bytes)
            return where(k, r) + "message of " + std::to_string(bytes) + " bytes";
          total += bytes;
        }
        if (total != expected_total) return where(k, r) + "messages do not add up to the blocks";
        // The matching receive: the first one of the peer in this round from r with the same blocks.
        const int peer = send.peer;
        bool matched = false;
        if (k >= per_rank[peer].rounds.size()) return where(k, r) + "peer has no such round";
        for (const Transfer& recv : per_rank[peer].rounds[k].recvs) {
          if (recv.peer != r || expand(recv.blocks) != expand(send.blocks)) continue;
          if (sizes(recv, peer) != sent)
            return where(k, r) + "send to " + std::to_string(peer) + " is cut unlike its receive";
          matched = true;
          break;
        }
        if (!matched) return where(k, r) + "send to " + std::to_string(peer) + " has no receive";
      }
    }
  }
  return {};
}

}  // namespace agx
