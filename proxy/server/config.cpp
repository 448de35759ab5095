// Address parsing for ringproxy's configuration (see config.hpp).
#include "config.hpp"

#include <arpa/inet.h>
#include <netdb.h>

#include <cctype>
#include <cstring>

#include "values.hpp"

namespace ringproxy {

std::string SockAddr::ip() const {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
  else if (family() == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof buf);
  return buf;
}

std::uint16_t SockAddr::port() const noexcept {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

bool SockAddr::loopback() const noexcept {
  if (family() == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr) >> 24) == 127;
  if (family() == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
  }
  return false;
}

std::string SockAddr::str() const {
  if (family() == AF_INET6) return "[" + ip() + "]:" + std::to_string(port());
  return ip() + ":" + std::to_string(port());
}

SockAddr sockaddr_of_fd(int fd, bool peer) {
  SockAddr a;
  a.len = sizeof a.ss;
  int r = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a.ss), &a.len)
               : getsockname(fd, reinterpret_cast<sockaddr*>(&a.ss), &a.len);
  if (r != 0) a.len = 0;
  return a;
}

SockAddr parse_hostport(const std::string& s, bool allow_port0) {
  std::string host, port;
  if (!s.empty() && s[0] == '[') {
    auto close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':')
      throw ConfigError("bad address '" + s + "': expected [v6addr]:port");
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else {
    auto colon = s.rfind(':');
    if (colon == std::string::npos) throw ConfigError("bad address '" + s + "': expected host:port");
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
    if (host.find(':') != std::string::npos) throw ConfigError("bad address '" + s + "': write IPv6 as [addr]:port");
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) > 65535)
    throw ConfigError("bad port in '" + s + "'");
  if (!allow_port0 && std::stoul(port) == 0) throw ConfigError("bad port in '" + s + "': 0 is not allowed");
  if (host.empty()) host = "0.0.0.0";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || !res) throw ConfigError("bad address '" + s + "': " + gai_strerror(rc));
  SockAddr a;
  std::memcpy(&a.ss, res->ai_addr, res->ai_addrlen);
  a.len = res->ai_addrlen;
  freeaddrinfo(res);
  return a;
}

Cidr parse_cidr(const std::string& s) {
  Cidr c;
  std::string addr = s;
  int bits = -1;
  auto slash = s.find('/');
  if (slash != std::string::npos) {
    addr = s.substr(0, slash);
    std::string b = s.substr(slash + 1);
    if (b.empty() || b.size() > 3 || b.find_first_not_of("0123456789") != std::string::npos)
      throw ConfigError("bad address range '" + s + "'");
    bits = std::stoi(b);
  }
  if (inet_pton(AF_INET, addr.c_str(), c.addr) == 1) {
    c.family = AF_INET;
    if (bits < 0) bits = 32;
    if (bits > 32) throw ConfigError("bad prefix length in '" + s + "'");
  } else if (inet_pton(AF_INET6, addr.c_str(), c.addr) == 1) {
    c.family = AF_INET6;
    if (bits < 0) bits = 128;
    if (bits > 128) throw ConfigError("bad prefix length in '" + s + "'");
  } else {
    throw ConfigError("bad address range '" + s + "': expected an IP address, optionally /bits");
  }
  c.bits = unsigned(bits);
  return c;
}

bool Cidr::contains(const SockAddr& a) const noexcept {
  const std::uint8_t* p = nullptr;
  std::uint8_t mapped[16];
  if (a.family() == AF_INET && family == AF_INET) {
    p = reinterpret_cast<const std::uint8_t*>(&reinterpret_cast<const sockaddr_in*>(&a.ss)->sin_addr);
  } else if (a.family() == AF_INET6) {
    const auto* v6 = reinterpret_cast<const std::uint8_t*>(&reinterpret_cast<const sockaddr_in6*>(&a.ss)->sin6_addr);
    if (family == AF_INET6) {
      p = v6;
    } else {
      static const std::uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
      if (std::memcmp(v6, prefix, 12) != 0) return false;
      std::memcpy(mapped, v6 + 12, 4);
      p = mapped;
    }
  } else {
    return false;
  }
  unsigned full = bits / 8, rest = bits % 8;
  if (std::memcmp(p, addr, full) != 0) return false;
  if (rest == 0) return true;
  std::uint8_t m = std::uint8_t(0xff << (8 - rest));
  return (p[full] & m) == (addr[full] & m);
}

BackendSpec parse_backend(const std::string& s) {
  BackendSpec b;
  b.spec = s;
  std::string hp = s;
  auto eq = s.find('=');
  if (eq != std::string::npos) {
    b.name = s.substr(0, eq);
    hp = s.substr(eq + 1);
    if (b.name.empty() || b.name.size() > 47 ||
        b.name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_:-") != std::string::npos)
      throw ConfigError("bad backend name in '" + s + "': use [A-Za-z0-9_:-], at most 47 characters");
  }
  b.addr = parse_hostport(hp);
  if (b.name.empty()) {
    for (char c : hp) b.name += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '_';
    if (b.name.size() > 47) b.name.resize(47);
  }
  return b;
}

std::uint64_t parse_size(std::string_view s) {
  std::optional<std::uint64_t> v = ringlog::tool::parse_size(s);
  if (!v) throw ConfigError("bad size '" + std::string(s) + "'");
  return *v;
}

}  // namespace ringproxy
