#include "core/schedule.hpp"

#include <sstream>

namespace agx {

void append_wrapped(std::vector<BlockSpan>& spans, int first, int count, int n) {
  if (count <= 0) return;
  first = ((first % n) + n) % n;
  const int head = std::min(count, n - first);
  spans.push_back({first, head});
  if (count > head) spans.push_back({0, count - head});
}

static void add(std::vector<Transfer>& list, int peer, std::vector<BlockSpan> blocks, Place place) {
  if (block_count(blocks) == 0) return;
  list.push_back({peer, std::move(blocks), place});
}

void add_send(Round& round, int peer, std::vector<BlockSpan> blocks, Place place) {
  add(round.sends, peer, std::move(blocks), place);
}

void add_recv(Round& round, int peer, std::vector<BlockSpan> blocks, Place place) {
  add(round.recvs, peer, std::move(blocks), place);
}

void add_node_op(Round& round, NodeOp::Kind kind, std::vector<BlockSpan> blocks) {
  if (block_count(blocks) == 0) return;
  round.node.push_back({kind, std::move(blocks)});
}

void add_own_copy(Schedule& s) {
  for (const Round& r : s.rounds)  // a planner that returns another's plan has it already
    for (const Copy& c : r.copies)
      for (const BlockSpan& span : c.blocks)
        if (span.first <= s.rank && s.rank < span.first + span.count) return;
  if (s.rounds.empty()) s.rounds.emplace_back();
  s.rounds.front().copies.push_back({{{s.rank, 1}}});
}

void place_levels(Schedule& s, const std::vector<int>& node_of) {
  const int own = node_of[static_cast<std::size_t>(s.rank)];
  for (Round& r : s.rounds)
    for (auto* list : {&r.sends, &r.recvs})
      for (Transfer& t : *list)
        t.level = node_of[static_cast<std::size_t>(t.peer)] == own ? Level::node : Level::network;
}

const char* level_name(Level l) {
  switch (l) {
    case Level::node: return "node";
    case Level::network: return "network";
    case Level::device: return "device";
  }
  return "?";
}

bool paired(const Round& round, const NodeOp& op) {
  using K = NodeOp::Kind;
  if (op.kind == K::release) return true;  // (it waits by itself)
  const auto partners = [&](K o) {
    switch (op.kind) {
      case K::put:
      case K::write:
      case K::expose: return o == K::signal;
      case K::signal: return o == K::put || o == K::write || o == K::expose;
      case K::get:
      case K::read: return o == K::wait;
      case K::wait: return o == K::get || o == K::read;
      case K::release: break;
    }
    return false;
  };
  for (const NodeOp& o : round.node)
    if (partners(o.kind) && o.blocks == op.blocks) return true;
  return false;
}

bool flags_with_copies(const Schedule& s) {
  for (const Round& r : s.rounds)
    for (const NodeOp& op : r.node)
      if (!paired(r, op)) return false;
  return true;
}

Schedule split_flags(const Schedule& s) {
  Schedule out{s.nranks, s.rank, {}};
  out.rounds.resize(4 * s.rounds.size());
  for (std::size_t k = 0; k < s.rounds.size(); ++k) {
    const Round& r = s.rounds[k];
    Round& messages = out.rounds[4 * k];
    messages.sends = r.sends;
    messages.recvs = r.recvs;
    messages.copies = r.copies;
    messages.device = r.device;
    bool segment_sends = false;
    for (const Transfer& t : r.sends) segment_sends = segment_sends || t.place == Place::segment;
    for (const NodeOp& op : r.node) {
      switch (op.kind) {
        case NodeOp::Kind::put:
        case NodeOp::Kind::write:
        case NodeOp::Kind::expose: messages.node.push_back(op); break;
        case NodeOp::Kind::signal: out.rounds[4 * k + 1].node.push_back(op); break;
        case NodeOp::Kind::wait: (segment_sends ? messages : out.rounds[4 * k + 2]).node.push_back(op); break;
        case NodeOp::Kind::release: out.rounds[4 * k + 2].node.push_back(op); break;
        case NodeOp::Kind::get:
        case NodeOp::Kind::read: out.rounds[4 * k + 3].node.push_back(op); break;
      }
    }
  }
  return out;
}

const char* node_op_name(NodeOp::Kind k) {
  switch (k) {
    case NodeOp::Kind::put: return "put";
    case NodeOp::Kind::get: return "get";
    case NodeOp::Kind::signal: return "signal";
    case NodeOp::Kind::wait: return "wait";
    case NodeOp::Kind::write: return "write";
    case NodeOp::Kind::expose: return "expose";
    case NodeOp::Kind::read: return "read";
    case NodeOp::Kind::release: return "release";
  }
  return "?";
}

Schedule stage_on_device(const Schedule& host) {
  Schedule s = host;
  if (s.rounds.empty()) s.rounds.emplace_back();
  s.rounds.front().device.push_back({DeviceCopy::Kind::to_host, {{s.rank, 1}}});
  for (Round& r : s.rounds) {
    for (Copy& c : r.copies) c.level = Level::device;
    // What reaches the mirror in this round: receives into the rank's buffer (not those
    // into the node's segment: those blocks reach it by a later get) and gets.
    std::vector<BlockSpan> received;
    for (const Transfer& t : r.recvs)
      if (t.place == Place::buffer) received.insert(received.end(), t.blocks.begin(), t.blocks.end());
    for (const NodeOp& op : r.node)
      if (op.kind == NodeOp::Kind::get) received.insert(received.end(), op.blocks.begin(), op.blocks.end());
    if (block_count(received) > 0) r.device.push_back({DeviceCopy::Kind::to_device, std::move(received)});
  }
  return s;
}

bool is_staged(const Schedule& s) {
  for (const Round& r : s.rounds)
    if (!r.device.empty()) return true;
  return false;
}

bool uses_segment(const Schedule& s) {
  for (const Round& r : s.rounds) {
    if (!r.node.empty()) return true;
    for (const auto* list : {&r.sends, &r.recvs})
      for (const Transfer& t : *list)
        if (t.place == Place::segment) return true;
  }
  return false;
}

int block_count(const std::vector<BlockSpan>& spans) {
  int c = 0;
  for (const auto& s : spans) c += s.count;
  return c;
}

static void print_transfers(std::ostringstream& os, const char* verb,
                            const std::vector<Transfer>& list) {
  for (const auto& t : list) {
    os << ' ' << verb << (t.place == Place::segment ? "@segment" : "")
       << (t.level == Level::node ? "~node" : "") << "(" << t.peer << ":";
    for (const auto& s : t.blocks) os << " [" << s.first << "," << s.first + s.count << ")";
    os << ")";
  }
}

static void print_spans(std::ostringstream& os, const char* verb, const std::vector<BlockSpan>& spans) {
  os << ' ' << verb << "(";
  for (std::size_t i = 0; i < spans.size(); ++i)
    os << (i ? " " : "") << "[" << spans[i].first << "," << spans[i].first + spans[i].count << ")";
  os << ")";
}

std::string describe(const Schedule& s) {
  std::ostringstream os;
  for (std::size_t i = 0; i < s.rounds.size(); ++i) {
    os << "round " << i << ":";
    print_transfers(os, "send", s.rounds[i].sends);
    print_transfers(os, "recv", s.rounds[i].recvs);
    for (const NodeOp& op : s.rounds[i].node)
      print_spans(os, (std::string(node_op_name(op.kind)) + (op.level == Level::device ? "~device" : "")).c_str(),
                  op.blocks);
    for (const Copy& c : s.rounds[i].copies)
      print_spans(os, c.level == Level::device ? "copy~device" : "copy", c.blocks);
    for (const DeviceCopy& d : s.rounds[i].device)
      print_spans(os, d.kind == DeviceCopy::Kind::to_host ? "to_host" : "to_device", d.blocks);
    os << '\n';
  }
  return os.str();
}

}  // namespace agx
