// bench_tunnel: splice(2) tunnels against copying tunnels, in one run, on loopback.
// Prints throughput of 64 MiB transfers (1 and several concurrent streams), the p50/p99
// latency of 1 MiB payloads, and the tunnel thread's CPU time per GB (getrusage), then
// the ratios against its targets (splice >= 1.5x copy throughput, lower 1 MiB p50).
// A program, never a test: always exits 0.
// bench-link: ringlog_tunnel_harness
#include <sys/resource.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <sstream>

#include "bench_util.hpp"
#include "tunnel_harness.hpp"

using namespace ringproxy::tunnel;
using namespace ringproxy::tunnel::test;
using ringlog::bench::median;
using Sec = std::chrono::duration<double>;

namespace {

std::size_t env_num(const char* name, std::size_t def) {
  const char* v = std::getenv(name);
  return v && *v ? std::size_t(std::strtoull(v, nullptr, 10)) : def;
}

std::vector<std::size_t> env_list(const char* name, std::vector<std::size_t> def) {
  const char* v = std::getenv(name);
  if (!v || !*v) return def;
  std::vector<std::size_t> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(std::size_t(std::strtoull(item.c_str(), nullptr, 10)));
  return out.empty() ? def : out;
}

double thread_cpu_seconds(EpollLoop& loop) {
  double s = 0;
  loop.call([&] {
    rusage ru{};
    ::getrusage(RUSAGE_THREAD, &ru);
    s = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  });
  return s;
}

// Peers that cost as little as possible, so that the tunnel is what differs between the
// two modes: the sender vmsplices one static buffer into a pipe and splices it into its
// socket; the receiver splices its socket into a pipe and that into /dev/null.
const std::string& payload() {
  static const std::string p = pattern(1u << 20, 42);
  return p;
}

bool send_zero_copy(int sock, std::size_t total) {
  int p[2];
  if (::pipe(p) != 0) return false;
  ::fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
  const std::string& buf = payload();
  std::size_t sent = 0;
  bool ok = true;
  while (ok && sent < total) {
    std::size_t n = std::min(total - sent, buf.size());
    iovec iov{const_cast<char*>(buf.data()), n};
    ssize_t in = ::vmsplice(p[1], &iov, 1, 0);
    if (in <= 0) break;
    std::size_t left = std::size_t(in);
    while (left) {
      ssize_t out = ::splice(p[0], nullptr, sock, nullptr, left, SPLICE_F_MOVE);
      if (out <= 0) {
        ok = false;
        break;
      }
      left -= std::size_t(out);
    }
    sent += std::size_t(in);
  }
  ::close(p[0]);
  ::close(p[1]);
  ::shutdown(sock, SHUT_WR);
  return ok && sent == total;
}

std::size_t recv_discard(int sock) {
  int p[2];
  if (::pipe(p) != 0) return 0;
  ::fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
  int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  std::size_t got = 0;
  for (;;) {
    ssize_t in = ::splice(sock, nullptr, p[1], nullptr, 1 << 20, SPLICE_F_MOVE);
    if (in <= 0) break;
    got += std::size_t(in);
    std::size_t left = std::size_t(in);
    while (left) {
      ssize_t out = ::splice(p[0], nullptr, null, nullptr, left, SPLICE_F_MOVE);
      if (out <= 0) break;
      left -= std::size_t(out);
    }
  }
  ::close(null);
  ::close(p[0]);
  ::close(p[1]);
  return got;
}

struct Throughput {
  double mb_s = 0;        // MB/s (10^6), all streams together
  double cpu_s_per_gb = 0;  // tunnel thread CPU seconds per 10^9 bytes
  bool ok = true;
};

Throughput run_throughput(Mode mode, std::size_t streams, std::size_t bytes, std::size_t pipe_kb) {
  TunnelOptions o;
  o.splice = mode == Mode::splice;
  o.copy_buffer = pipe_kb * 1024;  // the same memory per direction in both modes
  EpollLoop loop({.pipe_size = pipe_kb * 1024, .max_pipes = 2 * streams, .max_idle = 2 * streams}, o);
  loop.start();
  std::vector<Wiring> ws;
  std::vector<std::size_t> ids;
  for (std::size_t i = 0; i < streams; ++i) {
    ws.push_back(Wiring::make());
    ids.push_back(loop.add(start_of(ws.back())));
  }
  ::shutdown(ws[0].backend_peer, SHUT_WR);  // one-way transfers; the other way ends at once
  for (std::size_t i = 1; i < streams; ++i) ::shutdown(ws[i].backend_peer, SHUT_WR);
  double cpu0 = thread_cpu_seconds(loop);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::future<bool>> senders;
  std::vector<std::future<std::size_t>> receivers;
  for (auto& w : ws) {
    senders.push_back(std::async(std::launch::async, [&w, bytes] { return send_zero_copy(w.client_peer, bytes); }));
    receivers.push_back(std::async(std::launch::async, [&w] { return recv_discard(w.backend_peer); }));
  }
  Throughput r;
  std::size_t total = 0;
  for (auto& f : senders) r.ok &= f.get();
  for (auto& f : receivers) total += f.get();
  double wall = Sec(std::chrono::steady_clock::now() - t0).count();
  for (auto id : ids) loop.wait(id, nullptr);
  double cpu = thread_cpu_seconds(loop) - cpu0;
  r.ok &= total == bytes * streams;
  r.mb_s = double(total) / wall / 1e6;
  r.cpu_s_per_gb = cpu / (double(total) / 1e9);
  for (auto& w : ws) {
    ::close(w.client_peer);
    ::close(w.backend_peer);
  }
  return r;
}

// 1 MiB from the client through the tunnel, one byte back: the time until the client
// has the acknowledgement. A splice tunnel and a copy tunnel (each on its own loop
// thread, as two workers would be) take turns payload by payload, the order swapped
// every time, so that both see the same machine load.
struct LatencyPeer {
  EpollLoop loop;
  Wiring w;
  std::size_t id = 0;
  std::future<bool> echo;
  LatencyPeer(Mode mode, std::size_t pipe_kb, std::size_t iters)
      : loop({.pipe_size = pipe_kb * 1024, .max_pipes = 2, .max_idle = 2}, [&] {
          TunnelOptions o;
          o.splice = mode == Mode::splice;
          o.copy_buffer = pipe_kb * 1024;
          return o;
        }()) {
    loop.start();
    w = Wiring::make();
    id = loop.add(start_of(w));
    echo = std::async(std::launch::async, [this, iters] {
      std::string in(payload().size(), '\0');
      for (std::size_t i = 0; i < iters; ++i) {
        if (::recv(w.backend_peer, in.data(), in.size(), MSG_WAITALL) != ssize_t(in.size())) return false;
        if (::send(w.backend_peer, "k", 1, MSG_NOSIGNAL) != 1) return false;
      }
      return true;
    });
  }
  double one() {
    const std::string& buf = payload();
    auto t0 = std::chrono::steady_clock::now();
    if (!write_all(w.client_peer, buf.data(), buf.size())) return -1;
    char k;
    if (::recv(w.client_peer, &k, 1, MSG_WAITALL) != 1) return -1;
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  bool finish() {
    bool ok = echo.get();
    ::shutdown(w.client_peer, SHUT_WR);
    ::shutdown(w.backend_peer, SHUT_WR);
    loop.wait(id, nullptr);
    ::close(w.client_peer);
    ::close(w.backend_peer);
    return ok;
  }
};

// Returns {splice us, copy us} per payload.
std::pair<std::vector<double>, std::vector<double>> run_latency(std::size_t iters, std::size_t pipe_kb) {
  LatencyPeer sp(Mode::splice, pipe_kb, iters), cp(Mode::copy, pipe_kb, iters);
  std::vector<double> s, c;
  for (std::size_t i = 0; i < iters; ++i) {
    if (i % 2) {
      s.push_back(sp.one());
      c.push_back(cp.one());
    } else {
      c.push_back(cp.one());
      s.push_back(sp.one());
    }
  }
  bool ok = sp.finish() & cp.finish();
  if (!ok) s.clear();
  return {s, c};
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, std::size_t(q * double(v.size())))];
}

}  // namespace

int main() {
  const std::size_t mib = env_num("RINGLOG_BENCH_TUNNEL_MB", 64);
  const std::vector<std::size_t> streams = env_list("RINGLOG_BENCH_TUNNEL_STREAMS", {1, 4});
  const std::size_t rounds = env_num("RINGLOG_BENCH_TUNNEL_ROUNDS", 3);
  const std::size_t lat_iters = env_num("RINGLOG_BENCH_TUNNEL_LAT_ITERS", 200);
  const std::size_t pipe_kb = env_num("RINGLOG_BENCH_TUNNEL_PIPE_KB", 256);
  std::printf("bench_tunnel: %zu MiB per stream, streams %s, %zu rounds (medians), pipe %zu KiB, "
              "%zu x 1 MiB for latency\n",
              mib, [&] {
                std::string s;
                for (auto n : streams) s += (s.empty() ? "" : ",") + std::to_string(n);
                return s;
              }().c_str(), rounds, pipe_kb, lat_iters);

  // Modes alternate inside each round so both see the same machine load.
  std::map<std::pair<int, std::size_t>, std::vector<double>> mbs, cpu;
  std::map<int, std::vector<double>> p50, p99;
  bool all_ok = true;
  for (std::size_t r = 0; r < rounds; ++r) {
    for (std::size_t n : streams)
      for (Mode m : {Mode::splice, Mode::copy}) {
        Throughput t = run_throughput(m, n, mib << 20, pipe_kb);
        all_ok &= t.ok;
        mbs[{int(m), n}].push_back(t.mb_s);
        cpu[{int(m), n}].push_back(t.cpu_s_per_gb);
        std::printf("  round %zu %-6s streams %zu: %8.1f MB/s, tunnel CPU %.3f s/GB%s\n", r + 1,
                    std::string(to_string(m)).c_str(), n, t.mb_s, t.cpu_s_per_gb, t.ok ? "" : " (INCOMPLETE)");
      }
    auto [sus, cus] = run_latency(lat_iters, pipe_kb);
    all_ok &= sus.size() == lat_iters;
    p50[int(Mode::splice)].push_back(quantile(sus, 0.5));
    p99[int(Mode::splice)].push_back(quantile(sus, 0.99));
    p50[int(Mode::copy)].push_back(quantile(cus, 0.5));
    p99[int(Mode::copy)].push_back(quantile(cus, 0.99));
    std::printf("  round %zu 1 MiB latency (interleaved): splice p50 %.0f us p99 %.0f us, copy p50 %.0f us p99 %.0f us\n",
                r + 1, quantile(sus, 0.5), quantile(sus, 0.99), quantile(cus, 0.5), quantile(cus, 0.99));
  }

  std::printf("\nresults (medians of %zu rounds)\n", rounds);
  std::printf("%-8s %-7s %12s %14s\n", "streams", "mode", "MB/s", "CPU s/GB");
  for (std::size_t n : streams)
    for (Mode m : {Mode::splice, Mode::copy})
      std::printf("%-8zu %-7s %12.1f %14.3f\n", n, std::string(to_string(m)).c_str(), median(mbs[{int(m), n}]),
                  median(cpu[{int(m), n}]));
  double s50 = median(p50[int(Mode::splice)]), c50 = median(p50[int(Mode::copy)]);
  std::printf("1 MiB latency: splice p50 %.0f us p99 %.0f us; copy p50 %.0f us p99 %.0f us\n", s50,
              median(p99[int(Mode::splice)]), c50, median(p99[int(Mode::copy)]));

  std::printf("\nratios, splice vs copy (targets)\n");
  for (std::size_t n : streams) {
    double ratio = median(mbs[{int(Mode::splice), n}]) / std::max(1e-9, median(mbs[{int(Mode::copy), n}]));
    double cpur = median(cpu[{int(Mode::splice), n}]) / std::max(1e-9, median(cpu[{int(Mode::copy), n}]));
    std::printf("throughput splice/copy, %zu stream(s): %.2fx (target >= 1.5x) %s; tunnel CPU/GB splice/copy %.2f\n", n,
                ratio, ratio >= 1.5 ? "PASS" : "FAIL", cpur);
  }
  double lr = s50 / std::max(1e-9, c50);
  std::printf("p50 latency 1 MiB splice/copy: %.2f (target < 1.0, ATS: 0.6) %s\n", lr, lr < 1.0 ? "PASS" : "FAIL");
  if (!all_ok) std::printf("WARNING: some transfers were incomplete\n");
  return 0;
}
