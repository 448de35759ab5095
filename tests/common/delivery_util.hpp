// Helpers for the delivery tests: objects from bytes, draining a chain synchronously.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "ringproxy/delivery/filters.hpp"

namespace dtest {
using namespace ringproxy::delivery;

// Compares bodies without printing megabytes of binary on failure.
inline testing::AssertionResult same(const std::string& a, const std::string& b) {
  if (a == b) return testing::AssertionSuccess();
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return testing::AssertionFailure() << "sizes " << a.size() << " vs " << b.size() << ", first difference at " << i
                                     << (a.size() < 40 ? " got '" + a + "'" : std::string());
}

inline std::string random_bytes(std::size_t n, std::uint32_t seed = 1) {
  std::mt19937 g(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = char(g() & 0xff);
  return s;
}

// A finished object holding s, appended in pieces of `piece` bytes.
inline ObjRef make_object(Store& st, const std::string& s, std::size_t piece = 1000, bool transient = false) {
  ObjRef o = st.new_object(transient);
  for (std::size_t i = 0; i < s.size(); i += piece) {
    std::size_t k = std::min(piece, s.size() - i);
    if (o->append(s.data() + i, k) != ssize_t(k)) return nullptr;
  }
  o->finish();
  return o;
}

// Pulls everything from the chain with a scatter array of capacity cap, giving leases
// back after each pull. Returns false on error or if the chain stalls (kLeaseAgain).
inline bool drain(Chain& c, std::string* out, std::size_t cap = 8, int* last = nullptr) {
  ScatterArray sa(cap);
  for (int guard = 0; guard < 10000000; ++guard) {
    int r = c.pull(sa);
    if (last) *last = r;
    if (r < 0) {
      c.give_all(sa);
      c.flush_returns();
      return false;
    }
    for (std::size_t i = 0; i < sa.used(); ++i) out->append(static_cast<const char*>(sa.at(i).iov_base), sa.at(i).iov_len);
    bool end = sa.end();
    c.give_all(sa);
    c.flush_returns();
    if (end) return true;
  }
  return false;
}

inline std::string gunzip(const std::string& in) {
  z_stream s{};
  inflateInit2(&s, 15 + 32);
  std::string out;
  char buf[65536];
  s.next_in = (Bytef*)in.data();
  s.avail_in = uInt(in.size());
  int r;
  do {
    s.next_out = (Bytef*)buf;
    s.avail_out = sizeof buf;
    r = inflate(&s, Z_NO_FLUSH);
    out.append(buf, sizeof buf - s.avail_out);
  } while (r == Z_OK);
  inflateEnd(&s);
  return r == Z_STREAM_END ? out : std::string("<gunzip error>");
}

inline std::string gzip(const std::string& in) {
  z_stream s{};
  deflateInit2(&s, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY);
  std::string out(compressBound(uLong(in.size())) + 64, '\0');
  s.next_in = (Bytef*)in.data();
  s.avail_in = uInt(in.size());
  s.next_out = (Bytef*)out.data();
  s.avail_out = uInt(out.size());
  deflate(&s, Z_FINISH);
  out.resize(out.size() - s.avail_out);
  deflateEnd(&s);
  return out;
}

// Decodes a chunked body; "" and ok=false on a framing error.
inline std::string dechunk(const std::string& in, bool* ok) {
  std::string out;
  std::size_t p = 0;
  *ok = false;
  while (true) {
    auto e = in.find("\r\n", p);
    if (e == std::string::npos) return out;
    std::size_t n = std::stoul(in.substr(p, e - p), nullptr, 16);
    p = e + 2;
    if (n == 0) {
      *ok = in.compare(p, std::string::npos, "\r\n") == 0;
      return out;
    }
    if (p + n + 2 > in.size() || in.compare(p + n, 2, "\r\n") != 0) return out;
    out.append(in, p, n);
    p += n + 2;
  }
}
}  // namespace dtest
