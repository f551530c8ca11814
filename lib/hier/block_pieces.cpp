// Blocks made of pieces: gathering a block from its pieces, scattering it into them
// (block_pieces.hpp).

#include "hier/block_pieces.hpp"

#include "core/copy.hpp"

#include <algorithm>

namespace agx::hier {
namespace {

// Calls f(piece address, offset into the range, bytes) for the part of each piece that
// bytes [at, at + len) of the block (its pieces back to back) cover.
template <class F>
void walk_pieces(std::span<const Segment> pieces, std::size_t at, std::size_t len, F f) {
  std::size_t done = 0;
  for (const Segment& p : pieces) {
    if (done == len) return;
    if (at >= p.bytes) {
      at -= p.bytes;
      continue;
    }
    const std::size_t take = std::min(len - done, p.bytes - at);
    f(p.ptr + at, done, take);
    done += take;
    at = 0;
  }
}

}  // namespace

void gather_pieces(std::byte* dst, std::span<const Segment> pieces, std::size_t at, std::size_t len) {
  walk_pieces(pieces, at, len, [&](std::byte* piece, std::size_t off, std::size_t n) {
    copy_bytes(dst + off, piece, n);
  });
}

void scatter_pieces(std::span<const Segment> pieces, std::size_t at, const std::byte* src,
                    std::size_t len) {
  walk_pieces(pieces, at, len, [&](std::byte* piece, std::size_t off, std::size_t n) {
    copy_bytes(piece, src + off, n);
  });
}

}  // namespace agx::hier
