#pragma once
// lib/cuda's section of the process-wide settings (core/settings.hpp, DeviceSettings, has
// every variable; docs/gpu.md and docs/environment.md describe them).

#include "core/settings.hpp"

#include <optional>
#include <string_view>

namespace agx::cuda {

/// The three device paths (docs/gpu.md).
using Path = DevicePath;
using CudaSettings = DeviceSettings;
using agx::to_string;  // cuda::to_string(Path), as callers write it

inline const CudaSettings& cuda_settings() { return process_settings().device; }

/// Parses a path name; nullopt when unknown.
inline std::optional<Path> parse_path(std::string_view name) { return parse_device_path(name); }

}  // namespace agx::cuda
