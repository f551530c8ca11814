#include "core/message.hpp"

#include <algorithm>

namespace agx {

std::byte* block_address(int block, int rank, const Buffers& buffers, const Layout& layout) {
  if (block == rank && !buffers.in_place)
    return static_cast<std::byte*>(const_cast<void*>(buffers.send));
  return static_cast<std::byte*>(buffers.recv) + layout.offset(block);
}

namespace {

/// Appends `bytes` at `ptr` to `out`, cut at max_bytes per piece, merged with the
/// previous segment of the same piece where adjacent.
void append(std::byte* ptr, std::size_t bytes, std::size_t max_bytes, std::size_t& room,
            MessagePlan& out) {
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

}  // namespace

void plan_message(const Transfer& t, int rank, const Buffers& buffers, const Layout& layout,
                  std::size_t max_bytes, MessagePlan& out, const BlockPieces* blocks) {
  out.segments.clear();
  out.piece_begin.clear();
  std::size_t room = 0;  // bytes left in the current piece
  for (const BlockSpan& span : t.blocks) {
    for (int b = span.first; b < span.first + span.count; ++b) {
      if (blocks == nullptr) {
        append(block_address(b, rank, buffers, layout), layout.bytes(b), max_bytes, room, out);
        continue;
      }
      const auto u = static_cast<std::size_t>(b);
      for (std::size_t i = blocks->begin[u]; i < blocks->begin[u + 1]; ++i)
        append(blocks->segments[i].ptr, blocks->segments[i].bytes, max_bytes, room, out);
    }
  }
  if (!out.piece_begin.empty()) out.piece_begin.push_back(out.segments.size());
}

}  // namespace agx
