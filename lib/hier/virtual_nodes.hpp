#pragma once
// Virtual nodes: one host cut into several fake nodes, so that every inter-node path
// runs on one machine. Ranks of different virtual nodes never use shared memory with
// each other; everything between them goes through the inter-node schedule.
//
//   AGX_VIRTUAL_NODE_SIZE=k      inside each real node, local ranks 0..k-1 form virtual
//                                node 0, k..2k-1 virtual node 1, ...
//   AGX_VIRTUAL_NODES=a+b+...    consecutive groups of a, b, ... communicator ranks
//                                (2+3 on 5 ranks: {0,1} {2,3,4}); repeats past the sum
//   AGX_VIRTUAL_NODES=rr:k       round robin: rank r goes to virtual node r mod k
//   AGX_VIRTUAL_NODES=l0,l1,...  explicit label per rank (rank r gets l[r mod count])
//
// AGX_VIRTUAL_NODES wins when both are set. A virtual node never spans two real nodes.

#include <string>

namespace agx::hier {

/// The virtual-node label of communicator rank `rank` (of `size`) whose index inside
/// its real node is `local`; 0 when no setting is active. `setting` receives the text
/// of the active setting. Throws agx::Error for a malformed setting.
int virtual_node_label(int rank, int local, std::string& setting);

}  // namespace agx::hier
