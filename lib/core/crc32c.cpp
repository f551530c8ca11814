// CRC32C, hardware and software (crc32c.hpp).

#include "core/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace agx {
namespace {

constexpr std::uint32_t poly = 0x82f63b78;  // Castagnoli, bit-reversed

// Slicing-by-8 tables: table[k][b] is the CRC of byte b followed by k zero bytes.
struct Tables {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  constexpr Tables() {
    for (std::uint32_t b = 0; b < 256; ++b) {
      std::uint32_t c = b;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
      t[0][b] = c;
    }
    for (std::uint32_t b = 0; b < 256; ++b)
      for (std::size_t k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
};
constexpr Tables tables;

std::uint64_t load64(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;  // little endian assumed below (x86-64, aarch64)
}

}  // namespace

std::uint32_t crc32c_software(const void* data, std::size_t bytes, std::uint32_t crc) {
  const auto& t = tables.t;
  auto p = static_cast<const unsigned char*>(data);
  std::uint32_t c = ~crc;
  for (; bytes >= 8; bytes -= 8, p += 8) {
    const std::uint64_t v = load64(p) ^ c;
    c = t[7][v & 0xff] ^ t[6][(v >> 8) & 0xff] ^ t[5][(v >> 16) & 0xff] ^ t[4][(v >> 24) & 0xff] ^
        t[3][(v >> 32) & 0xff] ^ t[2][(v >> 40) & 0xff] ^ t[1][(v >> 48) & 0xff] ^ t[0][v >> 56];
  }
  for (; bytes > 0; --bytes) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
  return ~c;
}

#if defined(__x86_64__)
namespace {

// The three-stream method: CRCs of three consecutive stretches of `len` bytes run in
// parallel (the crc32 instruction has a latency of 3 cycles and a throughput of 1), then
// the first is shifted over `len` zero bytes and combined with the second, and so on.
// Shifting a CRC register over n zero bytes is a linear map over GF(2): a 32x32 bit
// matrix, applied here through four 256-entry tables (one per byte of the register).
constexpr std::size_t long_len = 8192, short_len = 256;

using ShiftTable = std::array<std::array<std::uint32_t, 256>, 4>;

std::uint32_t gf2_times(const std::uint32_t* mat, std::uint32_t vec) {
  std::uint32_t sum = 0;
  for (; vec != 0; vec >>= 1, ++mat)
    if (vec & 1) sum ^= *mat;
  return sum;
}

void gf2_square(std::uint32_t* square, const std::uint32_t* mat) {
  for (int n = 0; n < 32; ++n) square[n] = gf2_times(mat, mat[n]);
}

// The matrix that shifts a CRC register over `len` zero bytes (`len` a power of two).
void zeros_operator(std::uint32_t* even, std::size_t len) {
  std::uint32_t odd[32];
  odd[0] = poly;  // one zero bit
  for (int n = 1; n < 32; ++n) odd[n] = std::uint32_t{1} << (n - 1);
  gf2_square(even, odd);  // two zero bits
  gf2_square(odd, even);  // four zero bits
  // Each square doubles the shift: the first puts one zero byte in `even`.
  for (;;) {
    gf2_square(even, odd);
    len >>= 1;
    if (len == 0) return;
    gf2_square(odd, even);
    len >>= 1;
    if (len == 0) break;
  }
  std::memcpy(even, odd, sizeof odd);
}

ShiftTable make_shift(std::size_t len) {
  std::uint32_t op[32];
  zeros_operator(op, len);
  ShiftTable z{};
  for (std::uint32_t n = 0; n < 256; ++n) {
    z[0][n] = gf2_times(op, n);
    z[1][n] = gf2_times(op, n << 8);
    z[2][n] = gf2_times(op, n << 16);
    z[3][n] = gf2_times(op, n << 24);
  }
  return z;
}

std::uint32_t shift(const ShiftTable& z, std::uint32_t crc) {
  return z[0][crc & 0xff] ^ z[1][(crc >> 8) & 0xff] ^ z[2][(crc >> 16) & 0xff] ^ z[3][crc >> 24];
}

const ShiftTable& long_shift() {
  static const ShiftTable z = make_shift(long_len);
  return z;
}
const ShiftTable& short_shift() {
  static const ShiftTable z = make_shift(short_len);
  return z;
}

__attribute__((target("sse4.2"))) std::uint64_t three_streams(const unsigned char*& p,
                                                               std::size_t& bytes,
                                                               std::uint64_t c0, std::size_t len,
                                                               const ShiftTable& z) {
  while (bytes >= 3 * len) {
    std::uint64_t c1 = 0, c2 = 0;
    const unsigned char* end = p + len;
    do {
      c0 = _mm_crc32_u64(c0, load64(p));
      c1 = _mm_crc32_u64(c1, load64(p + len));
      c2 = _mm_crc32_u64(c2, load64(p + 2 * len));
      p += 8;
    } while (p < end);
    c0 = shift(z, static_cast<std::uint32_t>(c0)) ^ c1;
    c0 = shift(z, static_cast<std::uint32_t>(c0)) ^ c2;
    p += 2 * len;
    bytes -= 3 * len;
  }
  return c0;
}

}  // namespace

bool crc32c_hardware_available() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}

__attribute__((target("sse4.2"))) std::uint32_t crc32c_hardware(const void* data,
                                                                std::size_t bytes,
                                                                std::uint32_t crc) {
  auto p = static_cast<const unsigned char*>(data);
  std::uint64_t c = static_cast<std::uint32_t>(~crc);
  for (; bytes > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7) != 0; --bytes)
    c = _mm_crc32_u8(static_cast<std::uint32_t>(c), *p++);  // to 8-byte alignment
  if (bytes >= 3 * long_len) c = three_streams(p, bytes, c, long_len, long_shift());
  if (bytes >= 3 * short_len) c = three_streams(p, bytes, c, short_len, short_shift());
  for (; bytes >= 8; bytes -= 8, p += 8) c = _mm_crc32_u64(c, load64(p));
  for (; bytes > 0; --bytes) c = _mm_crc32_u8(static_cast<std::uint32_t>(c), *p++);
  return ~static_cast<std::uint32_t>(c);
}

#else

bool crc32c_hardware_available() { return false; }

std::uint32_t crc32c_hardware(const void* data, std::size_t bytes, std::uint32_t crc) {
  return crc32c_software(data, bytes, crc);
}

#endif

std::uint32_t crc32c(const void* data, std::size_t bytes, std::uint32_t crc) {
  return crc32c_hardware_available() ? crc32c_hardware(data, bytes, crc)
                                     : crc32c_software(data, bytes, crc);
}

}  // namespace agx
