// lib/cuda settings from the environment (see settings.hpp).

#include "cuda/settings.hpp"

#include <cstdlib>
#include <string>

namespace agx::cuda {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

CudaSettings read_environment() {
  CudaSettings s;
  if (const char* p = env("AGX_CUDA_PATH"); p != nullptr && std::string(p) != "auto") {
    if (auto path = parse_path(p)) s.forced = *path;
    else s.invalid_path = p;
  }
  if (const char* c = env("AGX_CUDA_CHUNK_BYTES")) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(c, &end, 10);
    if (end != c && *end == '\0' && v > 0 && v <= (1ull << 30)) s.chunk_bytes = v;
  }
  if (const char* c = env("AGX_CUDA_STAGING_BYTES")) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(c, &end, 10);
    if (end != c && *end == '\0' && v >= 4096 && v <= (1ull << 40)) s.staging_bytes = v;
  }
  if (const char* a = env("AGX_CUDA_AWARE_MPI")) s.mpi_aware = std::string(a) != "0";
  if (const char* o = env("AGX_CUDA")) s.off = std::string(o) == "off" || std::string(o) == "0";
  return s;
}

}  // namespace

std::optional<Path> parse_path(std::string_view name) {
  for (Path p : {Path::aware, Path::staging, Path::ipc})
    if (to_string(p) == name) return p;
  return std::nullopt;
}

const CudaSettings& cuda_settings() {
  static const CudaSettings s = read_environment();
  return s;
}

}  // namespace agx::cuda
