// ringproxy's start-up configuration (addresses, backends, threads, instance) and the
// address helpers shared by the listener, the backends and the trusted-address check.
// Parsing errors throw ConfigError with a message meant for the operator (exit 2).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ringproxy {

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  const sockaddr* sa() const noexcept { return reinterpret_cast<const sockaddr*>(&ss); }
  int family() const noexcept { return ss.ss_family; }
  std::string ip() const;      // "127.0.0.1", "::1"
  std::uint16_t port() const noexcept;
  std::string str() const;     // "127.0.0.1:8080", "[::1]:8080"
  bool loopback() const noexcept;  // 127.0.0.0/8, ::1, ::ffff:127.0.0.0/104
};

// "host:port", "[v6]:port"; host may be a name (resolved once, now). Throws ConfigError.
SockAddr parse_hostport(const std::string& s, bool allow_port0 = false);
SockAddr sockaddr_of_fd(int fd, bool peer);

// An address range: "127.0.0.1", "10.0.0.0/8", "::1/128".
struct Cidr {
  int family = 0;
  std::uint8_t addr[16]{};
  unsigned bits = 0;
  bool contains(const SockAddr& a) const noexcept;
};
Cidr parse_cidr(const std::string& s);

struct BackendSpec {
  std::string name;  // [A-Za-z0-9_:-]: a stats ident ("VBE.<name>.*")
  SockAddr addr;
  std::string spec;  // as given
};
// "[name=]host:port"; the name defaults to "host_port" made safe.
BackendSpec parse_backend(const std::string& s);

// A byte size (--ring-size, --storage, --pass-window, --tunnel-pipe-size): the rule
// every ringlog program reads sizes by (ringlog::tool::parse_size, Varnish's
// VNUM_2bytes: "64M", "1.5k", "4 KB", "512b"). Throws ConfigError "bad size 'S'".
std::uint64_t parse_size(std::string_view s);

struct Config {
  std::vector<SockAddr> listen;          // one SO_REUSEPORT listener per worker for each
  std::vector<BackendSpec> backends;     // empty: the built-in demo origin
  unsigned threads = 0;                  // 0: number of cores
  std::string instance = "default";      // ringlog instance (ring + stats)
  std::string admin_socket;              // "" : <instance dir>/admin.sock
  std::uint64_t ring_size = 64u << 20;
  std::vector<Cidr> trusted;             // may ask for per-request tracing
  std::string trace_header = "X-Ringlog-Trace";
  std::string via = "ringproxy";
  std::string health_path = "/";
  std::string mask;                      // initial tag mask ("" keeps the ring's)
  bool trace = false;                    // global tracing at start
  // The cache (ringproxy_cache) and the delivery transport (ringproxy_delivery).
  bool cache = true;                     // off: every request is a pass
  std::uint64_t storage = 256u << 20;    // cache memory cap; LRU eviction beyond
  std::uint64_t pass_window = 4u << 20;  // bytes a pass object holds at most
  double default_ttl = 120, default_grace = 10;
  std::string transport = "writev";      // writev | io_uring (falls back to writev)
  bool crc32 = false;                    // a CRC32 filter in every delivery (tests, benchmarks)
};

}  // namespace ringproxy
