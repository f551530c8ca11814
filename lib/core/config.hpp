#pragma once
// lib/core's section of the process-wide settings (settings.hpp has every variable).

#include "core/settings.hpp"

#include <agx/error.hpp>

namespace agx {

using Config = CoreSettings;

/// The core section of the process-wide settings, read from the environment on first use.
inline const Config& config() { return process_settings().core; }

/// Throws agx::Error (MPI_ERR_ARG) naming every setting that could not be read, of any
/// section, AGX_ALGO aside (the calls that read it report it: select.cpp, lib/pmpi).
inline void check_config() {
  const ProcessSettings& p = process_settings();
  if (p.invalid.empty()) return;  // (every call: no string built)
  if (std::string m = p.invalid_message(); !m.empty()) throw Error(MPI_ERR_ARG, m);
}

}  // namespace agx
