#include "core/message.hpp"

#include <algorithm>

namespace agx {

std::byte* block_address(int block, int rank, const Buffers& buffers, const Layout& layout) {
  if (block == rank && !buffers.in_place)
    return static_cast<std::byte*>(const_cast<void*>(buffers.send));
  return static_cast<std::byte*>(buffers.recv) + layout.offset(block);
}

void plan_message(const Transfer& t, int rank, const Buffers& buffers, const Layout& layout,
                  std::size_t max_bytes, MessagePlan& out) {
  out.segments.clear();
  out.piece_begin.clear();
  std::size_t room = 0;  // bytes left in the current piece
  for (const BlockSpan& span : t.blocks) {
    for (int b = span.first; b < span.first + span.count; ++b) {
      std::byte* ptr = block_address(b, rank, buffers, layout);
      std::size_t bytes = layout.bytes(b);
      while (bytes > 0) {
        if (room == 0) {
          out.piece_begin.push_back(out.segments.size());
          room = max_bytes;
        }
        const std::size_t take = std::min(bytes, room);
        Segment* last = out.segments.size() > out.piece_begin.back() ? &out.segments.back() : nullptr;
        if (last != nullptr && last->ptr + last->bytes == ptr) last->bytes += take;
        else out.segments.push_back({ptr, take});
        ptr += take;
        bytes -= take;
        room -= take;
      }
    }
  }
  if (!out.piece_begin.empty()) out.piece_begin.push_back(out.segments.size());
}

}  // namespace agx
