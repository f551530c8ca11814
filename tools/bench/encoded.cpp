// agx-bench --encoded: the encoded all-gather against the plain call and MPI_Allgather
// (tools/bench/encoded.hpp).

#include "encoded.hpp"
#include "timing.hpp"

#include <agx/agx.hpp>
#include <agx/encoded.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace bench {

namespace {

/// Rank `rank`'s block of `bytes` bytes of one data kind.
std::vector<std::byte> make_block(const std::string& kind, std::size_t bytes, int rank) {
  std::vector<std::byte> b(bytes);
  std::uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(rank + 1);
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  const std::size_t n = bytes / 4;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t w = 0;
    if (kind == "low_entropy") {
      w = static_cast<std::uint32_t>(i / 64 % 7) + static_cast<std::uint32_t>(rank);
    } else if (kind == "weights") {  // fp32 with few distinct exponents
      const std::uint64_t r = next();
      const float m = 1.0f + static_cast<float>(r & 0xffu) / 256.0f;
      const float f = ((r >> 8) & 1u ? -m : m) / static_cast<float>(1u << ((r >> 9) & 3u));
      std::memcpy(&w, &f, 4);
    } else if (kind == "sparse") {  // 95% zeros
      const std::uint64_t r = next();
      const float f = r % 100 < 5 ? static_cast<float>(r % 1000) / 7.0f + 1.0f : 0.0f;
      std::memcpy(&w, &f, 4);
    } else {
      w = static_cast<std::uint32_t>(next());
    }
    std::memcpy(b.data() + 4 * i, &w, 4);
  }
  for (std::size_t i = 4 * n; i < bytes; ++i) b[i] = static_cast<std::byte>(next());
  return b;
}

/// Verifies `call` once against `want` (which also warms up), then times it; the median
/// of the slowest rank's seconds per call, or -1 for a wrong result or a failed call.
double measure(MPI_Comm comm, const Settings& s, std::vector<std::byte>& got,
               const std::vector<std::byte>& want, const std::function<void()>& call) {
  int ok = 1, all_ok = 0;
  std::fill(got.begin(), got.end(), std::byte{0});
  const double t0 = MPI_Wtime();
  double once = 0;
  try {
    call();
    once = MPI_Wtime() - t0;
    ok = got == want ? 1 : 0;
  } catch (const agx::Error& e) {
    std::fprintf(stderr, "agx-bench: %s\n", e.what());
    ok = 0;
  }
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
  if (!all_ok) return -1;
  MPI_Allreduce(MPI_IN_PLACE, &once, 1, MPI_DOUBLE, MPI_MAX, comm);
  const double t = barrier_median(comm, s.passes, once, s.batch_seconds, s.max_iters, call);
  ok = got == want ? 1 : 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
  return all_ok ? t : -1;
}

struct Way {
  const char* name;
  agx::EncodeOptions options;
  bool available;
};

}  // namespace

int run_encoded(MPI_Comm comm, const Settings& s) {
  int rank = 0, nranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  const std::vector<Way> ways{
      {"sparse", {.sparse = true}, true},
      {"lz4", {.lossless = agx::Lossless::lz4}, agx::lossless_available(agx::Lossless::lz4)},
      {"zstd", {.lossless = agx::Lossless::zstd}, agx::lossless_available(agx::Lossless::zstd)},
      {"auto", {.lossless = agx::Lossless::automatic}, true}};
  const double lz4_speed = agx::compressor_bytes_per_s(comm, agx::Lossless::lz4);
  const double zstd_speed = agx::compressor_bytes_per_s(comm, agx::Lossless::zstd);
  std::FILE* csv = nullptr;
  if (rank == 0) {
    std::printf("# agx-bench --encoded, N=%d: median seconds per call (slowest rank); codecs: %s\n"
                "# compressor speed (slowest rank, what `auto` compares with the link): "
                "lz4 %.3g B/s, zstd %.3g B/s\n"
                "# wire: encoded bytes / plain bytes; auto: whether the rule compressed\n"
                "%-11s %9s %10s %10s %10s %10s %10s %10s %7s %7s %7s %7s %5s\n",
                nranks, agx::codecs_built().c_str(), lz4_speed, zstd_speed, "data", "bytes",
                "plain", "sparse", "lz4", "zstd", "auto", "mpi", "w.spar", "w.lz4", "w.zstd",
                "au/mpi", "auto");
    if (!s.csv.empty()) csv = std::fopen(s.csv.c_str(), "w");
    if (csv != nullptr)
      std::fprintf(csv, "# %s\n# lz4_bytes_per_s %.6g zstd_bytes_per_s %.6g\n"
                        "N,data,bytes,way,seconds,wire_bytes,plain_bytes,encoded,status\n",
                   s.command_line.c_str(), lz4_speed, zstd_speed);
  }
  int bad = 0;
  for (const std::string& kind : s.data)
    for (const std::size_t bytes : s.sizes) {
      const std::vector<std::byte> mine = make_block(kind, bytes, rank);
      std::vector<std::byte> want(bytes * static_cast<std::size_t>(nranks)), got(want.size());
      const int c = static_cast<int>(bytes);
      PMPI_Allgather(mine.data(), c, MPI_BYTE, want.data(), c, MPI_BYTE, comm);
      const std::span<const std::byte> send(mine);
      const std::span<std::byte> recv(got);
      std::vector<double> t;
      std::vector<double> wire;
      std::vector<int> enc;
      const double plain = measure(comm, s, got, want, [&] { agx::allgather(comm, send, recv); });
      for (const Way& w : ways) {
        agx::EncodedResult r;
        const double sec = w.available ? measure(comm, s, got, want, [&] {
          r = agx::encoded_allgather(comm, send, recv, w.options);
        }) : 0;
        t.push_back(sec);
        wire.push_back(w.available && r.plain_bytes > 0
                           ? static_cast<double>(r.wire_bytes) / static_cast<double>(r.plain_bytes)
                           : 0);
        enc.push_back(r.encoded ? 1 : 0);
        bad += w.available && sec < 0;
      }
      const double mpi = measure(comm, s, got, want, [&] {
        PMPI_Allgather(mine.data(), c, MPI_BYTE, got.data(), c, MPI_BYTE, comm);
      });
      bad += plain < 0 || mpi < 0;
      if (rank != 0) continue;
      std::printf("%-11s %9zu %10.3e %10.3e %10.3e %10.3e %10.3e %10.3e %7.3f %7.3f %7.3f %7.2f %5s\n",
                  kind.c_str(), bytes, plain, t[0], t[1], t[2], t[3], mpi, wire[0], wire[1],
                  wire[2], mpi > 0 ? t[3] / mpi : 0.0, enc[3] ? "yes" : "no");
      if (csv == nullptr) continue;
      const std::size_t all = bytes * static_cast<std::size_t>(nranks);
      auto row = [&](const char* way, double sec, double w, int e) {
        std::fprintf(csv, "%d,%s,%zu,%s,%.9e,%.0f,%zu,%d,%s\n", nranks, kind.c_str(), bytes, way,
                     sec, w * static_cast<double>(all), all, e, sec < 0 ? "WRONG" : "ok");
      };
      row("plain", plain, 1, 0);
      for (std::size_t i = 0; i < ways.size(); ++i)
        if (ways[i].available) row(ways[i].name, t[i], wire[i], enc[i]);
      row("mpi", mpi, 1, 0);
    }
  if (csv != nullptr) std::fclose(csv);
  if (rank == 0 && bad > 0) std::fprintf(stderr, "agx-bench: %d way(s) WRONG or failed\n", bad);
  return bad > 0 ? 1 : 0;
}

}  // namespace bench
