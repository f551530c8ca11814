// A communicator's placement from its set-up exchange (lib/hier/topology.cpp's
// topology_from): a pure function of every rank's record, so built here without MPI.

#include <catch2/catch.hpp>

#include "core/cost_model.hpp"
#include "hier/hier_context.hpp"
#include "hier/topology.hpp"

#include <vector>

using namespace agx;
using agx::hier::NodeRecord;

namespace {

// Records of ranks whose machines are named by `real` and whose virtual labels are
// `label`; rank r is bound to core r.
std::vector<NodeRecord> records(const std::vector<int>& real, const std::vector<int>& label) {
  std::vector<NodeRecord> out(real.size());
  for (std::size_t r = 0; r < real.size(); ++r) {
    out[r].host = static_cast<std::uint64_t>(real[r]);
    out[r].label = label.empty() ? 0 : label[r];
    out[r].cpus[r / 64] = std::uint64_t{1} << (r % 64);
  }
  return out;
}

}  // namespace

TEST_CASE("topology_from: one node per shared-memory node, numbered by lowest rank") {
  const auto recs = records({0, 0, 0, 3, 3}, {});
  const hier::Topology t = hier::topology_from(recs, 4, "");
  CHECK(t.nnodes == 2);
  CHECK(t.real_nodes == 2);
  CHECK(t.node_of == std::vector<int>{0, 0, 0, 1, 1});
  CHECK(t.local_of == std::vector<int>{0, 1, 2, 0, 1});
  CHECK(t.members == std::vector<std::vector<int>>{{0, 1, 2}, {3, 4}});
  CHECK(t.node == 1);
  CHECK(t.local == 1);
  CHECK(t.node_cores == 2);  // ranks 3 and 4, one core each
  CHECK(t.node_comm == MPI_COMM_NULL);
  CHECK(hier::leaders_for(t) == 1);  // AGX_HIER_LEADERS unset
  CHECK(Placement(t.node_of).nodes() == 2);
}

TEST_CASE("topology_from: virtual labels cut a node; round robin interleaves ranks") {
  // 6 ranks on one machine, AGX_VIRTUAL_NODES=rr:2 (labels 0 1 0 1 0 1).
  const auto recs = records({0, 0, 0, 0, 0, 0}, {0, 1, 0, 1, 0, 1});
  const hier::Topology t = hier::topology_from(recs, 3, "rr:2");
  CHECK(t.nnodes == 2);
  CHECK(t.real_nodes == 1);
  CHECK(t.node_of == std::vector<int>{0, 1, 0, 1, 0, 1});
  CHECK(t.members == std::vector<std::vector<int>>{{0, 2, 4}, {1, 3, 5}});
  CHECK(t.node == 1);
  CHECK(t.local == 1);
  CHECK(t.label == 1);
  CHECK(t.node_cores == 3);
  CHECK(t.virtual_setting == "rr:2");
}

TEST_CASE("topology_from: the same label on two machines makes two nodes") {
  // Two machines of 2 ranks placed round robin (machine of rank r: r mod 2), labels all 0.
  const auto recs = records({0, 1, 0, 1}, {});
  const hier::Topology t = hier::topology_from(recs, 0, "");
  CHECK(t.nnodes == 2);
  CHECK(t.node_of == std::vector<int>{0, 1, 0, 1});
  CHECK(t.members == std::vector<std::vector<int>>{{0, 2}, {1, 3}});
}

TEST_CASE("topology_from: AGX_VIRTUAL_NODE_SIZE cuts each machine by index inside it") {
  // Two machines (hashes 77 and 5) placed round robin, 3 ranks each; size 2 per virtual
  // node: machine 77 holds ranks 0 2 4 (indices 0 1 2: labels 0 0 1), machine 5 ranks 1 3 5.
  auto recs = records({77, 5, 77, 5, 77, 5}, {});
  for (auto& r : recs) r.per_local = 2;
  const hier::Topology t = hier::topology_from(recs, 4, "AGX_VIRTUAL_NODE_SIZE=2");
  CHECK(t.real_nodes == 2);
  CHECK(t.nnodes == 4);
  CHECK(t.members == std::vector<std::vector<int>>{{0, 2}, {1, 3}, {4}, {5}});
  CHECK(t.node_of == std::vector<int>{0, 1, 0, 1, 2, 3});
  CHECK(t.node == 2);
  CHECK(t.local == 0);
  CHECK(t.label == 1);
}

TEST_CASE("host_identity: one value per process") {
  const std::uint64_t id = hier::host_identity();
  CHECK(id != 0);
  CHECK(hier::host_identity() == id);
}

TEST_CASE("topology_from: shared cores are counted once") {
  auto recs = records({0, 0, 0, 0}, {});
  for (auto& r : recs) r.cpus[0] = 0x3;  // every rank may run on cores 0 and 1
  const hier::Topology t = hier::topology_from(recs, 0, "");
  CHECK(t.nnodes == 1);
  CHECK(t.node_cores == 2);
}
