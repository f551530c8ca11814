#pragma once
// Test data: an analytic byte pattern per (salt, rank, element, byte), guarded
// receive buffers, and byte-exact checks that report the first mismatch.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace agx_test {

/// A 12-byte element type (three floats), for a size that is neither 1, 4 nor 8.
struct Vec3 {
  float x, y, z;
};
static_assert(sizeof(Vec3) == 12);

constexpr unsigned char sentinel = 0xA5;
constexpr std::size_t guard_bytes = 64;

/// The byte that element `i`, byte `k` of rank `r`'s block holds in call `salt`.
inline unsigned char pattern(unsigned salt, int r, std::size_t i, std::size_t k) {
  std::uint64_t x = salt * 0x9E3779B97F4A7C15ull ^ (static_cast<std::uint64_t>(r) << 40) ^
                    (i * 131 + k);
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  const auto b = static_cast<unsigned char>(x);
  return b == sentinel ? static_cast<unsigned char>(b + 1) : b;  // never the sentinel
}

inline void fill(std::byte* p, unsigned salt, int r, std::size_t count, std::size_t elem) {
  for (std::size_t i = 0; i < count; ++i)
    for (std::size_t k = 0; k < elem; ++k)
      p[i * elem + k] = static_cast<std::byte>(pattern(salt, r, i, k));
}

/// A receive buffer of `bytes` with sentinel-filled guards on both sides.
class Guarded {
 public:
  explicit Guarded(std::size_t bytes) : store_(bytes + 2 * guard_bytes) {
    std::memset(store_.data(), sentinel, store_.size());
  }
  std::byte* data() { return reinterpret_cast<std::byte*>(store_.data()) + guard_bytes; }
  std::size_t size() const { return store_.size() - 2 * guard_bytes; }
  /// Index (relative to data(), may be negative) of the first changed guard byte, or 0 with ok.
  bool guards_intact(long& where) const {
    for (std::size_t i = 0; i < guard_bytes; ++i) {
      if (store_[i] != sentinel) { where = static_cast<long>(i) - static_cast<long>(guard_bytes); return false; }
      const std::size_t j = store_.size() - guard_bytes + i;
      if (store_[j] != sentinel) { where = static_cast<long>(size() + i); return false; }
    }
    return true;
  }

 private:
  std::vector<unsigned char> store_;  // 16-byte aligned by the allocator; guard is 64
};

}  // namespace agx_test
