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

static void add(std::vector<Transfer>& list, int peer, std::vector<BlockSpan> blocks) {
  if (block_count(blocks) == 0) return;
  list.push_back({peer, std::move(blocks)});
}

void add_send(Round& round, int peer, std::vector<BlockSpan> blocks) {
  add(round.sends, peer, std::move(blocks));
}

void add_recv(Round& round, int peer, std::vector<BlockSpan> blocks) {
  add(round.recvs, peer, std::move(blocks));
}

int block_count(const std::vector<BlockSpan>& spans) {
  int c = 0;
  for (const auto& s : spans) c += s.count;
  return c;
}

static void print_transfers(std::ostringstream& os, const char* verb,
                            const std::vector<Transfer>& list) {
  for (const auto& t : list) {
    os << ' ' << verb << "(" << t.peer << ":";
    for (const auto& s : t.blocks) os << " [" << s.first << "," << s.first + s.count << ")";
    os << ")";
  }
}

std::string describe(const Schedule& s) {
  std::ostringstream os;
  for (std::size_t i = 0; i < s.rounds.size(); ++i) {
    os << "round " << i << ":";
    print_transfers(os, "send", s.rounds[i].sends);
    print_transfers(os, "recv", s.rounds[i].recvs);
    os << '\n';
  }
  return os.str();
}

}  // namespace agx
