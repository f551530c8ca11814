#pragma once
// CRC32C (Castagnoli polynomial, as in iSCSI, ext4 and SSE4.2's crc32 instruction) of a
// byte range: the checksum AGX_INTEGRITY carries with every block (integrity.hpp).
//
// Two implementations compute the same value:
//   hardware   x86-64 with SSE4.2 (detected at run time, __builtin_cpu_supports): the
//              crc32 instruction on 8 bytes at a time, three independent streams over
//              consecutive stretches of the buffer, recombined with precomputed
//              "shift by n zero bytes" tables (the method of Mark Adler's crc32c.c).
//              Compiled with __attribute__((target("sse4.2"))), so the build needs no
//              -msse4.2 and the library still runs on CPUs without it.
//   software   table-driven, slicing by 8 (eight 256-entry tables, 8 bytes per step).
// crc32c() picks the hardware path when the CPU has it.

#include <cstddef>
#include <cstdint>

namespace agx {

/// CRC32C of `bytes` bytes at `data`, continuing from `crc` (0 to start).
std::uint32_t crc32c(const void* data, std::size_t bytes, std::uint32_t crc = 0);

/// The table-driven implementation (always available).
std::uint32_t crc32c_software(const void* data, std::size_t bytes, std::uint32_t crc = 0);

/// Whether this CPU has the crc32 instruction (SSE4.2).
bool crc32c_hardware_available();

/// The SSE4.2 implementation; only call it when crc32c_hardware_available().
std::uint32_t crc32c_hardware(const void* data, std::size_t bytes, std::uint32_t crc = 0);

}  // namespace agx
