// The process-wide settings (lib/core/settings.hpp): read_settings is a pure function of
// the environment it is given, so every variable's parsing is tested here without MPI.

#include <catch2/catch.hpp>

#include "core/settings.hpp"

#include <map>
#include <string>

using namespace agx;

namespace {

ProcessSettings read(const std::map<std::string, std::string>& env) {
  return read_settings([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

bool mentions(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("an empty environment gives every section's defaults and no invalid setting") {
  const ProcessSettings s = read({});
  CHECK(s.invalid.empty());
  CHECK(s.invalid_message().empty());
  CHECK_FALSE(s.core.forced.has_value());
  CHECK(s.core.max_message_bytes == CoreSettings::default_max_message_bytes);
  CHECK(s.node.leaders == 1);
  CHECK(s.node.wait == NodeSettings::Wait::automatic);
  CHECK(s.device.chunk_bytes == std::size_t{1} << 20);
  CHECK(s.interposer.compress == Lossless::off);
  CHECK(s.interposer.alloc_mem);
}

TEST_CASE("valid values reach their sections") {
  const ProcessSettings s = read({{"AGX_ALGO", "bruck:k=4"}, {"AGX_TIMEOUT", "2.5"},
                                  {"AGX_HIER_LEADERS", "3"}, {"AGX_WAIT", "sleep"},
                                  {"AGX_DIRECT_WRITE_MIN_BYTES", "0"}, {"AGX_CUDA_PATH", "ipc"},
                                  {"AGX_CUDA_STAGING_BYTES", "4096"}, {"AGX_COMPRESS", "lz4"},
                                  {"AGX_ALLOC_MEM", "0"}, {"AGX_TEST_KILL_SEGMENT", "1:mapped:2"},
                                  {"AGX_TEST_CORRUPT_BLOCK", "1:lie"}, {"AGX_VERBOSE", "yes"}});
  CHECK(s.invalid.empty());
  REQUIRE(s.core.forced.has_value());
  CHECK(s.core.forced->id == Algorithm::bruck);
  CHECK(s.core.forced->radix == 4);
  CHECK(s.core.timeout_seconds == 2.5);
  CHECK(s.core.verbose);
  REQUIRE(s.core.corrupt.has_value());
  CHECK(s.core.corrupt->rank == 1);
  CHECK(s.core.corrupt->kind == "lie");
  CHECK(s.node.leaders == 3);
  CHECK(s.node.wait == NodeSettings::Wait::sleep);
  CHECK(s.node.direct_write_min_bytes == 0);
  CHECK(s.node.kill_segment.local == 1);
  CHECK(s.node.kill_segment.point == 1);
  CHECK(s.node.kill_segment.n == 2);
  CHECK(s.device.forced == DevicePath::ipc);
  CHECK(s.device.staging_bytes == 4096);
  CHECK(s.interposer.compress == Lossless::lz4);
  CHECK_FALSE(s.interposer.alloc_mem);
}

TEST_CASE("a bad value in each section is one entry naming its variable, and the section keeps its default") {
  struct Case {
    const char* variable;
    const char* text;
  };
  // core, node, device, interposer; several per section where the old readers differed
  for (const Case c : {Case{"AGX_TIMEOUT", "soon"}, Case{"AGX_DESCRIPTOR_CACHE", "-1"},
                       Case{"AGX_MAX_MESSAGE_BYTES", "0"}, Case{"AGX_COMPRESS_BYTES_PER_S", "fast"},
                       Case{"AGX_TEST_CORRUPT_BLOCK", "1:melt"}, Case{"AGX_WAIT", "spin"},
                       Case{"AGX_NODE_DETECT", "dns"}, Case{"AGX_HIER_INTER", "hierarchical"},
                       Case{"AGX_HIER_LEADERS", "0"}, Case{"AGX_SHM_CHUNK_BYTES", "64k"},
                       Case{"AGX_CMA_MIN_BYTES", "x"}, Case{"AGX_TEST_KILL_SEGMENT", "1:boom:1"},
                       Case{"AGX_CUDA_PATH", "nvlink"}, Case{"AGX_CUDA_CHUNK_BYTES", "1MiB"},
                       Case{"AGX_CUDA_STAGING_BYTES", "100"}, Case{"AGX_COMPRESS", "gzip"},
                       Case{"AGX_COMPRESS_MIN_BYTES", "-5"}}) {
    INFO(c.variable << "=" << c.text);
    const ProcessSettings s = read({{c.variable, c.text}});
    REQUIRE(s.invalid.size() == 1);
    CHECK(s.invalid[0].variable == c.variable);
    CHECK(s.invalid[0].text == c.text);
    CHECK_FALSE(s.invalid[0].reason.empty());
    CHECK(s.invalid_of(c.variable) == &s.invalid[0]);
    const std::string m = s.invalid_message();
    CHECK(mentions(m, std::string(c.variable) + "='" + c.text + "'"));
    CHECK(mentions(m, "agx: "));
  }
  const ProcessSettings d = read({{"AGX_HIER_LEADERS", "0"}, {"AGX_CUDA_CHUNK_BYTES", "x"},
                                  {"AGX_MAX_MESSAGE_BYTES", "-3"}});
  CHECK(d.node.leaders == 1);
  CHECK(d.device.chunk_bytes == std::size_t{1} << 20);
  CHECK(d.core.max_message_bytes == CoreSettings::default_max_message_bytes);
}

TEST_CASE("one message names every invalid setting of every section; AGX_ALGO is left to the calls that read it") {
  const ProcessSettings s = read({{"AGX_TIMEOUT", "x"}, {"AGX_WAIT", "y"},
                                  {"AGX_CUDA_PATH", "z"}, {"AGX_COMPRESS", "w"},
                                  {"AGX_ALGO", "warp_drive"}});
  REQUIRE(s.invalid.size() == 5);
  const std::string m = s.invalid_message();
  for (const char* v : {"AGX_TIMEOUT='x'", "AGX_WAIT='y'", "AGX_CUDA_PATH='z'", "AGX_COMPRESS='w'"})
    CHECK(mentions(m, v));
  CHECK_FALSE(mentions(m, "AGX_ALGO"));
  const InvalidSetting* algo = s.invalid_of("AGX_ALGO");
  REQUIRE(algo != nullptr);
  CHECK(algo->text == "warp_drive");
  CHECK(mentions(algo->reason, "names no algorithm"));
  CHECK(s.core.algo_text == "warp_drive");
  CHECK_FALSE(s.core.forced.has_value());
  // The entries hier_context.cpp and device_path.cpp look up, and the defaults kept.
  REQUIRE(s.invalid_of("AGX_WAIT") != nullptr);
  CHECK(s.invalid_of("AGX_WAIT")->text == "y");
  REQUIRE(s.invalid_of("AGX_CUDA_PATH") != nullptr);
  CHECK(s.invalid_of("AGX_CUDA_PATH")->text == "z");
  CHECK(s.node.wait == NodeSettings::Wait::automatic);
  CHECK_FALSE(s.device.forced.has_value());
}

TEST_CASE("AGX_ALGO=auto and AGX_HIER_INTER=auto are valid and force nothing") {
  const ProcessSettings s = read({{"AGX_ALGO", "auto"}, {"AGX_HIER_INTER", "auto"}, {"AGX_CUDA_PATH", "auto"}});
  CHECK(s.invalid.empty());
  CHECK_FALSE(s.core.forced.has_value());
  CHECK_FALSE(s.node.inter.has_value());
  CHECK_FALSE(s.device.forced.has_value());
}
