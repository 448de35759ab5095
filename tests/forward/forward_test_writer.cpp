// Test writer for the ringlog-forward scripted tests: creates an instance's ring, or
// writes numbered client transactions into it (URL /seq/NNNNNN), optionally once a
// pinned reader (the forwarder) is attached, at a given rate.
//   forward_test_writer create RING_PATH AREA_BYTES
//   forward_test_writer write RING_PATH FIRST COUNT RATE_PER_S [WAIT_PINNED_S [READERS]]
// Prints "written W dropped D" (D: transactions the ring refused or dropped).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "ringlog/log.hpp"

int main(int argc, char** argv) {
  if (argc >= 4 && std::string(argv[1]) == "create") {
    ringlog::CreateOptions co;
    co.area_size = std::strtoull(argv[3], nullptr, 10);
    ringlog::Log::create(argv[2], co);
    return 0;
  }
  if (argc < 6 || std::string(argv[1]) != "write") {
    std::fprintf(stderr, "usage: forward_test_writer create PATH SIZE | write PATH FIRST COUNT RATE [WAIT]\n");
    return 2;
  }
  ringlog::Log log = ringlog::Log::open(argv[2]);
  unsigned long long first = std::strtoull(argv[3], nullptr, 10), count = std::strtoull(argv[4], nullptr, 10);
  double rate = std::atof(argv[5]);
  double wait = argc > 6 ? std::atof(argv[6]) : 0;
  unsigned readers = argc > 7 ? static_cast<unsigned>(std::atoi(argv[7])) : 1;
  auto start = std::chrono::steady_clock::now();
  while (wait > 0 && log.ring().stats().pinned_readers < readers) {
    if (std::chrono::steady_clock::now() - start > std::chrono::duration<double>(wait)) {
      std::fprintf(stderr, "no pinned reader attached after %.1f s\n", wait);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // bounded poll on the header's pinned count
  }
  std::uint64_t dropped_before = log.dropped_batches();
  start = std::chrono::steady_clock::now();
  for (unsigned long long i = first; i < first + count; ++i) {
    ringlog::Txn t = log.begin(ringlog::TxnType::req, "rxreq", 0);
    t.timestamp("Start");
    t.record(ringlog::Tag::ReqStart, "127.0.0.1 40000 a0");
    t.record(ringlog::Tag::ReqMethod, "GET");
    char url[64];
    std::snprintf(url, sizeof url, "/seq/%06llu", i);
    t.record(ringlog::Tag::ReqURL, url);
    t.record(ringlog::Tag::ReqProtocol, "HTTP/1.1");
    t.record(ringlog::Tag::ReqHeader, "Host: forward.test");
    t.record(ringlog::Tag::ReqHeader, "User-Agent: forward-test \"quoted\"");
    t.record(ringlog::Tag::RespProtocol, "HTTP/1.1");
    t.record(ringlog::Tag::RespStatus, "200");
    t.record(ringlog::Tag::RespReason, "OK");
    t.record(ringlog::Tag::ReqAcct, "80 0 80 120 5 125");
    t.timestamp("Resp");
    t.end();
    if (rate > 0) {
      auto due = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(double(i - first + 1) / rate));
      std::this_thread::sleep_until(due);  // a live source at a fixed rate: the scenario, not a synchronisation
    }
  }
  std::printf("written %llu dropped %llu\n", count,
              static_cast<unsigned long long>(log.dropped_batches() - dropped_before));
  return 0;
}
