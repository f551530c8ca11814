// CRC32C throughput of the hardware (SSE4.2) and software (slicing-by-8) paths, in GB/s,
// for blocks of 1 KiB to 16 MiB (the figures in docs/reliability.md).
//
//   crc32c-speed [--seconds S]     S: measuring time per path and size (default 0.3)

#include "core/crc32c.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

template <class F>
double gbps(F crc, const std::vector<unsigned char>& buf, std::size_t bytes, double seconds) {
  std::uint32_t sink = 0;
  std::size_t done = 0;
  const auto t0 = Clock::now();
  double elapsed = 0;
  do {
    sink ^= crc(buf.data(), bytes, sink);
    done += bytes;
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (elapsed < seconds);
  volatile std::uint32_t keep = sink;
  (void)keep;
  return static_cast<double>(done) / elapsed / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0.3;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::atof(argv[i + 1]);
  const std::size_t sizes[] = {1024, 64 * 1024, 1024 * 1024, 16 * 1024 * 1024};
  std::vector<unsigned char> buf(sizes[3]);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(i * 131 + 7);
  const bool hw = agx::crc32c_hardware_available();
  std::printf("%10s %14s %14s\n", "bytes", "hardware GB/s", "software GB/s");
  for (std::size_t s : sizes) {
    const double h = hw ? gbps(agx::crc32c_hardware, buf, s, seconds) : 0;
    const double w = gbps(agx::crc32c_software, buf, s, seconds);
    if (hw) std::printf("%10zu %14.2f %14.2f\n", s, h, w);
    else std::printf("%10zu %14s %14.2f\n", s, "(no SSE4.2)", w);
  }
  return 0;
}
