// ringlog-stat --listen: serves the counters of one or more instances at GET /metrics in
// the Prometheus text format, for a Prometheus server to scrape. It follows instances
// that are recreated (a restarted writer) and reports absent ones as down; a slow or
// silent client must never hold up another scrape, nor the instances' writers.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ringlog/stats.hpp"
#include "ringlog/stats_output.hpp"

namespace ringlog::stat_tool {

// ADDR:PORT of --listen: "127.0.0.1:9123", "[::1]:9123", "host:9123", ":9123" (every
// IPv4 address). Port 0 lets the system pick one.
struct ListenAddress {
  std::string host;
  int port = 0;
};
// nullopt when malformed.
std::optional<ListenAddress> parse_listen(std::string_view s);

// The instances of one exposition, each opened again when its files were recreated
// (the inode of its stats or ring file changed) and read as down while absent or
// unreadable. Thread-safe: scrapes from several connections take turns inside.
class InstanceSet {
 public:
  // args: the -n arguments ("" is the default instance); they name the instances in
  // the label ringlog_instance.
  explicit InstanceSet(std::vector<std::string> args);

  // The exposition of every instance now (format_prometheus). State changes (down,
  // up again, reopened) are told on stderr once each.
  std::string scrape(const stats::Filter& f);

  // The ringlog_instance label of an -n argument.
  static std::string label_of(const std::string& arg);

 private:
  struct Entry {
    std::string arg, label;
    std::optional<stats::InstanceReader> reader;
    std::string state;  // last said on stderr: "up", or why it is down; "" at first
  };
  // state: "up" or why it is down; said on stderr when it changes, or with a note.
  void tell(Entry& e, const std::string& state, const std::string& note);

  std::mutex mu_;
  std::vector<Entry> entries_;  // guarded by mu_
};

struct ListenOptions {
  ListenAddress address;
  std::string listen_arg;               // as given, for messages
  std::vector<std::string> instances;   // -n arguments
  std::vector<std::string> globs;       // -f
};

// Serves until SIGTERM or SIGINT; returns the exit code (0 after a signal, 1 when the
// address cannot be bound or the server fails).
int run_exporter(const ListenOptions& opts);

}  // namespace ringlog::stat_tool
