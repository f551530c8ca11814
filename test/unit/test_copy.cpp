// copy_bytes (core/copy.hpp): equal to memcpy for every distance modulo 4096 that takes
// the vector loop (1..63) and around it, at sizes below, at and above the 2 KiB switch
// and with tails of every length under 64; nothing written outside the destination.

#include <catch2/catch.hpp>

#include "core/copy.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

using namespace agx;

TEST_CASE("copy_bytes copies exactly, at every aliasing distance", "[copy]") {
  constexpr std::size_t page = 4096;
  std::vector<unsigned char> src_store(3 * page + 70000), dst_store(3 * page + 80000);
  auto* src = src_store.data() + (page - reinterpret_cast<std::uintptr_t>(src_store.data()) % page);
  auto* dst_page = dst_store.data() + (page - reinterpret_cast<std::uintptr_t>(dst_store.data()) % page);
  for (std::size_t i = 0; i < 70000; ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
  int vector_copies = 0;
  for (const std::size_t bytes : {std::size_t{0}, std::size_t{100}, std::size_t{2047}, std::size_t{2048},
                                  std::size_t{2049}, std::size_t{4096 + 1}, std::size_t{65536 - 17},
                                  std::size_t{65536}})
    for (std::size_t d = 0; d <= 70; ++d) {
      unsigned char* dst = dst_page + page + d;  // (dst - src) mod 4096 == d
      for (auto& b : dst_store) b = 0xEE;
      vector_copies += aliasing_distance(dst, src, bytes);
      copy_bytes(dst, src, bytes);
      bool same = true, outside = true;
      for (std::size_t i = 0; i < bytes; ++i) same = same && dst[i] == src[i];
      for (std::size_t i = 0; i < 64; ++i) outside = outside && dst[-1 - static_cast<std::ptrdiff_t>(i)] == 0xEE &&
                                                   dst[bytes + i] == 0xEE;
      INFO("bytes " << bytes << ", distance " << d);
      CHECK(same);
      CHECK(outside);
    }
  CHECK(vector_copies == 5 * 63);  // the five sizes from 2048 up, distances 1..63
  const auto* a = reinterpret_cast<const void*>(0x10000);
  CHECK_FALSE(aliasing_distance(reinterpret_cast<const void*>(0x10000 + 4096), a, 1 << 16));
  CHECK(aliasing_distance(reinterpret_cast<const void*>(0x10000 + 4096 + 16), a, 1 << 16));
  CHECK_FALSE(aliasing_distance(reinterpret_cast<const void*>(0x10000 + 64), a, 1 << 16));
  CHECK_FALSE(aliasing_distance(reinterpret_cast<const void*>(0x10000 - 16), a, 1 << 16));
}
