#pragma once
// Per-call options of the C++ API.

#include <agx/algorithm.hpp>

namespace agx {

struct Options {
  /// `automatic` defers to AGX_ALGO when it is set, else to the calibrated choice.
  /// Any other value forces that algorithm; AGX_ALGO is then ignored.
  Algorithm algorithm = Algorithm::automatic;
  /// With false, `automatic` ignores AGX_ALGO (the interposer's fallback uses this).
  bool use_environment = true;
  /// k of a radix-k algorithm (`bruck`: 2 or more, `Options{.algorithm = Algorithm::bruck,
  /// .radix = 4}`); 0: its default. Another forced algorithm, or `automatic`, with a radix
  /// is an agx::Error (MPI_ERR_ARG).
  int radix = 0;
};

}  // namespace agx
