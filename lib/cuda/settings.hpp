#pragma once
// lib/cuda's settings, read once from the environment (docs/gpu.md, docs/environment.md).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace agx::cuda {

/// The three device paths (docs/gpu.md).
enum class Path { aware, staging, ipc };

constexpr std::string_view to_string(Path p) {
  return p == Path::aware ? "aware" : p == Path::staging ? "staging" : "ipc";
}

struct CudaSettings {
  /// AGX_CUDA_PATH=aware|staging|ipc: forces a path (auto when unset or "auto").
  std::optional<Path> forced;
  /// AGX_CUDA_PATH text when it names no path (the call throws).
  std::string invalid_path;
  /// AGX_CUDA_CHUNK_BYTES: staging chunk and message size of device calls (same on all ranks).
  std::size_t chunk_bytes = std::size_t{1} << 20;
  /// AGX_CUDA_STAGING_BYTES: most pinned bytes of one staging call's mirror (default
  /// 64 MiB, at least 4 KiB; same on all ranks); larger calls run in slices.
  std::size_t staging_bytes = std::size_t{64} << 20;
  /// AGX_CUDA_AWARE_MPI=0|1: overrides the query of the MPI library (MPICH has none).
  std::optional<bool> mpi_aware;
  /// AGX_CUDA=off: promise that no buffer is device memory (no per-call agreement).
  bool off = false;
};

/// The process-wide settings.
const CudaSettings& cuda_settings();

/// Parses a path name; nullopt when unknown.
std::optional<Path> parse_path(std::string_view name);

}  // namespace agx::cuda
