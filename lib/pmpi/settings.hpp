#pragma once
// lib/pmpi's section of the process-wide settings (core/settings.hpp, InterposerSettings,
// has every variable; docs/interposer.md describes them). AGX_ALGO and AGX_VERBOSE are
// the core section's, read once for the C++ API and the interposer alike.

#include "core/settings.hpp"

namespace agx::pmpi {

using Settings = InterposerSettings;

inline const Settings& settings() { return process_settings().interposer; }

/// AGX_VERBOSE (is_set_flag).
inline bool verbose() { return process_settings().core.verbose; }

/// AGX_ALGO names a concrete algorithm (with its parameters: "bruck:k=4").
inline const std::optional<AlgorithmChoice>& forced() { return process_settings().core.forced; }

/// AGX_ALGO is set to something other than "auto" (valid or not).
inline bool algo_set() { return forced().has_value() || process_settings().invalid_of("AGX_ALGO"); }

/// AGX_ALGO's text, for messages.
inline const std::string& algo_text() { return process_settings().core.algo_text; }

}  // namespace agx::pmpi
