// Cache semantics: TTL sources, Age, Vary on Accept-Encoding, pass and hit-for-pass,
// request coalescing, grace with one background refresh, purge (exact, regex), 304,
// LRU eviction unindexing objects, and the delivery plans (Age, framing, coding, ranges).
#include <gtest/gtest.h>

#include <poll.h>

#include <thread>

#include "delivery_util.hpp"
#include "observe.hpp"
#include "ringproxy/cache/cache.hpp"

using namespace ringproxy;
using namespace ringproxy::cache;
using namespace dtest;

namespace {
const double T0 = 1700000000;

Request get(std::string_view url, std::vector<std::pair<std::string_view, std::string_view>> h = {},
            std::string_view method = "GET") {
  Request r;
  r.method = method;
  r.host = "example.com";
  r.url = url;
  r.headers = std::move(h);
  return r;
}
Response resp(HeaderList h, int status = 200) {
  Response r;
  r.status = status;
  r.headers = std::move(h);
  return r;
}
// Miss, then fill the object with body and these headers; returns whether cached.
bool fill(Cache& c, const Request& rq, const Response& rs, const std::string& body, double now, ObjRef* out = nullptr) {
  Lookup l = c.lookup(rq, nullptr, nullptr, now);
  EXPECT_EQ(l.verdict, Verdict::miss);
  if (l.verdict != Verdict::miss) return false;
  bool cached = c.headers(l.obj, rq, rs, now, nullptr);
  l.obj->append(body.data(), body.size());
  c.finish(l.obj);
  if (out) *out = l.obj;
  return cached;
}
std::string body_of(const ObjRef& o) {
  delivery::Chain ch(o, nullptr);
  std::string s;
  EXPECT_TRUE(drain(ch, &s));
  return s;
}
}  // namespace

TEST(Ttl, SourcesInOrder) {
  Config cfg;
  auto d = decide_ttl(resp({{"Cache-Control", "max-age=60, s-maxage=300"}}), T0, cfg);
  EXPECT_TRUE(d.cacheable);
  EXPECT_EQ(d.ttl, 300);
  d = decide_ttl(resp({{"Cache-Control", "public, max-age=60"}, {"Age", "20"}}), T0, cfg);
  EXPECT_EQ(d.ttl, 60);  // from the origin time, which is now - Age
  EXPECT_EQ(d.age, 20);
  EXPECT_FALSE(decide_ttl(resp({{"Cache-Control", "max-age=60"}, {"Age", "61"}}), T0, cfg).cacheable);
  d = decide_ttl(resp({{"Date", format_http_date(T0)}, {"Expires", format_http_date(T0 + 90)}}), T0 + 5, cfg);
  EXPECT_EQ(d.ttl, 90);  // relative to the origin's Date
  d = decide_ttl(resp({{"Expires", "garbage"}}), T0, cfg);
  EXPECT_FALSE(d.cacheable);
  d = decide_ttl(resp({}), T0, cfg);
  EXPECT_EQ(d.ttl, cfg.default_ttl);
  d = decide_ttl(resp({{"Cache-Control", "max-age=10, stale-while-revalidate=30"}}), T0, cfg);
  EXPECT_EQ(d.grace, 30);
  d = decide_ttl(resp({}, 500), T0, cfg);
  EXPECT_FALSE(d.cacheable);
  EXPECT_STREQ(d.why, "status");
  for (auto [h, v, why] : std::vector<std::tuple<const char*, const char*, const char*>>{
           {"Cache-Control", "no-store", "no-store"},
           {"Cache-Control", "private, max-age=100", "private"},
           {"Cache-Control", "no-cache", "no-cache"},
           {"Set-Cookie", "a=b", "set-cookie"},
           {"Vary", "*", "vary-star"},
           {"Cache-Control", "max-age=0", "ttl"}}) {
    d = decide_ttl(resp({{h, v}}), T0, cfg);
    EXPECT_FALSE(d.cacheable) << h << ": " << v;
    EXPECT_STREQ(d.why, why);
  }
}

TEST(Dates, ParseAndFormat) {
  EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777.0);
  EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), 784111777.0);
  EXPECT_EQ(parse_http_date("Sun Nov  6 08:49:37 1994"), 784111777.0);
  EXPECT_FALSE(parse_http_date("yesterday"));
  EXPECT_FALSE(parse_http_date(""));
  EXPECT_EQ(format_http_date(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");
}

TEST(AcceptEncoding, QValuesAndStar) {
  EXPECT_TRUE(accepts_encoding("gzip, deflate", "gzip"));
  EXPECT_FALSE(accepts_encoding("gzip;q=0, deflate", "gzip"));
  EXPECT_TRUE(accepts_encoding("*", "gzip"));
  EXPECT_FALSE(accepts_encoding("br", "gzip"));
  EXPECT_TRUE(accepts_encoding("br", "identity"));
  EXPECT_FALSE(accepts_encoding("gzip, identity;q=0", "identity"));
  EXPECT_FALSE(accepts_encoding("gzip, *;q=0", "identity"));
  EXPECT_FALSE(accepts_encoding(std::nullopt, "gzip"));
  EXPECT_TRUE(accepts_encoding(std::nullopt, "identity"));
}

TEST(Cache, HitAfterMissUntilTtlAndAge) {
  delivery::Store st;
  Cache c(st);
  ObjRef o;
  ASSERT_TRUE(fill(c, get("/a"), resp({{"Cache-Control", "max-age=100"}, {"Content-Length", "5"}}), "hello", T0, &o));
  Lookup l = c.lookup(get("/a"), nullptr, nullptr, T0 + 10);
  ASSERT_EQ(l.verdict, Verdict::hit);
  EXPECT_EQ(l.obj, o);
  EXPECT_EQ(body_of(l.obj), "hello");
  DeliveryPlan p = plan_delivery(get("/a"), l.obj, T0 + 10, "");
  EXPECT_NE(p.head.find("\r\nAge: 10\r\n"), std::string::npos) << p.head;
  EXPECT_NE(p.head.find("\r\nContent-Length: 5\r\n"), std::string::npos);
  // HEAD shares the key and gets no body.
  EXPECT_EQ(c.lookup(get("/a", {}, "HEAD"), nullptr, nullptr, T0 + 20).verdict, Verdict::hit);
  EXPECT_FALSE(plan_delivery(get("/a", {}, "HEAD"), l.obj, T0, "").body);
  // Host is case-insensitive, the URL is not.
  Request r = get("/a");
  r.host = "EXAMPLE.com";
  EXPECT_EQ(c.lookup(r, nullptr, nullptr, T0 + 20).verdict, Verdict::hit);
  EXPECT_EQ(c.lookup(get("/A"), nullptr, nullptr, T0 + 20).verdict, Verdict::miss);
  EXPECT_EQ(c.stats().hit.load(), 3u);
  // Past TTL + grace (10 s): a miss again.
  EXPECT_EQ(c.lookup(get("/a"), nullptr, nullptr, T0 + 111).verdict, Verdict::miss);
  EXPECT_EQ(c.objects(), 1u);
}

TEST(Cache, BackendAgeShortensTtl) {
  delivery::Store st;
  Cache c(st);
  ASSERT_TRUE(fill(c, get("/age"), resp({{"Cache-Control", "max-age=100"}, {"Age", "90"}}), "x", T0));
  auto l = c.lookup(get("/age"), nullptr, nullptr, T0 + 5);
  ASSERT_EQ(l.verdict, Verdict::hit);
  EXPECT_NE(plan_delivery(get("/age"), l.obj, T0 + 5, "").head.find("\r\nAge: 95\r\n"), std::string::npos);
  EXPECT_TRUE(c.lookup(get("/age"), nullptr, nullptr, T0 + 10).stale);  // 100 s since origin: grace
}

TEST(Cache, VaryAcceptEncodingKeepsTwoVariants) {
  delivery::Store st;
  Cache c(st);
  auto gz = get("/v", {{"Accept-Encoding", "gzip, deflate, br"}});
  auto plain = get("/v");
  ASSERT_TRUE(fill(c, gz, resp({{"Vary", "Accept-Encoding"}, {"Content-Encoding", "gzip"}}), gzip("zipped"), T0));
  // A client without gzip does not match the gzip variant: miss, its own variant.
  ASSERT_TRUE(fill(c, plain, resp({{"Vary", "Accept-Encoding"}}), "plain", T0));
  EXPECT_EQ(c.objects(), 2u);
  auto l = c.lookup(get("/v", {{"Accept-Encoding", "gzip"}}), nullptr, nullptr, T0 + 1);  // normalised: same variant
  ASSERT_EQ(l.verdict, Verdict::hit);
  EXPECT_EQ(gunzip(body_of(l.obj)), "zipped");
  l = c.lookup(get("/v", {{"Accept-Encoding", "br"}}), nullptr, nullptr, T0 + 1);
  ASSERT_EQ(l.verdict, Verdict::hit);
  EXPECT_EQ(body_of(l.obj), "plain");
  // A refetch of one variant replaces it, not the other one.
  l = c.lookup(get("/v"), nullptr, nullptr, T0 + 200);
  ASSERT_EQ(l.verdict, Verdict::miss);
  c.headers(l.obj, plain, resp({{"Vary", "Accept-Encoding"}}), T0 + 200, nullptr);
  c.finish(l.obj);
  EXPECT_EQ(c.objects(), 2u);
}

TEST(Cache, GunzipForClientsWithoutGzip) {
  delivery::Store st;
  Cache c(st);
  auto gz = get("/z", {{"Accept-Encoding", "gzip"}});
  std::string text(5000, 't');
  ObjRef o;
  ASSERT_TRUE(fill(c, gz, resp({{"Content-Encoding", "gzip"}, {"Content-Type", "text/plain"}}), gzip(text), T0, &o));
  // Not varying on Accept-Encoding: the plain client gets the gzip object, gunzipped.
  Request plain = get("/z");
  DeliveryPlan p = plan_delivery(plain, o, T0, "");
  EXPECT_EQ(p.coding, DeliveryPlan::Coding::gunzip);
  EXPECT_TRUE(p.chunked);
  EXPECT_EQ(p.head.find("Content-Encoding"), std::string::npos);
  EXPECT_NE(p.head.find("Vary: Accept-Encoding\r\n"), std::string::npos);
  auto ch = make_chain(p, o, nullptr);
  std::string out;
  ASSERT_TRUE(drain(*ch, &out));
  bool ok;
  EXPECT_EQ(dechunk(out, &ok), text);
  // The gzip client gets it as stored, with its length.
  p = plan_delivery(gz, o, T0, "");
  EXPECT_EQ(p.coding, DeliveryPlan::Coding::none);
  EXPECT_FALSE(p.chunked);
  EXPECT_EQ(p.content_length, gzip(text).size());
}

TEST(Cache, PassRequestsAndHitForPass) {
  delivery::Store st;
  Cache c(st);
  EXPECT_EQ(c.lookup(get("/p", {}, "POST"), nullptr, nullptr, T0).verdict, Verdict::pass);
  EXPECT_EQ(c.lookup(get("/p", {{"Authorization", "Basic eA=="}}), nullptr, nullptr, T0).verdict, Verdict::pass);
  EXPECT_EQ(c.lookup(get("/p", {{"Cookie", "s=1"}}), nullptr, nullptr, T0).verdict, Verdict::pass);
  // An uncacheable response leaves a hit-for-pass marker: no coalescing wait next time.
  EXPECT_FALSE(fill(c, get("/p"), resp({{"Set-Cookie", "id=1"}}), "private", T0));
  EXPECT_EQ(c.objects(), 0u);
  EXPECT_EQ(c.lookup(get("/p"), nullptr, nullptr, T0 + 1).verdict, Verdict::hit_pass);
  EXPECT_EQ(c.stats().hitpass.load(), 1u);
  EXPECT_EQ(c.lookup(get("/p"), nullptr, nullptr, T0 + 121).verdict, Verdict::miss);  // marker expired
  for (const char* cc : {"no-store", "private", "no-cache"}) {
    std::string u = std::string("/") + cc;
    EXPECT_FALSE(fill(c, get(u), resp({{"Cache-Control", cc}}), "x", T0)) << cc;
    EXPECT_EQ(c.lookup(get(u), nullptr, nullptr, T0 + 1).verdict, Verdict::hit_pass) << cc;
  }
  // A later cacheable response clears the marker.
  Lookup l = c.lookup(get("/p"), nullptr, nullptr, T0 + 200);
  c.headers(l.obj, get("/p"), resp({{"Cache-Control", "max-age=60"}}), T0 + 200, nullptr);
  c.finish(l.obj);
  EXPECT_EQ(c.lookup(get("/p"), nullptr, nullptr, T0 + 201).verdict, Verdict::hit);
}

TEST(Cache, CoalescingWaitersAreWokenAndStream) {
  delivery::Store st;
  Cache c(st);
  Lookup first = c.lookup(get("/c"), nullptr, nullptr, T0);
  ASSERT_EQ(first.verdict, Verdict::miss);
  std::vector<std::unique_ptr<delivery::ReadyNotify>> ns;
  for (int i = 0; i < 10; ++i) {
    ns.push_back(std::make_unique<delivery::ReadyNotify>());
    EXPECT_EQ(c.lookup(get("/c"), ns.back().get(), nullptr, T0).verdict, Verdict::wait);
  }
  EXPECT_EQ(c.stats().miss.load(), 1u);
  c.headers(first.obj, get("/c"), resp({{"Cache-Control", "max-age=60"}}), T0, nullptr);
  for (auto& n : ns) EXPECT_TRUE(n->take());
  Lookup again = c.lookup(get("/c"), nullptr, nullptr, T0);
  ASSERT_EQ(again.verdict, Verdict::hit);  // the busy object, streaming
  EXPECT_EQ(again.obj, first.obj);
  first.obj->append("abc", 3);
  c.finish(first.obj);
  EXPECT_EQ(body_of(again.obj), "abc");
}

TEST(Cache, CoalescingWaitersPassWhenUncacheable) {
  delivery::Store st;
  Cache c(st);
  Lookup first = c.lookup(get("/u"), nullptr, nullptr, T0);
  delivery::ReadyNotify n;
  EXPECT_EQ(c.lookup(get("/u"), &n, nullptr, T0).verdict, Verdict::wait);
  c.headers(first.obj, get("/u"), resp({{"Cache-Control", "private"}}), T0, nullptr);
  EXPECT_TRUE(n.take());
  EXPECT_EQ(c.lookup(get("/u"), nullptr, nullptr, T0).verdict, Verdict::hit_pass);
}

TEST(Cache, FailedFetchWakesWaitersIntoANewMiss) {
  delivery::Store st;
  Cache c(st);
  Lookup first = c.lookup(get("/f"), nullptr, nullptr, T0);
  delivery::ReadyNotify n;
  EXPECT_EQ(c.lookup(get("/f"), &n, nullptr, T0).verdict, Verdict::wait);
  c.fail(first.obj);
  EXPECT_TRUE(n.take());
  EXPECT_EQ(c.lookup(get("/f"), nullptr, nullptr, T0).verdict, Verdict::miss);
}

TEST(Cache, GraceServesStaleAndRefreshesOnce) {
  delivery::Store st;
  Cache c(st);
  ObjRef old;
  ASSERT_TRUE(fill(c, get("/g"), resp({{"Cache-Control", "max-age=10, stale-while-revalidate=60"}}), "old", T0, &old));
  Lookup a = c.lookup(get("/g"), nullptr, nullptr, T0 + 20);
  ASSERT_EQ(a.verdict, Verdict::hit);
  EXPECT_TRUE(a.stale);
  EXPECT_EQ(a.obj, old);
  ASSERT_TRUE(a.refresh);  // this one fetches in the background
  Lookup b = c.lookup(get("/g"), nullptr, nullptr, T0 + 21);
  EXPECT_EQ(b.verdict, Verdict::hit);
  EXPECT_TRUE(b.stale);
  EXPECT_FALSE(b.refresh);  // exactly one refresh
  c.headers(a.refresh, get("/g"), resp({{"Cache-Control", "max-age=10"}}), T0 + 22, nullptr);
  a.refresh->append("new", 3);
  c.finish(a.refresh);
  Lookup d = c.lookup(get("/g"), nullptr, nullptr, T0 + 23);
  ASSERT_EQ(d.verdict, Verdict::hit);
  EXPECT_FALSE(d.stale);
  EXPECT_EQ(body_of(d.obj), "new");
  EXPECT_EQ(c.objects(), 1u);  // the old one was replaced
  EXPECT_EQ(body_of(old), "old");  // readers of the old object keep it
}

TEST(Cache, PurgeExactAndRegex) {
  delivery::Store st;
  Cache c(st);
  for (const char* u : {"/img/a.png", "/img/b.png", "/css/x.css"}) ASSERT_TRUE(fill(c, get(u), resp({}), u, T0));
  auto gz = get("/img/a.png", {{"Accept-Encoding", "gzip"}});
  EXPECT_EQ(c.purge("example.com", "/nothing"), 0u);
  EXPECT_EQ(c.purge("Example.COM", "/css/x.css"), 1u);
  EXPECT_EQ(c.lookup(get("/css/x.css"), nullptr, nullptr, T0 + 1).verdict, Verdict::miss);
  EXPECT_EQ(c.purge_regex("^example\\.com/img/.*\\.png$"), 2u);
  EXPECT_EQ(c.lookup(gz, nullptr, nullptr, T0 + 1).verdict, Verdict::miss);
  EXPECT_THROW(c.purge_regex("(unclosed"), ringlog::RegexError);
  EXPECT_EQ(c.stats().purged.load(), 3u);
}

TEST(Cache, ConditionalRequests304) {
  delivery::Store st;
  Cache c(st);
  ObjRef o;
  std::string lm = format_http_date(T0 - 3600);
  ASSERT_TRUE(fill(c, get("/e"), resp({{"ETag", "\"v1\""}, {"Last-Modified", lm}, {"Content-Type", "text/plain"}}),
                   "body", T0, &o));
  const ObjMeta& m = static_cast<const ObjMeta&>(*o->meta);
  EXPECT_TRUE(not_modified(get("/e", {{"If-None-Match", "\"v0\", W/\"v1\""}}), m));
  EXPECT_TRUE(not_modified(get("/e", {{"If-None-Match", "*"}}), m));
  EXPECT_FALSE(not_modified(get("/e", {{"If-None-Match", "\"v2\""}}), m));
  std::string later = format_http_date(T0), earlier = format_http_date(T0 - 7200);
  EXPECT_TRUE(not_modified(get("/e", {{"If-Modified-Since", later}}), m));
  EXPECT_FALSE(not_modified(get("/e", {{"If-Modified-Since", earlier}}), m));
  EXPECT_FALSE(not_modified(get("/e", {{"If-Modified-Since", "junk"}}), m));
  // If-None-Match wins over If-Modified-Since.
  EXPECT_FALSE(not_modified(get("/e", {{"If-None-Match", "\"v2\""}, {"If-Modified-Since", later}}), m));
  DeliveryPlan p = plan_delivery(get("/e", {{"If-None-Match", "\"v1\""}}), o, T0, "");
  EXPECT_EQ(p.status, 304);
  EXPECT_FALSE(p.body);
  EXPECT_EQ(p.head.find("HTTP/1.1 304 Not Modified\r\n"), 0u);
  EXPECT_NE(p.head.find("ETag: \"v1\"\r\n"), std::string::npos);
  EXPECT_EQ(p.head.find("Content-Type"), std::string::npos);
  EXPECT_EQ(p.head.find("Content-Length"), std::string::npos);
}

TEST(Cache, RangePlansFromCache) {
  delivery::Store st;
  Cache c(st);
  std::string body = random_bytes(1000, 31);
  ObjRef o;
  ASSERT_TRUE(fill(c, get("/r"), resp({{"Content-Type", "application/octet-stream"}}), body, T0, &o));
  DeliveryPlan p = plan_delivery(get("/r", {{"Range", "bytes=100-199"}}), o, T0, "");
  EXPECT_EQ(p.status, 206);
  EXPECT_NE(p.head.find("Content-Range: bytes 100-199/1000\r\n"), std::string::npos);
  EXPECT_NE(p.head.find("Content-Length: 100\r\n"), std::string::npos);
  auto ch = make_chain(p, o, nullptr);
  std::string out;
  ASSERT_TRUE(drain(*ch, &out));
  EXPECT_TRUE(same(out, body.substr(100, 100)));
  p = plan_delivery(get("/r", {{"Range", "bytes=5000-"}}), o, T0, "");
  EXPECT_EQ(p.status, 416);
  EXPECT_FALSE(p.body);
  EXPECT_NE(p.head.find("Content-Range: bytes */1000\r\n"), std::string::npos);
  p = plan_delivery(get("/r", {{"Range", "bytes=0-1,10-11"}}), o, T0, "");
  EXPECT_EQ(p.status, 206);
  EXPECT_NE(p.head.find("Content-Type: multipart/byteranges; boundary="), std::string::npos);
  EXPECT_EQ(p.head.find("application/octet-stream"), std::string::npos);
  ch = make_chain(p, o, nullptr);
  out.clear();
  ASSERT_TRUE(drain(*ch, &out));
  EXPECT_EQ(out.size(), p.content_length);
  p = plan_delivery(get("/r", {{"Range", "lines=1-2"}}), o, T0, "X-Test: 1\r\n");
  EXPECT_EQ(p.status, 200);
  EXPECT_NE(p.head.find("Accept-Ranges: bytes\r\nContent-Length: 1000\r\nX-Test: 1\r\n\r\n"), std::string::npos);
}

TEST(Cache, LruEvictionUnindexesAndCounts) {
  delivery::Store st({.capacity = 64 << 10, .segment_size = 8 << 10});
  Cache c(st);
  std::string body(8000, 'b');
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(fill(c, get("/l" + std::to_string(i)), resp({}), body, T0 + i));
  EXPECT_EQ(c.objects(), 8u);
  EXPECT_EQ(c.lookup(get("/l0"), nullptr, nullptr, T0 + 9).verdict, Verdict::hit);  // /l0 is now recent
  ASSERT_TRUE(fill(c, get("/l8"), resp({}), body, T0 + 10));
  EXPECT_EQ(st.n_lru_nuked(), 1u);
  EXPECT_EQ(c.objects(), 8u);
  EXPECT_EQ(c.lookup(get("/l1"), nullptr, nullptr, T0 + 11).verdict, Verdict::miss);  // the LRU one went
  EXPECT_EQ(c.lookup(get("/l0"), nullptr, nullptr, T0 + 11).verdict, Verdict::hit);
  EXPECT_LE(st.used(), std::size_t(64 << 10));
}

TEST(Cache, ConcurrentMissesMakeOneFetch) {
  // 100 clients on two loop threads, one cold URL: one miss, 99 waits that stream the
  // same object as it arrives. Run under TSan.
  delivery::Store st({.segment_size = 4096});
  Cache c(st);
  std::string body = random_bytes(200000, 41);
  std::atomic<int> misses{0}, streamed{0}, bad{0};
  ObjRef fetch;
  std::mutex fm;
  delivery::LoopWaker fetch_wake;
  auto client_loop = [&](int nclients) {
    delivery::LoopWaker w;
    struct Cl {
      delivery::ReadyNotify n;
      std::unique_ptr<delivery::Chain> ch;
      std::string got;
      bool done = false;
    };
    std::vector<std::unique_ptr<Cl>> cls;
    for (int i = 0; i < nclients; ++i) {
      cls.push_back(std::make_unique<Cl>());
      cls.back()->n.waker = &w;
      cls.back()->n.ready.store(true);
    }
    int left = nclients;
    delivery::ScatterArray sa(8);
    while (left) {
      for (auto& cl : cls) {
        if (cl->done || !cl->n.take()) continue;
        if (!cl->ch) {
          Lookup l = c.lookup(get("/cold"), &cl->n, nullptr, T0);
          if (l.verdict == Verdict::wait) continue;  // armed on the busy object
          if (l.verdict == Verdict::miss) {
            misses.fetch_add(1);
            std::lock_guard lk(fm);
            fetch = l.obj;
            fetch_wake.wake();
          }
          cl->ch = std::make_unique<delivery::Chain>(l.obj, &cl->n);
        }
        while (true) {
          int r = cl->ch->pull(sa);
          for (std::size_t i = 0; i < sa.used(); ++i) cl->got.append((char*)sa.at(i).iov_base, sa.at(i).iov_len);
          bool end = sa.end();
          cl->ch->give_all(sa);
          cl->ch->flush_returns();
          if (end || r == delivery::kLeaseError) {
            cl->done = true;
            --left;
            if (cl->got == body) streamed.fetch_add(1);
            else bad.fetch_add(1);
            break;
          }
          if (r == delivery::kLeaseAgain) break;
        }
      }
      if (!left) break;
      pollfd p{w.fd(), POLLIN, 0};
      if (::poll(&p, 1, 20000) == 0) {
        bad.fetch_add(left);
        return;
      }
      w.drain();
    }
  };
  std::thread t1(client_loop, 50), t2(client_loop, 50);
  std::thread backend([&] {
    pollfd p{fetch_wake.fd(), POLLIN, 0};
    if (::poll(&p, 1, 20000) == 0) return;
    ObjRef o;
    {
      std::lock_guard lk(fm);
      o = fetch;
    }
    // The 99 other clients pile up on the busy object before its headers come (the
    // cache counts each wait) so that all of them stream it.
    EXPECT_TRUE(ringlog::test::wait_until([&] { return c.stats().waits.load() >= 99; })) << c.stats().waits.load();
    c.headers(o, get("/cold"), resp({{"Cache-Control", "max-age=60"}}), T0, nullptr);
    for (std::size_t i = 0; i < body.size(); i += 3000) {
      o->append(body.data() + i, std::min<std::size_t>(3000, body.size() - i));
      std::this_thread::yield();
    }
    c.finish(o);
  });
  t1.join();
  t2.join();
  backend.join();
  EXPECT_EQ(misses.load(), 1);
  EXPECT_EQ(streamed.load(), 100);
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(c.stats().miss.load(), 1u);
}
