#include "routes.hpp"

#include <stdexcept>

namespace agx::sim {

std::shared_ptr<const Routes> make_routes(const RouteSpec& spec, int hosts) {
  auto routes = std::make_shared<Routes>();
  routes->recv_overhead_s = spec.recv_overhead_s;
  routes->rendezvous_bytes = spec.rendezvous_bytes;
  const RouteLink link{1.0 / spec.link_bytes_per_s, spec.link_latency_s, false};
  const RouteLink loopback{1.0 / spec.loopback_bytes_per_s, spec.loopback_latency_s, true};
  const int h = hosts;
  // Ids: host up h, down H + h, loopback 2H + h; the topology's own links from 3H.
  routes->links.assign(static_cast<std::size_t>(2 * h), link);
  routes->links.insert(routes->links.end(), static_cast<std::size_t>(h), loopback);
  const int base = 3 * h;
  const int a = spec.a, b = spec.b;
  if (spec.kind == "cluster") {
    routes->path = [h](int from, int to, std::vector<int>& links) {
      if (from == to) { links.push_back(2 * h + from); return; }
      links.push_back(from);
      links.push_back(h + to);
    };
  } else if (spec.kind == "fattree") {
    if (a < 1 || b < 1 || a * b != h) throw std::invalid_argument("fattree: hosts must be A*B");
    routes->links.insert(routes->links.end(), static_cast<std::size_t>(2 * a * b), link);
    // leaf l up to spine s: base + l·A + s; spine s down to leaf l: base + B·A + s·B + l
    routes->path = [h, a, b, base](int from, int to, std::vector<int>& links) {
      if (from == to) { links.push_back(2 * h + from); return; }
      links.push_back(from);
      const int lf = from / a, lt = to / a;
      if (lf != lt) {
        const int spine = to % a;
        links.push_back(base + lf * a + spine);
        links.push_back(base + b * a + spine * b + lt);
      }
      links.push_back(h + to);
    };
  } else if (spec.kind == "dragonfly") {
    if (a < 2 || b < 1 || a * a * b != h) throw std::invalid_argument("dragonfly: hosts must be A*A*B");
    const int g = a, p = b;
    // green in group q from router x to router y: base + (q·G + x)·G + y;
    // blue from group x to group y: base + G³ + x·G + y
    routes->links.insert(routes->links.end(), static_cast<std::size_t>(g * g * g + g * g), link);
    routes->path = [h, g, p, base](int from, int to, std::vector<int>& links) {
      if (from == to) { links.push_back(2 * h + from); return; }
      links.push_back(from);
      const int gf = from / (g * p), rf = from / p % g, gt = to / (g * p), rt = to / p % g;
      int group = gf, router = rf;
      if (gf != gt) {
        if (router != gt) links.push_back(base + (gf * g + router) * g + gt);
        links.push_back(base + g * g * g + gf * g + gt);
        group = gt;
        router = gf;
      }
      if (router != rt) links.push_back(base + (group * g + router) * g + rt);
      links.push_back(h + to);
    };
  } else {
    throw std::invalid_argument("unknown kind '" + spec.kind + "' (cluster, fattree, dragonfly)");
  }
  return routes;
}

}  // namespace agx::sim
