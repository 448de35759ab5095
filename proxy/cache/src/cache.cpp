// The cache index, lookups with coalescing and grace, purges, and delivery plans.
// Lock order: the cache's lock, then an object's lock (arm / state); never the other way.
#include "ringproxy/cache/cache.hpp"

#include "ringlog/fmt.hpp"


#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "ringlog/log.hpp"
#include "ringlog/stats.hpp"
#include "ringproxy/counters.hpp"
#include "ringlog/text.hpp"

namespace ringproxy::cache {

namespace M = ringproxy::counters::main;

namespace {
using ringlog::iequals;
std::string lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = ringlog::ascii_lower(c);
  return r;
}
std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
ObjMeta& meta(const ObjRef& o) { return static_cast<ObjMeta&>(*o->meta); }

// The request's value of a Vary header, normalised like Varnish does Accept-Encoding
// (http_gzip_support): "gzip" or nothing.
std::optional<std::string> vary_value(const Request& req, std::string_view name) {
  auto v = req.header(name);
  if (iequals(name, "accept-encoding")) {
    if (v && accepts_encoding(v, "gzip")) return std::string("gzip");
    return std::nullopt;
  }
  if (!v) return std::nullopt;
  return std::string(trim(*v));
}
bool vary_match(const ObjMeta& m, const Request& req) {
  for (const auto& [name, val] : m.vary)
    if (vary_value(req, name) != val) return false;
  return true;
}
bool hop_or_framing(std::string_view n) {
  static const char* const kDrop[] = {"connection", "keep-alive", "proxy-connection", "te", "trailer",
                                      "transfer-encoding", "upgrade", "content-length", "age"};
  for (const char* d : kDrop)
    if (iequals(n, d)) return true;
  return false;
}
}  // namespace

Cache::Cache(delivery::Store& store, Config cfg, ringlog::stats::Group* main, ringlog::Log* log)
    : store_(store), cfg_(cfg), main_(main), log_(log) {
  store_.set_nuke_hook([this](ObjRef o) { on_nuke(o); });
}

Cache::~Cache() {
  store_.set_nuke_hook({});
  std::lock_guard lk(mu_);
  for (auto& [k, h] : index_)
    for (auto& o : h.variants) store_.lru_remove(*o);
  index_.clear();
}

void Cache::count(int idx, std::int64_t n) {
  if (main_) main_->add(std::uint32_t(idx), std::uint64_t(n));
}

std::string Cache::make_key(std::string_view host, std::string_view url) {
  std::string k = lower(host);
  k += url;
  return k;
}

std::size_t Cache::objects() const {
  std::lock_guard lk(mu_);
  return n_objects_;
}

Lookup Cache::lookup(const Request& req, delivery::Notify* wait, ringlog::Txn* txn, double now) {
  Lookup out;
  bool cacheable_method = req.method == "GET" || req.method == "HEAD";
  if (!cacheable_method || req.header("Authorization") || req.header("Cookie")) {
    out.verdict = Verdict::pass;
    st_.pass.fetch_add(1, std::memory_order_relaxed);
    return out;
  }
  std::string key = make_key(req.host, req.url);
  auto new_busy = [&]() {
    ObjRef o = store_.new_object(false);
    auto m = std::make_unique<ObjMeta>();
    m->key = key;
    o->meta = std::move(m);
    return o;
  };
  std::lock_guard lk(mu_);
  Head& h = index_[key];
  ObjRef fresh, stale, expired;
  for (const ObjRef& o : h.variants) {
    const ObjMeta& m = meta(o);
    if (!vary_match(m, req)) continue;
    double age = now - m.t_origin;
    if (age < m.ttl) {
      fresh = o;
      break;
    }
    if (age < m.ttl + m.grace) {
      if (!stale) stale = o;
    } else if (!expired) {
      expired = o;
    }
  }
  // A hit on a fresh or a stale object: the same counts and the same Hit record.
  auto hit = [&](const ObjRef& o) {
    const ObjMeta& m = meta(o);
    store_.lru_touch(*o);
    st_.hit.fetch_add(1, std::memory_order_relaxed);
    count(M::cache_hit);
    if (txn && txn->enabled(ringlog::Tag::Hit))
      txn->record(ringlog::Tag::Hit, ringlog::Line()
                                         .u(m.vxid).sp().f(m.t_origin + m.ttl - now, 6).sp().f(m.grace, 6).sp()
                                         .f(m.keep, 6)
                                         .view());
    out.verdict = Verdict::hit;
    out.obj = o;
  };
  if (fresh) {
    hit(fresh);
    return out;
  }
  if (now < h.hfp_until) {
    st_.hitpass.fetch_add(1, std::memory_order_relaxed);
    count(M::cache_hitpass);
    if (txn) txn->recordf(ringlog::Tag::HitPass, "0 %.6f", h.hfp_until - now);
    out.verdict = Verdict::hit_pass;
    return out;
  }
  if (stale) {  // grace: serve it, and let exactly one caller refresh it in the background
    hit(stale);
    st_.stale_hit.fetch_add(1, std::memory_order_relaxed);
    out.stale = true;
    if (!h.busy && !h.refreshing) {
      h.refreshing = true;
      h.busy = new_busy();
      out.refresh = h.busy;
    }
    return out;
  }
  if (h.busy) {  // coalescing: wait for the fetch's headers without holding a thread
    st_.waits.fetch_add(1, std::memory_order_relaxed);
    // Body bytes may move the version while headers are pending; headers_ready itself
    // only changes under our lock, so arming with a current version cannot miss it.
    if (wait)
      while (!h.busy->arm(wait, h.busy->version())) {
      }
    out.verdict = Verdict::wait;
    out.obj = h.busy;
    return out;
  }
  if (expired && txn) {
    const ObjMeta& m = meta(expired);
    txn->recordf(ringlog::Tag::HitMiss, "%" PRIu64 " %.6f", m.vxid, m.t_origin + m.ttl - now);
  }
  st_.miss.fetch_add(1, std::memory_order_relaxed);
  count(M::cache_miss);
  h.busy = new_busy();
  out.verdict = Verdict::miss;
  out.obj = h.busy;
  return out;
}

bool Cache::headers(const ObjRef& obj, const Request& req, const Response& resp, double now, ringlog::Txn* txn) {
  TtlDecision d = decide_ttl(resp, now, cfg_);
  ObjMeta& m = meta(obj);
  {
    std::lock_guard lk(mu_);
    m.status = resp.status;
    m.reason = resp.reason;
    m.headers.clear();
    for (const auto& [n, v] : resp.headers) {
      if (iequals(n, "content-length")) {
        char* e;
        long long x = std::strtoll(v.c_str(), &e, 10);
        if (*e == 0 && x >= 0) m.length = x;
      }
      if (iequals(n, "content-encoding") && iequals(trim(v), "gzip")) m.gzip = true;
      if (!hop_or_framing(n)) m.headers.emplace_back(n, v);
    }
    if (auto te = resp.header("Transfer-Encoding")) m.length = -1;  // the body's own length is unknown
    if (auto v = resp.header("Vary")) {
      std::string_view s = *v;
      while (!s.empty()) {
        auto c = s.find(',');
        std::string name = lower(trim(s.substr(0, c)));
        if (!name.empty() && name != "*") m.vary.emplace_back(name, vary_value(req, name));
        if (c == std::string_view::npos) break;
        s.remove_prefix(c + 1);
      }
    }
    m.t_origin = now - d.age;
    m.ttl = d.ttl;
    m.grace = d.grace;
    m.keep = d.keep;
    m.cacheable = d.cacheable;
    m.headers_ready = true;
    if (txn) m.vxid = txn->vxid();
    Head& h = index_[m.key];
    if (h.busy == obj) {
      h.busy = nullptr;
      h.refreshing = false;
    }
    if (d.cacheable) {
      // A new object replaces the variants it matches (a refresh, a changed Vary).
      for (auto it = h.variants.begin(); it != h.variants.end();) {
        if (meta(*it).vary == m.vary) {
          store_.lru_remove(**it);
          it = h.variants.erase(it);
          --n_objects_;
          count(M::n_object, -1);
        } else {
          ++it;
        }
      }
      h.variants.push_back(obj);
      ++n_objects_;
      count(M::n_object);
      h.hfp_until = 0;
    } else {
      h.hfp_until = now + cfg_.hfp_ttl;
    }
  }
  if (txn) {
    if (d.cacheable)
      txn->recordf(ringlog::Tag::TTL, "RFC %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f cacheable", d.ttl, d.grace, d.keep, now,
                   now - d.age, d.date, d.expires, d.max_age);
    else
      txn->recordf(ringlog::Tag::TTL, "HFP %.0f 0 0 %.0f uncacheable (%s)", cfg_.hfp_ttl, now, d.why);
    txn->record(ringlog::Tag::Storage, d.cacheable ? "malloc s0" : "malloc Transient");
  }
  obj->changed();  // waiters look again: hit (streaming) or hit-for-pass
  return d.cacheable;
}

void Cache::finish(const ObjRef& obj) {
  obj->finish();
  std::lock_guard lk(mu_);
  auto it = index_.find(meta(obj).key);
  if (it == index_.end()) return;
  auto& v = it->second.variants;
  if (std::find(v.begin(), v.end(), obj) != v.end()) store_.lru_insert(*obj);
}

void Cache::unindex_locked(Head& h, const ObjRef& o) {
  auto it = std::find(h.variants.begin(), h.variants.end(), o);
  if (it == h.variants.end()) return;
  store_.lru_remove(**it);
  h.variants.erase(it);
  --n_objects_;
  count(M::n_object, -1);
}

void Cache::fail(const ObjRef& obj) {
  obj->fail();
  std::lock_guard lk(mu_);
  auto it = index_.find(meta(obj).key);
  if (it == index_.end()) return;
  Head& h = it->second;
  if (h.busy == obj) {
    h.busy = nullptr;
    h.refreshing = false;
  }
  unindex_locked(h, obj);
  if (h.variants.empty() && !h.busy && h.hfp_until == 0) index_.erase(it);
}

void Cache::on_nuke(const ObjRef& o) {
  if (!o->meta) return;
  const ObjMeta& m = meta(o);
  {
    std::lock_guard lk(mu_);
    auto it = index_.find(m.key);
    if (it == index_.end()) return;
    auto& v = it->second.variants;
    auto vi = std::find(v.begin(), v.end(), o);
    if (vi == v.end()) return;
    v.erase(vi);  // already out of the LRU
    --n_objects_;
    count(M::n_object, -1);
  }
  count(M::n_lru_nuked);
  if (log_) {
    char b[300];
    std::snprintf(b, sizeof b, "LRU nuked x=%" PRIu64 " %.200s", m.vxid, m.key.c_str());
    log_->record(ringlog::Tag::Notice, b);
  }
}

ObjRef Cache::pass_object(const Response& resp, ringlog::Txn* txn, std::size_t window) {
  ObjRef o = store_.new_object(true, window);
  auto m = std::make_unique<ObjMeta>();
  m->status = resp.status;
  m->reason = resp.reason;
  for (const auto& [n, v] : resp.headers) {
    if (iequals(n, "content-length")) {
      char* e;
      long long x = std::strtoll(v.c_str(), &e, 10);
      if (*e == 0 && x >= 0) m->length = x;
    }
    if (iequals(n, "content-encoding") && iequals(trim(v), "gzip")) m->gzip = true;
    if (!hop_or_framing(n)) m->headers.emplace_back(n, v);
  }
  if (resp.header("Transfer-Encoding")) m->length = -1;
  m->headers_ready = true;
  if (txn) m->vxid = txn->vxid();
  o->meta = std::move(m);
  if (txn) txn->record(ringlog::Tag::Storage, "malloc Transient");
  return o;
}

std::size_t Cache::purge(std::string_view host, std::string_view url) {
  std::lock_guard lk(mu_);
  auto it = index_.find(make_key(host, url));
  if (it == index_.end()) return 0;
  Head& h = it->second;
  std::size_t n = h.variants.size();
  while (!h.variants.empty()) unindex_locked(h, h.variants.back());
  h.hfp_until = 0;
  if (!h.busy) index_.erase(it);
  st_.purged.fetch_add(n, std::memory_order_relaxed);
  return n;
}

std::size_t Cache::purge_regex(const std::string& pattern) {
  // PCRE2, as Varnish's ban ~ (compiled before the lock; a search stopped by a PCRE2
  // limit purges nothing).
  const ringlog::Regex re = ringlog::Regex::compile(pattern);
  std::lock_guard lk(mu_);
  std::size_t n = 0;
  for (auto it = index_.begin(); it != index_.end();) {
    if (re.matches(it->first)) {
      Head& h = it->second;
      n += h.variants.size();
      while (!h.variants.empty()) unindex_locked(h, h.variants.back());
      h.hfp_until = 0;
      if (!h.busy) {
        it = index_.erase(it);
        continue;
      }
    }
    ++it;
  }
  st_.purged.fetch_add(n, std::memory_order_relaxed);
  return n;
}

// ---------------------------------------------------------------- delivery plan
DeliveryPlan plan_delivery(const Request& req, const ObjRef& obj, double now, std::string_view extra, bool http10,
                           std::size_t max_ranges) {
  DeliveryPlan p;
  const ObjMeta& m = meta(obj);
  const bool head_req = req.method == "HEAD";
  auto ae = req.header("Accept-Encoding");
  if (m.gzip && !accepts_encoding(ae, "gzip")) p.coding = DeliveryPlan::Coding::gunzip;
  else if (!m.gzip && !accepts_encoding(ae, "identity") && accepts_encoding(ae, "gzip"))
    p.coding = DeliveryPlan::Coding::gzip;
  std::int64_t len = m.length;
  if (obj->state() == delivery::ObjState::done) len = std::int64_t(obj->fetched());
  p.status = m.status;
  std::string reason = m.reason;
  bool not_mod = not_modified(req, m);
  if (not_mod) {
    p.status = 304;
    reason = "Not Modified";
    p.body = false;
  }
  auto rng = req.header("Range");
  if (!not_mod && rng && m.status == 200 && p.coding == DeliveryPlan::Coding::none && len >= 0 && !head_req) {
    auto ct = m.header("Content-Type");
    delivery::RangePlan rp = delivery::plan_range(*rng, std::uint64_t(len), ct.value_or(""), max_ranges);
    if (rp.status == 206) {
      p.status = 206;
      reason = "Partial Content";
      p.range = std::move(rp);
    } else if (rp.status == 416) {
      p.status = 416;
      reason = "Range Not Satisfiable";
      p.body = false;
      p.range = std::move(rp);
    }
  }
  if (head_req) p.body = false;
  std::string& h = p.head;
  h.reserve(512);
  h += "HTTP/1.1 " + std::to_string(p.status) + " " + reason + "\r\n";
  static const char* const k304Keep[] = {"etag", "cache-control", "expires", "last-modified", "vary", "date",
                                         "content-location"};
  bool vary_ae = false;
  for (const auto& [n, v] : m.headers) {
    if (not_mod) {
      bool keep = false;
      for (const char* k : k304Keep) keep |= iequals(n, k);
      if (!keep) continue;
    }
    if (p.coding != DeliveryPlan::Coding::none && iequals(n, "content-encoding")) continue;
    if (p.range && p.range->ranges.size() > 1 && iequals(n, "content-type")) continue;
    if (iequals(n, "vary")) {
      std::string lv = lower(v);
      vary_ae = lv.find("accept-encoding") != std::string::npos;
    }
    h += n;
    h += ": ";
    h += v;
    h += "\r\n";
  }
  if (p.coding == DeliveryPlan::Coding::gzip) h += "Content-Encoding: gzip\r\n";
  if (p.coding != DeliveryPlan::Coding::none && !vary_ae) h += "Vary: Accept-Encoding\r\n";
  h += ringlog::Line().s("Age: ").f(std::max(0.0, now - m.t_origin), 0).s("\r\n").view();
  if (m.status == 200 && p.coding == DeliveryPlan::Coding::none && len >= 0) h += "Accept-Ranges: bytes\r\n";
  if (p.status == 416) {
    h += "Content-Range: " + p.range->content_range + "\r\nContent-Length: 0\r\n";
  } else if (p.status == 206) {
    if (p.range->ranges.size() == 1) h += "Content-Range: " + p.range->content_range + "\r\n";
    else h += "Content-Type: " + p.range->content_type + "\r\n";
    p.content_length = p.range->content_length;
    h += "Content-Length: " + std::to_string(p.content_length) + "\r\n";
  } else if (p.status != 304 && p.status != 204 && !(p.status >= 100 && p.status < 200)) {
    if (p.coding == DeliveryPlan::Coding::none && len >= 0) {
      p.content_length = std::uint64_t(len);
      h += "Content-Length: " + std::to_string(len) + "\r\n";
    } else if (!http10) {
      p.chunked = true;
      h += "Transfer-Encoding: chunked\r\n";
    } else {
      p.close_delimited = true;
    }
  } else {
    p.body = false;
  }
  h += extra;
  h += "\r\n";
  return p;
}

std::unique_ptr<delivery::Chain> make_chain(const DeliveryPlan& p, const ObjRef& obj, delivery::Notify* notify) {
  if (!p.body) return nullptr;
  auto c = std::make_unique<delivery::Chain>(obj, notify);
  if (p.coding == DeliveryPlan::Coding::gunzip)
    c->push(std::make_unique<delivery::ZlibFilter>(delivery::ZlibFilter::Mode::gunzip));
  else if (p.coding == DeliveryPlan::Coding::gzip)
    c->push(std::make_unique<delivery::ZlibFilter>(delivery::ZlibFilter::Mode::gzip));
  if (p.range && p.status == 206) {
    std::uint64_t lo = p.range->ranges[0].lo;
    c->reader().skip(lo);
    c->push(std::make_unique<delivery::RangeFilter>(*p.range, lo));
  }
  if (p.chunked) c->push(std::make_unique<delivery::ChunkedFilter>());
  return c;
}

}  // namespace ringproxy::cache
