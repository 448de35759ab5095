// ringproxy's HTTP cache: the object index (host + URL, Vary), TTL/grace from the
// response, pass and hit-for-pass, request coalescing on busy objects (waiters arm a
// notification instead of holding a thread), purge, conditional requests, and the
// delivery plan (status, head, filters) for a client. Objects live in a delivery::Store.
// Never does I/O; never blocks beyond its own short lock.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ringlog/regex.hpp"
#include "ringlog/txn.hpp"
#include "ringproxy/delivery/filters.hpp"

namespace ringlog { class Log; }
namespace ringlog::stats { class Group; }

namespace ringproxy::cache {

using delivery::ObjRef;
using HeaderList = std::vector<std::pair<std::string, std::string>>;

// The parts of a client request the cache looks at. Views must outlive the call.
struct Request {
  std::string_view method = "GET";
  std::string_view host;
  std::string_view url;
  std::vector<std::pair<std::string_view, std::string_view>> headers;
  std::optional<std::string_view> header(std::string_view name) const;  // case-insensitive, first
};

// The backend response head the cache decides on.
struct Response {
  int status = 200;
  std::string reason = "OK";
  HeaderList headers;
  std::optional<std::string_view> header(std::string_view name) const;
};

struct Config {
  double default_ttl = 120;
  double default_grace = 10;
  double default_keep = 0;
  double hfp_ttl = 120;  // how long a hit-for-pass marker lasts
  std::size_t max_ranges = 8;
};

// What the cache keeps with each object (delivery::Object::meta).
struct ObjMeta : delivery::ObjectMeta {
  std::string key;
  int status = 200;
  std::string reason;
  HeaderList headers;   // end-to-end headers as stored (no Content-Length/Transfer-Encoding)
  std::vector<std::pair<std::string, std::optional<std::string>>> vary;  // name, request value
  double t_origin = 0;  // when the object was fresh (fetch time minus Age)
  double ttl = 0, grace = 0, keep = 0;
  bool gzip = false;    // Content-Encoding: gzip as stored
  std::int64_t length = -1;  // Content-Length from the backend (-1: unknown until done)
  bool headers_ready = false;
  bool cacheable = false;
  std::uint64_t vxid = 0;  // the fetch transaction
  std::optional<std::string_view> header(std::string_view name) const;
};

enum class Verdict { hit, miss, pass, hit_pass, wait };

struct Lookup {
  Verdict verdict = Verdict::miss;
  ObjRef obj;          // hit: deliver it (may still be streaming); miss: fill it (busy)
  bool stale = false;  // hit served in grace
  ObjRef refresh;      // grace hit: this caller starts a background fetch into it
};

// The TTL decision for a response (RFC 9111 freshness, Varnish's builtin rules).
struct TtlDecision {
  bool cacheable = false;
  const char* why = "";   // uncacheable reason
  double ttl = 0, grace = 0, keep = 0;
  double age = 0, date = 0, expires = 0, max_age = -1;
};
TtlDecision decide_ttl(const Response& r, double now, const Config& cfg);

// HTTP-date (IMF-fixdate, RFC 850, asctime) to seconds; nullopt if unparsable.
std::optional<double> parse_http_date(std::string_view s);
std::string format_http_date(double t);
// Does the Accept-Encoding value accept this coding (q > 0)?
bool accepts_encoding(std::optional<std::string_view> accept_encoding, std::string_view coding);
// If-None-Match / If-Modified-Since against a 200 object: answer 304?
bool not_modified(const Request& req, const ObjMeta& m);

struct CacheStats {
  std::atomic<std::uint64_t> hit{0}, miss{0}, hitpass{0}, pass{0}, purged{0}, stale_hit{0}, waits{0};
};

class Cache {
 public:
  // main: the MAIN counter group (cache_hit, cache_miss, cache_hitpass, n_object,
  // n_lru_nuked), may be null. log: for LRU nuke records (Notice), may be null.
  Cache(delivery::Store& store, Config cfg = {}, ringlog::stats::Group* main = nullptr,
        ringlog::Log* log = nullptr);
  ~Cache();
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  static std::string make_key(std::string_view host, std::string_view url);

  // Looks the request up. wait: armed on the busy object when the verdict is wait
  // (look up again once it fires; a waiter that goes away first calls
  // Lookup::obj->disarm(wait)). Logs Hit / HitPass / HitMiss on txn. Non-GET/HEAD,
  // Authorization and Cookie requests are pass.
  Lookup lookup(const Request& req, delivery::Notify* wait, ringlog::Txn* txn, double now);

  // The fetch for a miss (or refresh) got its response head: decide TTL, store the
  // head, index the object (cacheable) or set a hit-for-pass marker, wake the waiters.
  // Logs TTL and Storage on the fetch txn. Returns whether the object is cached.
  bool headers(const ObjRef& obj, const Request& req, const Response& resp, double now, ringlog::Txn* txn);
  // The body is complete (the object joins the LRU) or the fetch failed (unindexed).
  void finish(const ObjRef& obj);
  void fail(const ObjRef& obj);
  // A pass object (transient, not indexed) with its head.
  ObjRef pass_object(const Response& resp, ringlog::Txn* txn, std::size_t window = 0);

  // PURGE: every variant of host+url; and by regex over "host" + "url" keys.
  std::size_t purge(std::string_view host, std::string_view url);
  std::size_t purge_regex(const std::string& pattern);  // PCRE2; throws ringlog::RegexError

  std::size_t objects() const;
  const CacheStats& stats() const noexcept { return st_; }
  delivery::Store& store() noexcept { return store_; }
  const Config& config() const noexcept { return cfg_; }

 private:
  struct Head {
    std::vector<ObjRef> variants;
    ObjRef busy;            // headers not in yet (miss or refresh)
    bool refreshing = false;
    double hfp_until = 0;
  };
  void unindex_locked(Head& h, const ObjRef& o);
  void on_nuke(const ObjRef& o);
  void count(int idx, std::int64_t n = 1);

  delivery::Store& store_;
  Config cfg_;
  ringlog::stats::Group* main_;
  ringlog::Log* log_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Head> index_;
  std::size_t n_objects_ = 0;
  std::uint64_t last_nuked_ = 0;
  CacheStats st_;
};

// How to answer one client from one object: status, response head and body filters.
struct DeliveryPlan {
  int status = 200;
  std::string head;               // status line + headers + CRLF CRLF
  bool body = true;               // false: head only (HEAD, 304, 416 has a tiny body)
  std::string small_body;         // 416: empty; used when !body is false but no object body
  bool chunked = false;
  std::optional<delivery::RangePlan> range;
  enum class Coding { none, gzip, gunzip } coding = Coding::none;
  std::uint64_t content_length = 0;  // when !chunked
  bool close_delimited = false;      // HTTP/1.0 client, length unknown: the close ends the body
};
// extra_headers: lines the server adds ("Via: ...\r\nX-Varnish: 3\r\n"), may be empty.
// now: for Age. http10: no chunked (close-delimited instead).
DeliveryPlan plan_delivery(const Request& req, const ObjRef& obj, double now, std::string_view extra_headers,
                           bool http10 = false, std::size_t max_ranges = 8);
// Builds the chain for a plan (filters in order), on a reader armed with notify.
std::unique_ptr<delivery::Chain> make_chain(const DeliveryPlan& p, const ObjRef& obj, delivery::Notify* notify);

}  // namespace ringproxy::cache
