#pragma once
// lib/hier's section of the process-wide settings (core/settings.hpp, NodeSettings, has
// every variable; docs/hierarchy.md and docs/environment.md describe them).

#include "core/settings.hpp"

namespace agx::hier {

using Settings = NodeSettings;

inline const Settings& settings() { return process_settings().node; }

}  // namespace agx::hier
