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

/// How communicator rank `rank` finds its virtual-node label: `label` itself, or, where
/// `per_local` > 0 (AGX_VIRTUAL_NODE_SIZE), its index inside its real node divided by
/// `per_local` (known only once the ranks' records are exchanged, topology.cpp).
struct VirtualRule {
  int label = 0;
  int per_local = 0;
};

/// The rule of rank `rank`; {0, 0} when no setting is active. `setting` receives the
/// text of the active setting. Throws agx::Error for a malformed setting.
VirtualRule virtual_node_rule(int rank, std::string& setting);

}  // namespace agx::hier
