#pragma once
// copy_bytes: the copy of user data that every path makes (a node path's copy-in and
// copy-out, inline blocks, direct writes, the own block of an out-of-place call).
//
// glibc's memcpy moves blocks from a few KiB up to its non-temporal threshold with
// `rep movsb`. On CPUs with fast short rep movsb (FSRM: this project's AMD EPYC
// machine), that runs 12-17x slower when the destination starts 1 to 31 bytes after the
// source modulo 4096 (each load aliases a store just made, "4K aliasing"): 64 KiB took
// 23-32 µs there instead of 1.4 µs, 256 KiB 95 µs instead of 6.3 µs. A buffer from
// malloc begins 16 bytes into a page and agx's shared segment regions on page
// boundaries, so the copies between them fall exactly there (docs/hierarchy.md, "Copies
// and 4K aliasing"). At those distances copy_bytes moves 64 bytes per step with
// unaligned vector loads and stores, which no such distance slows; elsewhere it is memcpy.

#include <agx/bytes.hpp>

#include "core/schedule.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace agx {

/// Whether a copy of `bytes` from `src` to `dst` is one glibc's rep movsb slows down.
inline bool aliasing_distance(const void* dst, const void* src, std::size_t bytes) {
  const std::uintptr_t d =
      (reinterpret_cast<std::uintptr_t>(dst) - reinterpret_cast<std::uintptr_t>(src)) & 4095;
  return bytes >= 2048 && d != 0 && d < 64;
}

/// memcpy(dst, src, bytes) for non-overlapping ranges, without the 4K-aliasing slow case.
inline void copy_bytes(void* dst, const void* src, std::size_t bytes) {
#if defined(__x86_64__)
  if (aliasing_distance(dst, src, bytes)) {
    auto* d = static_cast<char*>(dst);
    const auto* s = static_cast<const char*>(src);
    std::size_t i = 0;
    for (; i + 64 <= bytes; i += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), a);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
    }
    if (i < bytes) std::memcpy(d + i, s + i, bytes - i);  // under 64 bytes: no rep movsb
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

/// Out of place: block `rank` from the send buffer to its place in the receive buffer
/// (in place it is there already).
inline void copy_own_block(const Buffers& b, const Layout& l, int rank) {
  const std::size_t own = l.bytes(rank);
  if (!b.in_place && own > 0)
    copy_bytes(static_cast<std::byte*>(b.recv) + l.offset(rank), b.send, own);
}

/// A round's copy operations (core/schedule.hpp; the validator admits only the own
/// block's), as the round engine makes them.
inline void make_copies(const Round& round, const Buffers& b, const Layout& l) {
  for (const Copy& c : round.copies) {
    if (c.level == Level::device) continue;  // a staged schedule's: the device makes it
    if (c.blocks.size() == 1 && c.blocks[0].count == 1) {  // (the usual one: the own block)
      copy_own_block(b, l, c.blocks[0].first);
      continue;
    }
    for (const BlockSpan& span : c.blocks)
      for (int block = span.first; block < span.first + span.count; ++block) copy_own_block(b, l, block);
  }
}

}  // namespace agx
