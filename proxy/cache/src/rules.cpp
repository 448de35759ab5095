// HTTP rules of the cache: freshness (TTL, grace), dates, Accept-Encoding, conditionals.
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>

#include "ringproxy/cache/cache.hpp"
#include "ringlog/text.hpp"

namespace ringproxy::cache {

namespace {
using ringlog::iequals;
std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
template <class L>
std::optional<std::string_view> find(const L& l, std::string_view name) {
  for (const auto& [n, v] : l)
    if (iequals(n, name)) return std::string_view(v);
  return std::nullopt;
}
// Calls f(token, value) for each comma-separated directive "token[=value]".
template <class F>
void directives(std::string_view s, F f) {
  while (!s.empty()) {
    auto c = s.find(',');
    std::string_view d = trim(s.substr(0, c));
    auto eq = d.find('=');
    std::string_view k = trim(d.substr(0, eq)), v;
    if (eq != std::string_view::npos) {
      v = trim(d.substr(eq + 1));
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    }
    if (!k.empty()) f(k, v);
    if (c == std::string_view::npos) break;
    s.remove_prefix(c + 1);
  }
}
std::optional<double> seconds(std::string_view v) {
  if (v.empty() || v.size() > 15) return std::nullopt;
  double x = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    x = x * 10 + (c - '0');
  }
  return x;
}
}  // namespace

std::optional<std::string_view> Request::header(std::string_view name) const { return find(headers, name); }
std::optional<std::string_view> Response::header(std::string_view name) const { return find(headers, name); }
std::optional<std::string_view> ObjMeta::header(std::string_view name) const { return find(headers, name); }

std::optional<double> parse_http_date(std::string_view s) {
  s = trim(s);
  if (s.empty() || s.size() > 64) return std::nullopt;
  char buf[65];
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = 0;
  static const char* const kFormats[] = {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"};
  for (const char* f : kFormats) {
    struct tm tm {};
    const char* end = ::strptime(buf, f, &tm);
    if (end && *end == 0) return double(::timegm(&tm));
  }
  return std::nullopt;
}

std::string format_http_date(double t) {
  time_t tt = time_t(t);
  struct tm tm {};
  ::gmtime_r(&tt, &tm);
  char b[40];
  std::strftime(b, sizeof b, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return b;
}

TtlDecision decide_ttl(const Response& r, double now, const Config& cfg) {
  TtlDecision d;
  d.grace = cfg.default_grace;
  d.keep = cfg.default_keep;
  if (auto a = r.header("Age")) d.age = seconds(trim(*a)).value_or(0);
  if (auto v = r.header("Date")) d.date = parse_http_date(*v).value_or(0);
  if (auto v = r.header("Expires")) d.expires = parse_http_date(*v).value_or(-1);  // invalid: already expired
  // Statuses cacheable by default (Varnish's list, RFC 9110 15.1 "heuristically cacheable").
  static const int kCacheable[] = {200, 203, 204, 300, 301, 302, 304, 307, 308, 404, 405, 410, 414, 501};
  bool status_ok = false;
  for (int s : kCacheable) status_ok |= s == r.status;
  double s_maxage = -1;
  bool no_store = false, priv = false, no_cache = false;
  if (auto cc = r.header("Cache-Control")) {
    directives(*cc, [&](std::string_view k, std::string_view v) {
      if (iequals(k, "s-maxage")) s_maxage = seconds(v).value_or(0);
      else if (iequals(k, "max-age")) d.max_age = seconds(v).value_or(0);
      else if (iequals(k, "no-store")) no_store = true;
      else if (iequals(k, "private")) priv = true;
      else if (iequals(k, "no-cache")) no_cache = true;
      else if (iequals(k, "stale-while-revalidate")) d.grace = seconds(v).value_or(d.grace);
    });
  }
  // The TTL counts from the object's origin time (now - Age), as Varnish's does.
  if (s_maxage >= 0) {
    d.ttl = s_maxage;
  } else if (d.max_age >= 0) {
    d.ttl = d.max_age;
  } else if (r.header("Expires")) {
    // Expires relative to the origin's Date (clock skew between us and it cancels).
    double base = d.date > 0 ? d.date : now;
    d.ttl = d.expires < 0 ? 0 : d.expires - base;
  } else {
    d.ttl = status_ok ? cfg.default_ttl : 0;
  }
  if (!status_ok) d.why = "status";
  else if (no_store) d.why = "no-store";
  else if (priv) d.why = "private";
  else if (no_cache) d.why = "no-cache";
  else if (r.header("Set-Cookie")) d.why = "set-cookie";
  else if (auto v = r.header("Vary"); v && trim(*v) == "*") d.why = "vary-star";
  else if (d.ttl - d.age <= 0) d.why = "ttl";  // already stale when it arrives
  d.cacheable = *d.why == 0;
  return d;
}

bool accepts_encoding(std::optional<std::string_view> ae, std::string_view coding) {
  if (!ae) return iequals(coding, "identity");
  bool named = false, star = false;
  double q_named = 0, q_star = 0;
  std::string_view s = *ae;
  while (!s.empty()) {
    auto c = s.find(',');
    std::string_view item = trim(s.substr(0, c));
    auto semi = item.find(';');
    std::string_view tok = trim(item.substr(0, semi));
    double q = 1;
    if (semi != std::string_view::npos) {
      std::string_view params = item.substr(semi + 1);
      auto qp = params.find("q=");
      if (qp == std::string_view::npos) qp = params.find("Q=");
      if (qp != std::string_view::npos) {
        std::string qs(trim(params.substr(qp + 2)));
        q = std::atof(qs.c_str());
      }
    }
    if (iequals(tok, coding) || (iequals(coding, "gzip") && iequals(tok, "x-gzip"))) {
      named = true;
      q_named = std::max(q_named, q);
    } else if (tok == "*") {
      star = true;
      q_star = q;
    }
    if (c == std::string_view::npos) break;
    s.remove_prefix(c + 1);
  }
  if (named) return q_named > 0;
  if (star) return q_star > 0;
  return iequals(coding, "identity");  // identity is acceptable unless refused
}

namespace {
// Weak comparison (RFC 9110 8.8.3.2): W/ prefixes do not matter.
std::string_view opaque(std::string_view t) {
  t = trim(t);
  if (t.size() >= 2 && (t[0] == 'W' || t[0] == 'w') && t[1] == '/') t.remove_prefix(2);
  return t;
}
}  // namespace

bool not_modified(const Request& req, const ObjMeta& m) {
  if (m.status != 200) return false;
  if (auto inm = req.header("If-None-Match")) {
    auto etag = m.header("ETag");
    if (trim(*inm) == "*") return true;
    if (!etag) return false;
    std::string_view want = opaque(*etag);
    bool hit = false;
    std::string_view s = *inm;
    while (!s.empty() && !hit) {
      auto c = s.find(',');
      hit = opaque(s.substr(0, c)) == want;
      if (c == std::string_view::npos) break;
      s.remove_prefix(c + 1);
    }
    return hit;  // If-Modified-Since is ignored when If-None-Match is there
  }
  if (auto ims = req.header("If-Modified-Since")) {
    auto lm = m.header("Last-Modified");
    auto t_ims = parse_http_date(*ims);
    if (!lm || !t_ims) return false;
    auto t_lm = parse_http_date(*lm);
    return t_lm && *t_lm <= *t_ims;
  }
  return false;
}

}  // namespace ringproxy::cache
