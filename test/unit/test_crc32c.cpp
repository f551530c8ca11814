// CRC32C (AGX_INTEGRITY's checksum): known values; the software path (slicing by 8) equal
// to a bit-by-bit reference for every length 0..1100 at every alignment 0..7 and for
// lengths that exercise the three-stream loops (3 x 256 and 3 x 8192 bytes and around
// them), on every CPU; the hardware path equal to the software path on the same inputs
// wherever the CPU has SSE4.2. Each run says (WARN) which paths it tested.

#include <catch2/catch.hpp>

#include "core/crc32c.hpp"

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

using namespace agx;

TEST_CASE("crc32c of known strings", "[crc32c]") {
  const char* digits = "123456789";
  CHECK(crc32c_software(digits, 9) == 0xE3069283u);
  CHECK(crc32c(digits, 9) == 0xE3069283u);
  CHECK(crc32c_software(nullptr, 0) == 0u);
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xff);
  CHECK(crc32c_software(zeros.data(), 32) == 0x8A9136AAu);  // RFC 3720 B.4
  CHECK(crc32c_software(ones.data(), 32) == 0x62A8AB43u);
  // Continuing from a previous value equals one pass over the concatenation.
  CHECK(crc32c_software(digits + 4, 5, crc32c_software(digits, 4)) == 0xE3069283u);
}

namespace {

// The definition, one bit at a time (reflected polynomial 0x82F63B78): slow, obviously right.
std::uint32_t crc32c_bitwise(const unsigned char* data, std::size_t bytes, std::uint32_t crc = 0) {
  crc = ~crc;
  for (std::size_t i = 0; i < bytes; ++i) {
    crc ^= data[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// Random bytes for the longest length (6 x 8192 + 63) at the largest offset (7).
std::vector<unsigned char> random_buffer() {
  std::mt19937 gen(12345);
  std::vector<unsigned char> buf(3 * 8192 * 2 + 64 + 8);
  for (auto& b : buf) b = static_cast<unsigned char>(gen());
  return buf;
}

const std::size_t long_lengths[] = {3 * 256 - 1, 3 * 256, 3 * 256 + 1, 3 * 8192 - 1, 3 * 8192,
                                    3 * 8192 + 1, 3 * 8192 + 3 * 256 + 17, 6 * 8192, 6 * 8192 + 63};

}  // namespace

TEST_CASE("crc32c software path equals the bitwise definition", "[crc32c]") {
  WARN("crc32c: software path tested");
  const std::vector<unsigned char> buf = random_buffer();
  CHECK(crc32c_bitwise(reinterpret_cast<const unsigned char*>("123456789"), 9) == 0xE3069283u);
  for (std::size_t align = 0; align < 8; ++align)
    for (std::size_t len = 0; len <= 1100; ++len)
      REQUIRE(crc32c_software(buf.data() + align, len) == crc32c_bitwise(buf.data() + align, len));
  for (std::size_t len : long_lengths)
    for (std::size_t align : {0, 3})
      REQUIRE(crc32c_software(buf.data() + align, len) == crc32c_bitwise(buf.data() + align, len));
  CHECK(crc32c_software(buf.data() + 100, 5000, 0x12345678u) ==
        crc32c_bitwise(buf.data() + 100, 5000, 0x12345678u));
}

TEST_CASE("crc32c hardware path equals software path", "[crc32c]") {
  const std::vector<unsigned char> buf = random_buffer();
  // crc32c() itself is tested on every CPU: it must agree with the software path.
  for (std::size_t len : {std::size_t{0}, std::size_t{1}, std::size_t{9}, std::size_t{1100}, long_lengths[8]})
    REQUIRE(crc32c(buf.data() + 1, len) == crc32c_software(buf.data() + 1, len));
  if (!crc32c_hardware_available()) {
    WARN("crc32c: no SSE4.2 on this CPU: hardware path not tested");
    return;
  }
  WARN("crc32c: SSE4.2 present: hardware path tested");
  for (std::size_t align = 0; align < 8; ++align)
    for (std::size_t len = 0; len <= 1100; ++len)
      REQUIRE(crc32c_hardware(buf.data() + align, len) == crc32c_software(buf.data() + align, len));
  for (std::size_t len : long_lengths)
    for (std::size_t align : {0, 3})
      REQUIRE(crc32c_hardware(buf.data() + align, len) == crc32c_software(buf.data() + align, len));
  CHECK(crc32c_hardware("123456789", 9, 0) == 0xE3069283u);
  CHECK(crc32c_hardware(buf.data() + 100, 5000, 0x12345678u) ==
        crc32c_software(buf.data() + 100, 5000, 0x12345678u));
}
