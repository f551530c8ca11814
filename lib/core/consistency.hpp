#pragma once
// Checking mode (AGX_CHECK=1): before any data moves, the ranks agree that they are making
// the same call — the same block sizes, the same algorithm, all in place or none. A mismatch
// that would otherwise hang or gather garbage becomes an agx::Error (MPI_ERR_ARG) on every
// rank, naming the ranks and values that disagree. Cost: one all-gather of a 24-byte
// summary per call (the block sizes are exchanged in full only when summaries differ).

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>

namespace agx {

class CommContext;

/// Collective over ctx. Throws agx::Error on every rank when the ranks' calls differ.
void check_consistency(CommContext& ctx, const Layout& layout, const AlgorithmChoice& algorithm,
                       bool in_place);

}  // namespace agx
