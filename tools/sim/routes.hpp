#pragma once
// The simulated platform's links and routes for the cost model (agx::Routes,
// core/cost_model.hpp), written from SimGrid 3.32's routing of the platforms that
// tools/sim/gen-platforms.py generates: which links a message from node a to node b
// crosses, so that the model can price per-hop latency and two messages meeting on a link.
//
//   cluster    (no topology) a private link per host up and down, no backbone
//   fattree    2 levels, A hosts per leaf, B leaves, A spines; a message between leaves
//              goes up to spine (destination host mod A) (SimGrid's d-mod-k), then down
//   dragonfly  A groups of A routers (one chassis), B hosts per router; a message to
//              group j first goes to router j of the sender's group (a green link unless it
//              is that router), over the one blue link from group i to group j to router i
//              of group j, then on a green link to the destination's router
// Every link has the cluster's bandwidth and latency, split duplex; a host's loopback (a
// message inside a node) is a fat pipe: every message gets its full rate.

#include "core/cost_model.hpp"

#include <cstddef>
#include <memory>
#include <string>

namespace agx::sim {

struct RouteSpec {
  std::string kind;  ///< cluster, fattree, dragonfly
  int a = 0, b = 0;  ///< the shape (see above)
  double link_bytes_per_s = 0, link_latency_s = 0;
  double loopback_bytes_per_s = 0, loopback_latency_s = 0;
  /// SMPI's CPU time per message: an MPI_Isend costs its sender smpi/ois (0 here), a
  /// message below smpi/send-is-detached-thresh (65536 B, the default) is sent detached
  /// (eager: the sender goes on) and costs its receiver smpi/or once it has arrived
  /// (SMPI's Request::finish_wait; MPI_Waitall takes its requests as they complete); a
  /// larger one keeps its sender until it is delivered and costs no CPU time.
  double recv_overhead_s = 0;         ///< smpi/or
  std::size_t rendezvous_bytes = 65536;  ///< smpi/send-is-detached-thresh
};

/// The routes of `hosts` nodes of that shape; throws std::invalid_argument when the shape
/// does not fit (unknown kind, hosts not A·B for a fat tree or A·A·B for a dragonfly).
std::shared_ptr<const Routes> make_routes(const RouteSpec& spec, int hosts);

}  // namespace agx::sim
