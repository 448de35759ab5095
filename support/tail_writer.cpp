// A writer for the ringlog tool tests and the tail benchmark: writes known
// transactions through Log/Txn so the tools' output can be pinned by golden files.
//   tail_writer create PATH SIZE            create (or replace) an empty ring
//   tail_writer known PATH                  the fixed scenario (session, 2 requests, a fetch, ...)
//   tail_writer incomplete PATH             a request that never ends (flushed, then exits)
//   tail_writer live PATH N                 N small requests
//   tail_writer fill PATH SIZE              create a ring of SIZE bytes and write requests
//                                           until it has wrapped twice (a full ring)
//   tail_writer varied PATH SIZE            the same with varied content: bytes that need
//                                           escaping, binary and cut records, nesting,
//                                           interleaved transactions split into batches
// Timestamps are fixed so the output is the same on every run.
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include "ringlog/log.hpp"

namespace {

constexpr std::uint64_t kT0 = 1795990488752601000ULL;  // ns

ringlog::Log open_or_create(const std::string& path) {
  if (::access(path.c_str(), F_OK) == 0) return ringlog::Log::open(path);
  return ringlog::Log::create(path, {.area_size = 1 << 20});
}

void known(ringlog::Log& log) {
  using ringlog::Tag;
  log.control().set_max_record(64);
  ringlog::Txn sess = log.begin(ringlog::TxnType::sess, "HTTP/1");
  sess.timestamp("Start", kT0);
  sess.record(Tag::SessOpen, "127.0.0.1 50000 a0 127.0.0.1 8080 1795990488.752601 17");
  {
    ringlog::Txn req = sess.child(ringlog::TxnType::req, "rxreq");
    req.timestamp("Start", kT0 + 10'000);
    req.record(Tag::ReqStart, "127.0.0.1 50000 a0");
    req.record(Tag::ReqMethod, "GET");
    req.record(Tag::ReqURL, "/index.html");
    req.record(Tag::ReqProtocol, "HTTP/1.1");
    req.record(Tag::ReqHeader, "Host: example.com");
    req.record(Tag::ReqHeader, "User-Agent: curl/7.88.1");
    {
      ringlog::Txn be = req.child(ringlog::TxnType::bereq, "fetch");
      be.timestamp("Start", kT0 + 110'000);
      be.record(Tag::BereqMethod, "GET");
      be.record(Tag::BereqURL, "/index.html");
      be.record(Tag::BereqHeader, "Host: example.com");
      be.record(Tag::BerespProtocol, "HTTP/1.1");
      be.record(Tag::BerespStatus, "200");
      be.record(Tag::BerespReason, "OK");
      be.record(Tag::BerespHeader, "Content-Length: 512");
      be.timestamp("BerespBody", kT0 + 910'000);
      be.record(Tag::BereqAcct, "60 0 60 120 512 632");
      be.end();
    }
    req.record(Tag::RespProtocol, "HTTP/1.1");
    req.record(Tag::RespStatus, "200");
    req.record(Tag::RespReason, "OK");
    req.record(Tag::RespHeader, "Content-Length: 512");
    const unsigned char hash[] = {0xde, 0xad, 0xbe, 0xef, 0x00, 0x01};
    req.record(Tag::Hash, std::as_bytes(std::span(hash)));
    req.timestamp("Resp", kT0 + 1'010'000);
    req.record(Tag::ReqAcct, "78 0 78 120 512 632");
    req.end();
  }
  {
    ringlog::Txn req = sess.child(ringlog::TxnType::req, "rxreq");
    req.timestamp("Start", kT0 + 2'000'000);
    req.record(Tag::ReqMethod, "GET");
    req.record(Tag::ReqURL, "/missing?q=\"x\"");
    req.record(Tag::ReqProtocol, "HTTP/1.1");
    req.record(Tag::ReqHeader, std::string_view("X-Bad: a\x01\tb\xff", 13));
    req.record(Tag::ReqHeader, "Cookie: " + std::string(80, 'c'));
    req.record(Tag::RespStatus, "404");
    req.record(Tag::RespReason, "Not Found");
    req.record(Tag::Hit, "1001 119.000000 10.000000 0.000000");
    req.timestamp("Resp", kT0 + 2'500'000);
    req.end();
  }
  sess.record(Tag::SessClose, "REM_CLOSE 0.500");
  sess.end();
  log.record(Tag::Notice, "outside any transaction");
}

void live(ringlog::Log& log, int n) {
  for (int i = 0; i < n; ++i) {
    ringlog::Txn req = log.begin(ringlog::TxnType::req, "rxreq");
    req.record(ringlog::Tag::ReqMethod, "GET");
    req.recordf(ringlog::Tag::ReqURL, "/live/%d", i);
    req.record(ringlog::Tag::RespStatus, i % 5 == 4 ? "503" : "200");
    req.end();
  }
}

// Requests shaped like a real proxy's (about 20 records each), until the ring has
// wrapped twice: a full ring for the benchmark.
void fill(ringlog::Log& log) {
  using ringlog::Tag;
  const std::uint64_t target = 2 * log.ring().area_size();
  std::uint64_t n = 0;
  while (log.ring().stats().bytes_written < target) {
    ringlog::Txn sess = log.begin(ringlog::TxnType::sess, "HTTP/1");
    sess.record(Tag::SessOpen, "127.0.0.1 50000 a0 127.0.0.1 8080 1795990488.752601 17");
    for (int r = 0; r < 4; ++r, ++n) {
      ringlog::Txn req = sess.child(ringlog::TxnType::req, "rxreq");
      req.timestamp("Start", kT0 + n * 1000);
      req.record(Tag::ReqStart, "127.0.0.1 50000 a0");
      req.record(Tag::ReqMethod, "GET");
      req.recordf(Tag::ReqURL, "/static/img/%" PRIu64 ".png", n % 1000);
      req.record(Tag::ReqProtocol, "HTTP/1.1");
      req.record(Tag::ReqHeader, "Host: www.example.com");
      req.record(Tag::ReqHeader, "User-Agent: Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0");
      req.record(Tag::ReqHeader, "Accept: image/avif,image/webp,*/*");
      req.record(Tag::ReqHeader, "Accept-Encoding: gzip, deflate, br");
      if (n % 4 == 0) {
        ringlog::Txn be = req.child(ringlog::TxnType::bereq, "fetch");
        be.record(Tag::BereqMethod, "GET");
        be.recordf(Tag::BereqURL, "/static/img/%" PRIu64 ".png", n % 1000);
        be.record(Tag::BereqHeader, "Host: www.example.com");
        be.record(Tag::BerespStatus, "200");
        be.record(Tag::BerespHeader, "Content-Type: image/png");
        be.record(Tag::BerespHeader, "Content-Length: 4096");
        be.timestamp("BerespBody", kT0 + n * 1000 + 500);
        be.end();
      } else {
        req.record(Tag::Hit, "1001 119.000000 10.000000 0.000000");
      }
      req.record(Tag::RespProtocol, "HTTP/1.1");
      req.record(Tag::RespStatus, "200");
      req.record(Tag::RespReason, "OK");
      req.record(Tag::RespHeader, "Content-Type: image/png");
      req.record(Tag::RespHeader, "Content-Length: 4096");
      req.timestamp("Resp", kT0 + n * 1000 + 700);
      req.record(Tag::ReqAcct, "180 0 180 250 4096 4346");
      req.end();
    }
    sess.record(Tag::SessClose, "REM_CLOSE 0.001");
    sess.end();
  }
  std::printf("%" PRIu64 " requests, %" PRIu64 " bytes written\n", n, log.ring().stats().bytes_written);
}

// Deterministic pseudo-random content (a fixed LCG), for a ring whose output in every
// grouping can be pinned by a checksum: payloads of every printing path (plain,
// escaped, control bytes in safe tags, binary, truncated, empty, long), transactions
// split over several batches and interleaved, nesting deeper than three levels, vxid
// 0 records, and a wrapped ring (groups whose start was overwritten).
void varied(ringlog::Log& log) {
  using ringlog::Tag;
  log.control().set_max_record(200);
  std::uint64_t seed = 12345;
  auto rnd = [&seed](std::uint64_t n) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return (seed >> 33) % n;
  };
  static constexpr char kBytes[] = "abcXYZ019 :/-_.\"\\\t\n\r\x01\x1f\x7f\x80\xc3\xa9\xff";
  auto text = [&](std::size_t len, bool special) {
    std::string s;
    for (std::size_t i = 0; i < len; ++i)
      s += special && rnd(8) == 0 ? kBytes[rnd(sizeof kBytes - 1)] : char('a' + rnd(26));
    return s;
  };
  auto payload_len = [&] {
    switch (rnd(6)) {
      case 0: return std::size_t(rnd(4));
      case 1: return std::size_t(15 + rnd(3));
      case 2: return std::size_t(rnd(250));
      default: return std::size_t(rnd(40));
    }
  };
  auto records = [&](ringlog::Txn& t, int n) {
    for (int i = 0; i < n; ++i) {
      switch (rnd(7)) {
        case 0: t.record(Tag::ReqHeader, text(payload_len(), true)); break;       // unsafe
        case 1: t.record(Tag::BerespHeader, text(payload_len(), true)); break;    // unsafe
        case 2: t.record(Tag::Notice, text(payload_len(), true)); break;          // safe
        case 3: {
          std::string b = text(rnd(24), true);
          t.record(Tag::Hash, std::as_bytes(std::span(b.data(), b.size())));
          break;
        }
        case 4: t.record(ringlog::app_tag(unsigned(rnd(3))), text(payload_len(), true)); break;
        case 5: t.timestamp("Resp", kT0 + rnd(1'000'000'000)); break;
        default: {
          std::string url(1, '/');
          url += text(payload_len(), false);
          t.record(Tag::ReqURL, url);
          break;
        }
      }
    }
  };
  const std::uint64_t target = 2 * log.ring().area_size();
  while (log.ring().stats().bytes_written < target) {
    ringlog::Txn a = log.begin(ringlog::TxnType::sess, "HTTP/1");
    ringlog::Txn b = log.begin(ringlog::TxnType::sess, "HTTP/2");
    records(a, 2);
    for (int r = 0; r < 3; ++r) {
      ringlog::Txn ra = a.child(ringlog::TxnType::req, "rxreq");
      ringlog::Txn rb = b.child(ringlog::TxnType::req, "rxreq");
      for (int k = 0; k < 6; ++k) {  // interleaved, several batches each
        records(ra, 1 + int(rnd(8)));
        records(rb, 1 + int(rnd(8)));
      }
      if (rnd(3) == 0) {  // nesting to five levels
        ringlog::Txn e1 = ra.child(ringlog::TxnType::req, "esi");
        ringlog::Txn e2 = e1.child(ringlog::TxnType::req, "esi");
        ringlog::Txn e3 = e2.child(ringlog::TxnType::bereq, "fetch");
        records(e3, 3);
        e3.end();
        records(e2, 2);
        e2.end();
        records(e1, 2);
        e1.end();
      }
      if (rnd(4) == 0) log.record(Tag::Notice, text(payload_len(), true));
      ra.end();
      rb.end();
    }
    records(b, 2);
    b.end();
    a.end();
  }
}

int usage() {
  std::fprintf(stderr, "usage: tail_writer create|known|incomplete|live|fill|varied PATH [ARGS]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  std::string cmd = argv[1], path = argv[2];
  try {
    if (cmd == "create" && argc == 4) {
      ringlog::Ring::create(path, {.area_size = std::strtoull(argv[3], nullptr, 0)});
    } else if (cmd == "known") {
      ringlog::Log log = open_or_create(path);
      known(log);
    } else if (cmd == "incomplete") {
      ringlog::Log log = open_or_create(path);
      ringlog::Txn req = log.begin(ringlog::TxnType::req, "rxreq");
      req.record(ringlog::Tag::ReqMethod, "GET");
      req.record(ringlog::Tag::ReqURL, "/never-ends");
      req.flush();
      std::fflush(stdout);
      _exit(0);  // the End is never written
    } else if (cmd == "live" && argc == 4) {
      ringlog::Log log = open_or_create(path);
      live(log, std::atoi(argv[3]));
    } else if (cmd == "fill" && argc == 4) {
      ringlog::Log log = ringlog::Log::create(path, {.area_size = std::strtoull(argv[3], nullptr, 0)});
      fill(log);
    } else if (cmd == "varied" && argc == 4) {
      ringlog::Log log = ringlog::Log::create(path, {.area_size = std::strtoull(argv[3], nullptr, 0)},
                                              {.txn_buffer = 512});
      varied(log);
    } else {
      return usage();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tail_writer: %s\n", e.what());
    return 1;
  }
  return 0;
}
