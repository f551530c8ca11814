// ZeRO-style parameter prefetch: parameters sharded across ranks, gathered per layer.
//   mpirun -np 4 build/examples/zero_prefetch [layers] [params-per-layer] [steps]
//
// Each rank owns 1/N of every layer's parameters. Before layer l runs, its full
// parameters are all-gathered. Blocking: gather layer l, then compute it. Prefetch:
// the gather of layer l+1 is started (a persistent agx::Plan per layer, made once
// and started every step) before layer l is computed, and advanced with test() inside
// the compute loop. Several training "steps" reuse the plans with new parameter values
// (the shards change between steps, as after an optimizer update).
// The final activations of both runs are checked against a serial reference.

#include <agx/agx.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

float param(int step, int layer, std::size_t i) {
  return 0.5f + static_cast<float>((i * 31 + static_cast<std::size_t>(layer) * 7 +
                                    static_cast<std::size_t>(step) * 3) % 17) / 64.0f;
}

// One layer: a[i] = a[i] * w[i] + w[(i+1) % n] / 8, `repeat` times (the compute cost);
// `poll` runs every 1024 elements.
template <class Poll>
void layer_forward(std::vector<float>& a, const std::vector<float>& w, int repeat, Poll poll) {
  const std::size_t n = a.size();
  for (int r = 0; r < repeat; ++r)
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = a[i] * w[i] + w[(i + 1) % n] / 8.0f;
      a[i] -= std::floor(a[i]);  // keep values bounded
      if ((i & 1023) == 0) poll();
    }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const int layers = argc > 1 ? std::atoi(argv[1]) : 8;
  std::size_t per_layer = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 1 << 16;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 3;
  const int repeat = 4;
  per_layer -= per_layer % static_cast<std::size_t>(n);
  const std::size_t shard = per_layer / static_cast<std::size_t>(n);

  std::vector<std::vector<float>> shards(layers, std::vector<float>(shard));
  std::vector<std::vector<float>> full(layers, std::vector<float>(per_layer));
  auto load_shards = [&](int step) {  // this rank's slice of every layer
    for (int l = 0; l < layers; ++l)
      for (std::size_t i = 0; i < shard; ++i) shards[l][i] = param(step, l, rank * shard + i);
  };
  auto fresh_activation = [&] { return std::vector<float>(per_layer, 0.25f); };

  int bad = 0;
  try {
    agx::Allgather<float> gather(MPI_COMM_WORLD);
    std::vector<agx::Plan> plans;  // one per layer, reused by every step
    for (int l = 0; l < layers; ++l) plans.push_back(gather.plan(shards[l], full[l]));

    double t_blocking = 0, t_prefetch = 0, t_comm = 0;
    for (int step = 0; step < steps; ++step) {
      // reference: every parameter is known analytically
      std::vector<float> ref = fresh_activation();
      for (int l = 0; l < layers; ++l) {
        std::vector<float> w(per_layer);
        for (std::size_t i = 0; i < per_layer; ++i) w[i] = param(step, l, i);
        layer_forward(ref, w, repeat, [] {});
      }
      load_shards(step);

      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int l = 0; l < layers; ++l) gather(shards[l], full[l]);
      t_comm += MPI_Wtime() - t0;

      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      std::vector<float> a = fresh_activation();
      for (int l = 0; l < layers; ++l) {
        gather(shards[l], full[l]);
        layer_forward(a, full[l], repeat, [] {});
      }
      t_blocking += MPI_Wtime() - t0;
      bad += a != ref;
      for (auto& f : full) std::fill(f.begin(), f.end(), 0.0f);

      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      a = fresh_activation();
      plans[0].start();
      for (int l = 0; l < layers; ++l) {
        if (l + 1 < layers) plans[l + 1].start();  // prefetch the next layer
        plans[l].wait();
        layer_forward(a, full[l], repeat, [&] {
          if (l + 1 < layers) plans[l + 1].test();
        });
      }
      t_prefetch += MPI_Wtime() - t0;
      bad += a != ref;
    }
    double local[3] = {t_comm, t_blocking, t_prefetch}, slowest[3];
    MPI_Allreduce(local, slowest, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const double hidden = slowest[0] > 0 ? std::clamp((slowest[1] - slowest[2]) / slowest[0], 0.0, 1.0) : 0;
    if (rank == 0)
      std::printf("zero_prefetch N=%d layers=%d params/layer=%zu steps=%d algorithm=%s\n"
                  "  communication %.3f ms, blocking %.3f ms, prefetch %.3f ms, hidden %.0f%%\n",
                  n, layers, per_layer, steps,
                  std::string(agx::to_string(plans[0].algorithm())).c_str(), slowest[0] * 1e3,
                  slowest[1] * 1e3, slowest[2] * 1e3, hidden * 100);
  } catch (const agx::Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, e.error_class());
  }
  int total = 0;
  MPI_Allreduce(&bad, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("  results %s\n", total == 0 ? "correct" : "WRONG");
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
