#pragma once
// Settings of the hierarchical and shared-memory all-gathers, read once from the
// environment (documented in docs/hierarchy.md).
//
//   AGX_HIER_INTER=<name>     inter-node schedule: any point-to-point algorithm of the
//                             table (direct, ring, neighbor_exchange, recursive_doubling,
//                             bruck, distance_halving); default: the rule in
//                             hier_allgather.cpp
//   AGX_HIER_LEADERS=k        leaders per node, each carrying 1/k of every node
//                             aggregate (capped at the smallest node); default 1
//   AGX_SHM_CHUNK_BYTES=b     copy-in/copy-out chunk of large blocks; default 64 KiB
//   AGX_CMA=0|1               allow the single-copy path (process_vm_readv); default 1
//   AGX_CMA_MIN_BYTES=b       single copy when the mean block is at least b; default:
//                             from 256 KiB where a probe at setup finds the kernel copy
//                             fast enough to beat staging, else never (hier_context.cpp)
//   AGX_WAIT=auto|yield|sleep how a rank waits for its node's flags after a short spin:
//                             yield the core, or sleep on a futex until a flag moves;
//                             auto (default): sleep where the node has more ranks than
//                             the cores their affinity masks cover, else yield (wait.hpp)
//   AGX_NODE_DETECT=host|mpi  how ranks of one machine are found (topology.hpp): by host
//                             name and boot id (default, no collective) or by the MPI
//                             library's MPI_Comm_split_type
//   AGX_VIRTUAL_NODES, AGX_VIRTUAL_NODE_SIZE   their texts, parsed per communicator by
//                             virtual_nodes.cpp

#include <agx/algorithm.hpp>

#include <cstddef>
#include <optional>
#include <string>

namespace agx::hier {

struct Settings {
  std::optional<AlgorithmChoice> inter;  ///< AGX_HIER_INTER ("bruck:k=4" takes parameters)
  std::string invalid_inter;  ///< AGX_HIER_INTER text naming no point-to-point algorithm
  int leaders = 1;
  std::size_t chunk_bytes = 64 * 1024;
  bool chunk_set = false;  ///< AGX_SHM_CHUNK_BYTES given (else whole blocks when oversubscribed)
  bool cma = true;
  std::optional<std::size_t> cma_min_bytes;  ///< unset: decided by the setup probe
  enum class Wait { automatic, yield, sleep } wait = Wait::automatic;
  std::string invalid_wait;  ///< AGX_WAIT text that is none of auto, yield, sleep
  bool node_detect_mpi = false;     ///< AGX_NODE_DETECT=mpi
  std::string invalid_node_detect;  ///< AGX_NODE_DETECT text that is neither host nor mpi
  std::string virtual_nodes;      ///< AGX_VIRTUAL_NODES text (virtual_nodes.hpp); empty: unset
  std::string virtual_node_size;  ///< AGX_VIRTUAL_NODE_SIZE text; empty: unset
};

const Settings& settings();

}  // namespace agx::hier
