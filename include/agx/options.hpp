#pragma once
// Per-call options of the C++ API.

#include <agx/algorithm.hpp>

namespace agx {

struct Options {
  /// `automatic` defers to AGX_ALGO when it is set, else to the selection rule.
  /// Any other value forces that algorithm; AGX_ALGO is then ignored.
  Algorithm algorithm = Algorithm::automatic;
};

}  // namespace agx
