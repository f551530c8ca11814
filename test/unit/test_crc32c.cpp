// CRC32C (AGX_INTEGRITY's checksum): known values, and the hardware path equal to the
// software path for every length 0..1100 at every alignment 0..7 and for lengths that
// exercise the three-stream loops (3 x 256 and 3 x 8192 bytes and around them).

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

TEST_CASE("crc32c hardware path equals software path", "[crc32c]") {
  if (!crc32c_hardware_available()) {
    WARN("no SSE4.2 on this CPU: only the software path is tested");
    return;
  }
  std::mt19937 gen(12345);
  std::vector<unsigned char> buf(3 * 8192 * 2 + 64 + 8);  // longest length + largest offset
  for (auto& b : buf) b = static_cast<unsigned char>(gen());
  for (std::size_t align = 0; align < 8; ++align)
    for (std::size_t len = 0; len <= 1100; ++len)
      REQUIRE(crc32c_hardware(buf.data() + align, len) == crc32c_software(buf.data() + align, len));
  for (std::size_t len : {3 * 8192 - 1, 3 * 8192, 3 * 8192 + 1, 3 * 8192 + 3 * 256 + 17,
                          6 * 8192, 6 * 8192 + 63})
    for (std::size_t align : {0, 3})
      REQUIRE(crc32c_hardware(buf.data() + align, len) == crc32c_software(buf.data() + align, len));
  CHECK(crc32c_hardware("123456789", 9, 0) == 0xE3069283u);
  CHECK(crc32c_hardware(buf.data() + 100, 5000, 0x12345678u) ==
        crc32c_software(buf.data() + 100, 5000, 0x12345678u));
}
