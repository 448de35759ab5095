// ringproxy: the instrumented HTTP/1.1 reverse proxy. Logs every session, request and
// backend fetch into a ringlog ring, counts into a stats file, traces on demand.
// `ringproxy adm CMD` talks to a running one through its admin socket.
//
// Exit codes (the shared set of program.hpp, documented in ringproxy(8)):
//   0 clean shutdown (SIGTERM/SIGINT), or adm command done
//   1 run-time failure (ring or stats file cannot be created), or adm command refused
//   2 bad command line or configuration: unknown option or key, bad address, port in use
//   3 adm: no ringproxy answers on the admin socket
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "ringlog_cli11.hpp"

#include "admin.hpp"
#include "config.hpp"
#include "program.hpp"
#include "params.hpp"
#include "tunnels.hpp"
#include "server.hpp"

namespace {

using ringlog::tool::kExitFailure;
using ringlog::tool::kExitOk;
using ringlog::tool::kExitUsage;

}  // namespace

int main(int argc, char** argv) {
  ringlog::tool::Cli cli("ringproxy", "ringproxy - instrumented HTTP/1.1 reverse proxy logging into a ringlog ring");
  CLI::App& app = cli.app();
  app.set_config("--config", "", "Read options from this file (TOML/INI: key = value; every option may be set there)");
  app.allow_config_extras(false);
  cli.footer("Parameters (also: ringproxy adm param.set NAME VALUE) are listed by ringproxy adm param.show.",
             {{kExitOk, "ok"},
              {kExitFailure, "run-time failure or adm command refused"},
              {kExitUsage, "bad command line or configuration"},
              {ringlog::tool::kExitUnusable, "adm: no ringproxy answers on the admin socket"}});

  std::vector<std::string> listen{"127.0.0.1:8080"}, backends, trusted;
  ringproxy::Config cfg;
  std::string ring_size = "64M";
  unsigned threads = 0;
  app.add_option("-a,--listen", listen, "Address to listen on, host:port (repeatable; default 127.0.0.1:8080)");
  app.add_option("-b,--backend", backends,
                 "Origin server, [name=]host:port (repeatable, round-robin); none: the built-in demo origin");
  app.add_option("-t,--threads", threads, "Worker threads (0: one per core)");
  app.add_option("-n,--instance", cfg.instance, "ringlog instance: ring and stats in $RINGLOG_DIR/NAME");
  app.add_option("--admin-socket", cfg.admin_socket, "Admin socket path (default <instance dir>/admin.sock)");
  app.add_option("--ring-size", ring_size, "Size of the ring's message area (a size as ringlog(7) VALUES says: 64M, 1.5G)");
  app.add_option("--trusted", trusted, "Address or CIDR allowed to ask for per-request tracing (repeatable)");
  app.add_option("--trace-header", cfg.trace_header, "Request header that turns tracing on for one request");
  app.add_option("--via", cfg.via, "Pseudonym in the Via header");
  app.add_option("--health-path", cfg.health_path, "URL path of the health probe (HEAD)");
  app.add_option("--mask", cfg.mask, "Initial tag mask (vsl_mask syntax: default, all, none, +Tag,-Tag...)");
  app.add_flag("--trace", cfg.trace, "Start with tracing on for every request");
  std::string cache_onoff = "on", storage = "256M", pass_window = "4M";
  app.add_option("--cache", cache_onoff, "Cache GET/HEAD responses: on or off (off: every request is a pass)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--storage", storage, "Cache memory cap (a size: 256M); least recently used objects go beyond it");
  app.add_option("--default-ttl", cfg.default_ttl, "TTL of a response without s-maxage, max-age or Expires (seconds)")
      ->check(CLI::Range(0.0, 31536000.0));
  app.add_option("--default-grace", cfg.default_grace, "How long an expired object may still be served while one fetch refreshes it (seconds)")
      ->check(CLI::Range(0.0, 31536000.0));
  app.add_option("--transport", cfg.transport, "How responses from the cache are sent: writev or io_uring (io_uring falls back to writev where the kernel refuses it)")
      ->check(CLI::IsMember({"writev", "io_uring"}));
  app.add_option("--pass-window", pass_window, "Memory a pass (or hit-for-pass) response may hold between backend and client (a size: 4M); the backend is read no further ahead");
  app.add_flag("--crc32", cfg.crc32, "Pass every response from the cache or a pass through a CRC32 filter and log the sum (Debug record): for tests and benchmarks");
  ringproxy::tunnel::ProxyTunnelConfig tunnels;
  ringproxy::tunnel::add_options(app, tunnels);
  // Parameters given at start are read as adm param.set reads them (sizes, ms/s).
  std::vector<std::string> pvals(ringproxy::kParamCount);
  std::vector<CLI::Option*> popts(ringproxy::kParamCount, nullptr);
  for (unsigned i = 0; i < ringproxy::kParamCount; ++i) {
    const auto& d = ringproxy::kParamDefs[i];
    char desc[400];
    std::snprintf(desc, sizeof desc, "%s (%s, default %g)", d.description, ringproxy::unit_name(d.unit), d.def);
    popts[i] = app.add_option(std::string("--") + d.name, pvals[i], desc);
  }

  std::vector<std::string> adm_words;
  CLI::App* adm = app.add_subcommand("adm", "Send a command to a running ringproxy (ping, param.show, param.set, "
                                            "backend.list, backend.health, stats, purge, purge.regex, cache.info, help)");
  adm->prefix_command();

  if (auto rc = cli.parse(argc, argv)) return *rc;
  if (adm->parsed()) {
    std::string sock = cfg.admin_socket.empty() ? ringlog::instance_dir(cfg.instance) + "/admin.sock" : cfg.admin_socket;
    adm_words = adm->remaining();
    if (adm_words.empty()) {
      std::cerr << "ringproxy adm: no command given (try: ringproxy adm help)\n";
      return kExitUsage;
    }
    return ringproxy::admin_client(sock, adm_words);
  }

  std::unique_ptr<ringproxy::Server> srv;
  try {
    for (const auto& a : listen) cfg.listen.push_back(ringproxy::parse_hostport(a));
    for (const auto& b : backends) cfg.backends.push_back(ringproxy::parse_backend(b));
    for (std::size_t i = 0; i < cfg.backends.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (cfg.backends[i].name == cfg.backends[j].name)
          throw ringproxy::ConfigError("two backends are named '" + cfg.backends[i].name + "'");
    for (const auto& t : trusted) cfg.trusted.push_back(ringproxy::parse_cidr(t));
    cfg.ring_size = ringproxy::parse_size(ring_size);
    cfg.cache = cache_onoff == "on";
    cfg.storage = ringproxy::parse_size(storage);
    if (cfg.storage < (1u << 20)) throw ringproxy::ConfigError("--storage must be at least 1M");
    cfg.pass_window = ringproxy::parse_size(pass_window);
    if (cfg.pass_window < (64u << 10) || cfg.pass_window > (1u << 30))
      throw ringproxy::ConfigError("--pass-window must be between 64k and 1G");
    if (cfg.ring_size < 65536) throw ringproxy::ConfigError("--ring-size must be at least 64k");
    if (threads > 256) throw ringproxy::ConfigError("--threads must be at most 256");
    cfg.threads = threads;
    if (cfg.instance.empty() || cfg.instance.find('/') != std::string::npos)
      throw ringproxy::ConfigError("bad instance name '" + cfg.instance + "'");
    if (cfg.health_path.empty() || cfg.health_path[0] != '/')
      throw ringproxy::ConfigError("--health-path must start with /");
    srv = std::make_unique<ringproxy::Server>(cfg);
    ringproxy::tunnel::install(*srv, tunnels);
    for (unsigned i = 0; i < ringproxy::kParamCount; ++i) {
      if (popts[i]->count() == 0) continue;
      std::string err = srv->params().set(ringproxy::kParamDefs[i].name, pvals[i]);
      if (!err.empty()) throw ringproxy::ConfigError(err);
    }
  } catch (const ringproxy::ConfigError& e) {
    std::cerr << "ringproxy: error: " << e.what() << "\n";
    return kExitUsage;
  }

  // Signals: the main thread waits for them; workers never see them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  try {
    srv->start();
  } catch (const ringproxy::ConfigError& e) {
    std::cerr << "ringproxy: error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "ringproxy: cannot start: " << e.what() << "\n";
    return kExitFailure;
  }
  std::fprintf(stderr, "ringproxy: listening on");
  for (const auto& a : cfg.listen) std::fprintf(stderr, " %s", a.str().c_str());
  std::fprintf(stderr, ", %s, instance %s\n",
               cfg.backends.empty() ? "demo origin" : (std::to_string(cfg.backends.size()) + " backend(s)").c_str(),
               cfg.instance.c_str());

  int sig = 0;
  sigwait(&set, &sig);
  std::fprintf(stderr, "ringproxy: %s: finishing in-flight requests (up to %g s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
               srv->params().get(ringproxy::shutdown_grace));
  srv->stop();
  srv.reset();
  return kExitOk;
}
