// The server's tunnel module (the glue to proxy/tunnel): installs Server::tunnel_hook, which turns CONNECT requests,
// accepted Upgrades (101) and requests chosen for "pipe" into splice(2) tunnels hosted
// by the worker's own epoll loop. CONNECT is allowed only to configured destination
// ports and from configured client addresses; anything else gets 403 or 405 and an
// Error record. It must never block the worker (except for resolving a CONNECT host
// name, which only happens for names, not addresses) and never outlive the Server.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace ringproxy {
class Server;
struct TunnelHandoff;

namespace tunnel {

struct ProxyTunnelConfig {
  std::vector<unsigned> connect_ports{443};                       // --connect-port
  std::vector<std::string> connect_from{"127.0.0.0/8", "::1/128"};  // --connect-from
  bool splice = true;                                             // --tunnel-copy turns it off
  std::string pipe_size = "256k";                                 // --tunnel-pipe-size
  unsigned max_pipes = 256;                                       // --tunnel-pipes (per worker)
  std::vector<std::string> pipe_urls;                             // --pipe-url PREFIX
};

// Adds the module's options (each also a config-file key) to ringproxy's command line.
void add_options(CLI::App& app, ProxyTunnelConfig& c);
// Checks the configuration (throws ConfigError: exit 2) and sets srv.tunnel_hook (and
// srv.pipe_match when --pipe-url is given). Call before Server::start().
void install(Server& srv, const ProxyTunnelConfig& c);

}  // namespace tunnel
}  // namespace ringproxy
