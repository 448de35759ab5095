// A writer for the ringlog-ncsa and ringlog-top tests: logs known sessions, requests
// and fetches through Log/Txn, with fixed timestamps, so tool outputs can be compared
// with golden files. Modes:
//   --ring PATH --fixed [--repeat N]   create the ring, write the fixed set N times, exit
//   --ring PATH --append --fixed       open the existing ring and add the set once more
//   --ring PATH --live [--rate R]      create the ring and keep writing requests (R per
//                                      second, real time) until SIGTERM/SIGINT
// --area-mb MB sizes the ring (default 4). --ready FILE is written once the ring
// exists. --logfile FILE (with --fixed) also copies every message of the ring into a
// ringlog binary log file (for -r).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "ringlog/log.hpp"
#include "ringlog/logfile.hpp"
#include "ringlog/ring.hpp"

using namespace ringlog;

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

void usage() {
  std::fprintf(stderr,
               "usage: ncsa_test_writer --ring PATH (--fixed [--repeat N] [--append] [--logfile FILE] | "
               "--live [--rate R]) [--area-mb MB] [--ready FILE]\n");
  std::exit(2);
}

constexpr std::uint64_t kT0 = 1795990488ULL * 1'000'000'000ULL;  // 2026-11-29 22:14:48 UTC

std::uint64_t at(std::uint64_t base, double seconds) {
  return base + static_cast<std::uint64_t>(seconds * 1e9 + 0.5);
}

struct Resp {
  const char* status;
  const char* reason;
  const char* type;
  const char* length;
};

void respond(Txn& req, const Resp& r, std::uint64_t t, const char* acct) {
  req.record(Tag::RespProtocol, "HTTP/1.1");
  req.record(Tag::RespStatus, r.status);
  req.record(Tag::RespReason, r.reason);
  if (r.type) req.recordf(Tag::RespHeader, "Content-Type: %s", r.type);
  req.recordf(Tag::RespHeader, "Content-Length: %s", r.length);
  req.timestamp("Process", at(t, 0.000300));
  req.timestamp("Resp", at(t, 0.000900));
  req.record(Tag::ReqAcct, acct);
}

void fetch(Txn& req, const char* reason, const char* url, const char* status, const char* length,
           std::uint64_t t) {
  Txn be = req.child(TxnType::bereq, reason);
  be.timestamp("Start", at(t, 0.000150));
  be.record(Tag::BereqMethod, "GET");
  be.record(Tag::BereqURL, url);
  be.record(Tag::BereqProtocol, "HTTP/1.1");
  be.record(Tag::BereqHeader, "Host: origin.internal");
  be.record(Tag::BereqHeader, "X-Forwarded-For: 192.0.2.10");
  be.record(Tag::BackendOpen, "17 web1 198.51.100.7 8080 127.0.0.1 40000 connect");
  be.timestamp("Bereq", at(t, 0.000180));
  be.timestamp("Beresp", at(t, 0.000700));
  be.record(Tag::BerespProtocol, "HTTP/1.1");
  be.record(Tag::BerespStatus, status);
  be.record(Tag::BerespReason, "OK");
  be.recordf(Tag::BerespHeader, "Content-Length: %s", length);
  be.timestamp("BerespBody", at(t, 0.001500));
  be.recordf(Tag::BereqAcct, "120 0 120 200 %s %d", length, 200 + std::atoi(length));
  be.end();
}

void request_start(Txn& req, std::uint64_t t, const char* client, const char* method, const char* url) {
  req.timestamp("Start", t);
  req.timestamp("Req", t);
  req.record(Tag::ReqStart, client);
  req.record(Tag::ReqMethod, method);
  req.record(Tag::ReqURL, url);
  req.record(Tag::ReqProtocol, "HTTP/1.1");
}

// The fixed set: two sessions, six requests, two fetches (see the golden files).
void write_fixed(Log& log, std::uint64_t base) {
  {
    Txn sess = log.begin(TxnType::sess, "HTTP/1");
    sess.timestamp("Start", base);
    sess.record(Tag::SessOpen, "192.0.2.10 51234 a0 127.0.0.1 8080 1795990488.000000 17");
    {
      // A cache hit.
      std::uint64_t t = at(base, 0.000100);
      Txn req = sess.child(TxnType::req, "rxreq");
      request_start(req, t, "192.0.2.10 51234 a0", "GET", "/index.html");
      req.record(Tag::ReqHeader, "Host: www.example.com");
      req.record(Tag::ReqHeader, "User-Agent: curl/7.88.1");
      req.record(Tag::ReqHeader, "Referer: http://www.example.com/");
      req.record(Tag::Hit, "1 120.000 10.000 0.000");
      respond(req, {"200", "OK", "text/html", "512"}, t, "78 0 78 210 512 722");
    }
    {
      // A miss with its fetch.
      std::uint64_t t = at(base, 1.250000);
      Txn req = sess.child(TxnType::req, "rxreq");
      request_start(req, t, "192.0.2.10 51234 a0", "GET", "/img.png?v=2");
      req.record(Tag::ReqHeader, "Host: www.example.com");
      req.record(Tag::ReqHeader, "User-Agent: Mozilla/5.0 (X11; Linux x86_64)");
      req.record(Tag::ReqHeader, "Referer: http://www.example.com/index.html");
      fetch(req, "fetch", "/img.png?v=2", "200", "20480", t);
      req.timestamp("Fetch", at(t, 0.001600));
      respond(req, {"200", "OK", "image/png", "20480"}, t, "96 0 96 215 20480 20695");
    }
    {
      // A pass with basic authentication and a request body.
      std::uint64_t t = at(base, 2.500000);
      Txn req = sess.child(TxnType::req, "rxreq");
      request_start(req, t, "192.0.2.10 51234 a0", "POST", "/api/login");
      req.record(Tag::ReqHeader, "Host: www.example.com");
      req.record(Tag::ReqHeader, "User-Agent: curl/7.88.1");
      req.record(Tag::ReqHeader, "Authorization: Basic YWxpY2U6c2VjcmV0");
      req.record(Tag::HitPass, "5 60.000");
      fetch(req, "pass", "/api/login", "201", "17", t);
      respond(req, {"201", "Created", "application/json", "17"}, t, "150 42 192 230 17 247");
    }
    sess.record(Tag::SessClose, "REM_CLOSE 3.000");
  }
  {
    Txn sess = log.begin(TxnType::sess, "HTTP/1");
    sess.timestamp("Start", at(base, 3.0));
    sess.record(Tag::SessOpen, "2001:db8::7 40404 a0 127.0.0.1 8080 1795990491.000000 18");
    {
      // A malformed request answered locally (synth), no Host.
      std::uint64_t t = at(base, 3.000100);
      Txn req = sess.child(TxnType::req, "rxreq");
      request_start(req, t, "2001:db8::7 40404 a0", "GET", "/../etc/passwd");
      req.record(Tag::Error, "bad request: path escapes the root");
      respond(req, {"400", "Bad Request", nullptr, "0"}, t, "40 0 40 90 0 90");
    }
    {
      // Hostile bytes: a quote, control and NUL bytes, UTF-8 and a stray 0xff byte.
      std::uint64_t t = at(base, 3.500000);
      Txn req = sess.child(TxnType::req, "rxreq");
      request_start(req, t, "2001:db8::7 40404 a0", "GET", "/caf\xc3\xa9?q=\"x\"");
      req.record(Tag::ReqHeader, "Host: www.example.com");
      req.record(Tag::ReqHeader, std::string_view("User-Agent: evil\"agent\x01\x00\xff", 25));
      req.record(Tag::ReqHeader, "If-None-Match: \"abc\"");
      req.record(Tag::Hit, "1 120.000 10.000 0.000");
      respond(req, {"304", "Not Modified", nullptr, "0"}, t, "120 0 120 150 0 150");
    }
    {
      // VCL-style edits: the Referer removed, the User-Agent replaced, a response
      // header changed.
      std::uint64_t t = at(base, 4.000000);
      Txn req = sess.child(TxnType::req, "rxreq");
      request_start(req, t, "2001:db8::7 40404 a0", "HEAD", "/");
      req.record(Tag::ReqHeader, "Host: www.example.com");
      req.record(Tag::ReqHeader, "Referer: http://tracker.example/");
      req.record(Tag::ReqHeader, "User-Agent: Bot/1.0");
      req.record(Tag::ReqUnset, "Referer: http://tracker.example/");
      req.record(Tag::ReqUnset, "User-Agent: Bot/1.0");
      req.record(Tag::ReqHeader, "User-Agent: normalized-bot");
      req.record(Tag::Hit, "1 120.000 10.000 0.000");
      respond(req, {"200", "OK", "text/html", "512"}, t, "60 0 60 200 0 200");
      req.record(Tag::RespUnset, "Content-Type: text/html");
      req.record(Tag::RespHeader, "Content-Type: text/html; charset=utf-8");
    }
    sess.record(Tag::SessClose, "REM_CLOSE 1.500");
  }
}

// One live request (real time), cycling through a few URLs and statuses.
void write_live(Log& log, unsigned i) {
  static const char* urls[] = {"/", "/index.html", "/img.png", "/api/items", "/index.html", "/"};
  static const char* statuses[] = {"200", "200", "200", "404", "200", "304"};
  Txn req = log.begin(TxnType::req, "rxreq");
  req.timestamp("Start");
  req.record(Tag::ReqStart, "192.0.2.20 50000 a0");
  req.record(Tag::ReqMethod, "GET");
  req.record(Tag::ReqURL, urls[i % 6]);
  req.record(Tag::ReqProtocol, "HTTP/1.1");
  req.record(Tag::ReqHeader, "Host: live.example");
  req.recordf(Tag::ReqHeader, "X-Seq: %u", i);
  req.record(Tag::RespProtocol, "HTTP/1.1");
  req.record(Tag::RespStatus, statuses[i % 6]);
  req.timestamp("Process");
  req.timestamp("Resp");
  req.record(Tag::ReqAcct, "50 0 50 100 10 110");
}

}  // namespace

int main(int argc, char** argv) {
  std::string ring, ready, logfile;
  bool fixed = false, live = false, append = false;
  int repeat = 1;
  unsigned area_mb = 4;
  double rate = 20;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (a == "--ring") ring = next();
    else if (a == "--ready") ready = next();
    else if (a == "--logfile") logfile = next();
    else if (a == "--fixed") fixed = true;
    else if (a == "--live") live = true;
    else if (a == "--append") append = true;
    else if (a == "--repeat") repeat = std::atoi(next().c_str());
    else if (a == "--rate") rate = std::atof(next().c_str());
    else if (a == "--area-mb") area_mb = unsigned(std::atoi(next().c_str()));
    else usage();
  }
  if (ring.empty() || fixed == live || repeat < 1 || !(rate > 0) || area_mb < 1 || area_mb > 1024) usage();
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);

  Log log = append ? Log::open(ring) : Log::create(ring, {.area_size = std::uint64_t{area_mb} << 20});
  if (!ready.empty()) std::ofstream(ready) << ::getpid() << "\n";
  if (fixed) {
    for (int r = 0; r < repeat; ++r) write_fixed(log, at(kT0, 10.0 * r));
    if (!logfile.empty()) {
      Reader rd = Reader::open(ring, {.kind = ReaderKind::passive, .start = StartAt::oldest});
      LogFileWriter w = LogFileWriter::open(logfile);
      std::vector<std::byte> buf;
      for (;;) {
        ReadResult r = rd.next(buf);
        if (r.status == ReadStatus::empty) break;
        if (r.status == ReadStatus::message) w.write(buf, r.kind);
      }
      w.flush();
    }
    return 0;
  }
  auto period = std::chrono::duration<double>(1.0 / rate);
  for (unsigned i = 0; !g_stop; ++i) {
    write_live(log, i);
    std::this_thread::sleep_for(period);  // a live source at --rate: the scenario, not a synchronisation
  }
  return 0;
}
