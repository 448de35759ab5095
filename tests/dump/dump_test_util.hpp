// Helpers for the ringlog-dump tests: rings built byte by byte (so that a test can
// leave exactly the state a crash leaves), HAProxy files built from their documented
// layouts, and a pid that is certainly dead.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dump.hpp"
#include "ringlog/format.hpp"
#include "ringlog/ring.hpp"

namespace ringlog::test {

// A pid whose process has exited and been reaped.
inline std::uint32_t dead_pid() {
  pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  int st = 0;
  ::waitpid(p, &st, 0);
  return static_cast<std::uint32_t>(p);
}

// A 64-byte aligned, zeroed buffer standing for a file.
struct Bytes {
  std::uint8_t* p = nullptr;
  std::size_t n = 0;
  explicit Bytes(std::size_t size) : n(size) {
    p = static_cast<std::uint8_t*>(std::aligned_alloc(64, (size + 63) / 64 * 64));
    std::memset(p, 0, (size + 63) / 64 * 64);
  }
  Bytes(const Bytes&) = delete;
  ~Bytes() { std::free(p); }
  std::span<std::uint8_t> span() { return {p, n}; }
};

// Raw access to a ringlog ring held in Bytes (a copy of a file made by Ring::create).
struct RawRing {
  format::Header& h;
  std::uint8_t* area;
  std::uint64_t size;
  explicit RawRing(Bytes& b)
      : h(*reinterpret_cast<format::Header*>(b.p)), area(b.p + format::kHeaderLen), size(h.area_size) {}
  std::uint8_t& at(std::uint64_t pos) { return area[pos % size]; }
  std::uint64_t tail() { return h.tail.load() & format::kPosMask; }
  // Writes one message after tail - 1 exactly as a writer would (RC kept, trailing RC 0),
  // without the lock. Returns the position of its RC byte.
  std::uint64_t append(const std::string& payload, format::MsgKind kind = format::MsgKind::data,
                       std::size_t copy_only = ~std::size_t{0}) {
    std::uint64_t t = tail();
    std::uint64_t word = (std::uint64_t{payload.size()} << format::kKindBits) | std::uint64_t(kind);
    std::uint8_t vb[format::kVarintMax];
    std::size_t vl = format::varint_encode(word, vb);
    std::uint64_t p = t;
    for (std::size_t i = 0; i < vl; ++i) at(p++) = vb[i];
    for (std::size_t i = 0; i < payload.size() && i < copy_only; ++i) at(p + i) = static_cast<std::uint8_t>(payload[i]);
    p += payload.size();
    at(p) = 0;
    h.tail.store(p + 1);
    return t - 1;
  }
};

// Reads a file into Bytes.
inline std::unique_ptr<Bytes> slurp(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return nullptr;
  std::fseek(f, 0, SEEK_END);
  long n = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  auto b = std::make_unique<Bytes>(static_cast<std::size_t>(n));
  if (n > 0 && std::fread(b->p, 1, static_cast<std::size_t>(n), f) != static_cast<std::size_t>(n)) b.reset();
  std::fclose(f);
  return b;
}

// HAProxy message framing: RC, varint length (no kind bits), payload.
inline std::vector<std::uint8_t> hap_frame(const std::vector<std::string>& msgs) {
  std::vector<std::uint8_t> v;
  for (auto& m : msgs) {
    v.push_back(0);
    std::uint8_t vb[format::kVarintMax];
    std::size_t vl = format::varint_encode(m.size(), vb);
    v.insert(v.end(), vb, vb + vl);
    v.insert(v.end(), m.begin(), m.end());
  }
  v.push_back(0);  // the RC at tail - 1
  return v;
}

// A HAProxy 3.0+ ring (v2: 32-byte header, v2a: 192-byte cache-aligned header) whose
// messages start at area offset `head`, wrapping if needed.
inline std::unique_ptr<Bytes> hap_v2(bool aligned, std::uint64_t size, std::uint64_t head,
                                     const std::vector<std::string>& msgs, bool locked = false) {
  std::uint64_t rsvd = aligned ? 192 : 32;
  auto b = std::make_unique<Bytes>(rsvd + size);
  std::vector<std::uint8_t> data = hap_frame(msgs);
  for (std::size_t i = 0; i < data.size(); ++i) b->p[rsvd + (head + i) % size] = data[i];
  std::uint64_t tail = (head + data.size()) % size;
  if (locked) tail |= 1ULL << 63;
  std::memcpy(b->p + 0, &size, 8);
  std::memcpy(b->p + 8, &rsvd, 8);
  std::memcpy(b->p + (aligned ? 64 : 16), &tail, 8);
  std::memcpy(b->p + (aligned ? 128 : 24), &head, 8);
  return b;
}

// A HAProxy < 3.0 ring: struct buffer {size, area pointer, data, head}, then a header
// of `hdr` bytes in all, then the area.
inline std::unique_ptr<Bytes> hap_v1(std::uint64_t hdr, std::uint64_t size, std::uint64_t head,
                                     const std::vector<std::string>& msgs) {
  auto b = std::make_unique<Bytes>(hdr + size);
  std::vector<std::uint8_t> data = hap_frame(msgs);
  for (std::size_t i = 0; i < data.size(); ++i) b->p[hdr + (head + i) % size] = data[i];
  std::uint64_t areap = 0x7f3e5a000000ULL + hdr, n = data.size();
  std::memcpy(b->p + 0, &size, 8);
  std::memcpy(b->p + 8, &areap, 8);
  std::memcpy(b->p + 16, &n, 8);
  std::memcpy(b->p + 24, &head, 8);
  return b;
}

inline std::vector<std::string> payloads(const dump::WalkResult& w) {
  std::vector<std::string> v;
  for (auto& m : w.messages) v.push_back(m.payload);
  return v;
}

}  // namespace ringlog::test
