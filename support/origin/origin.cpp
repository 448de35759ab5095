// ringlog_test_origin: a real HTTP/1.1 origin server for ringproxy's end-to-end tests
// and benchmarks. epoll, one loop per thread (SO_REUSEPORT), 127.0.0.1 only,
// keep-alive and pipelining (answers in order). It must never answer anything but
// what the URL asks for: tests assert on its bytes and on its request counts.
//
// URL scheme (every response has Server and Date; HEAD gets the head only):
//   /size/N              200, Content-Length N, N content bytes (see below)
//   /chunked/N[/CS]      200, chunked, N content bytes in chunks of CS (default 4096)
//   /close[/N]           200, no Content-Length, Connection: close, N bytes (default
//                        1000), then the origin closes (close-delimited body)
//   /status/NNN          status NNN (200..599), body "status NNN\n" (none for 204/304)
//   /echo                200, body = the raw request head followed by the decoded
//                        request body; chunked if the request was chunked, else
//                        Content-Length. Header X-Echo-Body-Bytes: request body size.
//   /slow/head/MS[/URL]  waits MS ms, then answers /URL (default: empty 200)
//   /slow/body/MS/N      head at once (Content-Length N), then one byte every MS ms
//                        (N <= 100000)
//   /cache/NAME[/DIR...] a cacheable object; each DIR segment adds to the response:
//                          max-age=S s-maxage=S no-store no-cache private public
//                          must-revalidate immutable  -> Cache-Control (joined)
//                          vary=H1,H2   -> Vary: H1, H2; the body lists the request's
//                                          values of those headers
//                          etag=T / weak-etag=T -> ETag "T" / W/"T"; If-None-Match
//                                          matching it -> 304
//                          lm[=EPOCH]   -> Last-Modified (default 1700000000);
//                                          If-Modified-Since at or after it -> 304
//                                          (when there is no If-None-Match)
//                          expires=S    -> Expires: now + S
//                          age=S        -> Age: S
//                          cookie       -> Set-Cookie: origin=1
//                          status=NNN   -> that status instead of 200
//                          size=N       -> body of N content bytes
//                          chunked      -> chunked framing instead of Content-Length
//                        default body: "cache NAME fetch K\n" (K: fetches of this URL)
//                        header X-Fetch-Count: K
//   /hang                reads the request, never answers
//   /drop[/N]            Content-Length N (default 1000), sends N/2 body bytes, closes
//   /drop/head           closes without sending a byte
//   /stats               JSON {"requests":R,"connections":C,"bad_requests":B,
//                        "urls":{"TARGET":count,...}}; not counted itself
//   /stats/reset         zeroes all counts; 200 "{}"
//   anything else        404
// Content byte i (0-based) is 'a' + (i + i/26 + i/676 + i/17576) % 26 (integer
// division): not periodic below 26^4 bytes, so a shifted or repeated block shows.
// A request the parser refuses gets 400 with Connection: close (counted in
// bad_requests). Exit codes: 0 stopped by SIGTERM/SIGINT, 1 runtime error,
// 2 bad command line or the port cannot be bound.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ringlog_cli11.hpp"

#include "ringproxy/http/http.hpp"

namespace http = ringproxy::http;

namespace {

constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

constexpr std::size_t kInCap = 1 << 20;      // stop reading a connection above this
constexpr std::size_t kOutHigh = 256 << 10;  // generated bodies fill up to this
constexpr int kLingerMs = 2000;              // after shutdown(SHUT_WR), wait for EOF this long

std::atomic<bool> g_stop{false};

// ---- shared counters ---------------------------------------------------------------

struct Stats {
  std::mutex mu;
  std::map<std::string, std::uint64_t, std::less<>> urls;
  std::uint64_t requests = 0;
  std::uint64_t connections = 0;
  std::uint64_t bad_requests = 0;

  std::uint64_t count(std::string_view target) {
    std::lock_guard<std::mutex> g(mu);
    ++requests;
    auto it = urls.find(target);
    if (it == urls.end()) it = urls.emplace(std::string(target), 0).first;
    return ++it->second;
  }
  void add_connection() {
    std::lock_guard<std::mutex> g(mu);
    ++connections;
  }
  void add_bad() {
    std::lock_guard<std::mutex> g(mu);
    ++bad_requests;
  }
  void reset() {
    std::lock_guard<std::mutex> g(mu);
    urls.clear();
    requests = connections = bad_requests = 0;
  }
  std::string json() {
    std::lock_guard<std::mutex> g(mu);
    std::string s = "{\"requests\":" + std::to_string(requests) + ",\"connections\":" + std::to_string(connections) +
                    ",\"bad_requests\":" + std::to_string(bad_requests) + ",\"urls\":{";
    bool first = true;
    for (const auto& [u, n] : urls) {
      if (!first) s += ',';
      first = false;
      s += '"';
      for (char c : u) {
        if (c == '"' || c == '\\') s += '\\';
        s += c;
      }
      s += "\":" + std::to_string(n);
    }
    return s + "}}\n";
  }
};
Stats g_stats;

// ---- content and small helpers -----------------------------------------------------

void append_content(std::string& out, std::uint64_t off, std::uint64_t n) {
  static constexpr char kTwice[] = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz";
  while (n) {
    std::uint64_t block = off / 26;  // the 26 bytes of an aligned block share i/26, i/676, i/17576
    unsigned base = static_cast<unsigned>((block + off / 676 + off / 17576) % 26);
    unsigned in_block = static_cast<unsigned>(off % 26);
    std::uint64_t take = std::min<std::uint64_t>(26 - in_block, n);
    out.append(kTwice + base + in_block, static_cast<std::size_t>(take));
    off += take;
    n -= take;
  }
}

std::string http_date(std::time_t t) {
  char buf[64];
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

std::optional<std::time_t> parse_http_date(std::string_view s) {
  std::tm tm{};
  std::string z(s);
  const char* end = strptime(z.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (!end || *end) return std::nullopt;
  return timegm(&tm);
}

std::optional<std::uint64_t> to_u64(std::string_view s) {
  std::uint64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> v;
  std::size_t q = path.find('?');
  if (q != std::string_view::npos) path = path.substr(0, q);
  while (!path.empty()) {
    if (path.front() == '/') {
      path.remove_prefix(1);
      continue;
    }
    std::size_t s = path.find('/');
    v.push_back(path.substr(0, s));
    if (s == std::string_view::npos) break;
    path.remove_prefix(s);
  }
  return v;
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---- per-connection response steps -------------------------------------------------

struct Step {
  enum Kind { Bytes, Gen, Close, Hang } kind = Bytes;
  int delay_ms = 0;    // wait this long once the step is first in line
  std::string bytes;   // Bytes
  std::uint64_t gen_left = 0, gen_off = 0;  // Gen: content bytes still to produce
  std::uint32_t chunk = 0;                  // Gen: chunk size, 0 = raw bytes
};

struct Conn {
  std::uint64_t id = 0;
  int fd = -1;
  std::uint32_t events = 0;  // current epoll interest
  std::string in;
  std::string out;
  std::size_t out_off = 0;
  http::RequestParser parser;
  http::RequestHead head;
  http::ChunkedDecoder dec;
  // The request being read.
  bool in_body = false;
  bool chunked = false;
  std::uint64_t body_left = 0;
  std::string raw_head;  // owned copy: dispatch re-parses it
  std::string body;
  bool expect_continue = false;
  bool sent_continue = false;
  // Responses queued, in order.
  std::deque<Step> steps;
  bool timer_armed = false;
  bool peer_eof = false;
  bool lingering = false;  // write side shut, reading until EOF
  bool dead = false;
  std::size_t pending() const { return out.size() - out_off; }
};

class Loop;

struct Request {
  http::RequestHead head;
  std::string raw_head;
  std::string body;
  bool chunked = false;
};

void add_common(std::string& out) {
  // Date changes once a second: format it once a second per thread.
  thread_local std::time_t cached_at = 0;
  thread_local std::string cached;
  std::time_t now = std::time(nullptr);
  if (now != cached_at) {
    cached_at = now;
    cached = http_date(now);
  }
  http::write_header(out, "Server", "ringlog-test-origin");
  http::write_header(out, "Date", cached);
}

// Connection: close when closing; keep-alive to an HTTP/1.0 client that asked for it.
void write_connection(std::string& out, const http::RequestHead& h, bool close) {
  if (close) http::write_header(out, "Connection", "close");
  else if (h.version_minor == 0) http::write_header(out, "Connection", "keep-alive");
}

// Builds the steps answering `req` for `target` (which /slow/head may have rewritten).
void respond(Conn& c, const Request& req, std::string_view target, bool count) {
  const bool head_only = req.head.method == http::Method::Head;
  const bool close = !req.head.keep_alive;
  std::uint64_t fetches = count ? g_stats.count(target) : 0;
  auto seg = split_path(target);
  auto simple = [&](int status, std::string_view body, std::string_view ctype = "text/plain") {
    Step s;
    http::write_status_line(s.bytes, status);
    add_common(s.bytes);
    http::write_header(s.bytes, "Content-Type", ctype);
    bool bodyless = status == 204 || status == 304;
    if (!bodyless) http::write_header(s.bytes, "Content-Length", std::uint64_t{body.size()});
    write_connection(s.bytes, req.head, close);
    http::end_head(s.bytes);
    if (!head_only && !bodyless) s.bytes.append(body);
    c.steps.push_back(std::move(s));
    if (close) c.steps.push_back(Step{Step::Close, 0, {}, 0, 0, 0});
  };
  // Head + generated content (Content-Length or chunked).
  auto generated = [&](int status, std::uint64_t n, std::uint32_t chunk, std::string_view extra = {}) {
    Step h;
    http::write_status_line(h.bytes, status);
    add_common(h.bytes);
    h.bytes.append(extra);
    if (chunk) http::write_header(h.bytes, "Transfer-Encoding", "chunked");
    else http::write_header(h.bytes, "Content-Length", n);
    write_connection(h.bytes, req.head, close);
    http::end_head(h.bytes);
    c.steps.push_back(std::move(h));
    if (!head_only) {
      Step g{Step::Gen, 0, {}, n, 0, chunk};
      c.steps.push_back(std::move(g));
    }
    if (close) c.steps.push_back(Step{Step::Close, 0, {}, 0, 0, 0});
  };

  if (seg.empty()) return simple(404, "not found\n");
  std::string_view top = seg[0];
  if (top == "stats" && seg.size() == 1) return simple(200, g_stats.json(), "application/json");
  if (top == "stats" && seg.size() == 2 && seg[1] == "reset") {
    g_stats.reset();
    return simple(200, "{}\n", "application/json");
  }
  if (top == "size" && seg.size() == 2) {
    if (auto n = to_u64(seg[1])) return generated(200, *n, 0);
    return simple(400, "bad size\n");
  }
  if (top == "chunked" && (seg.size() == 2 || seg.size() == 3)) {
    auto n = to_u64(seg[1]);
    auto cs = seg.size() == 3 ? to_u64(seg[2]) : std::optional<std::uint64_t>(4096);
    if (!n || !cs || *cs == 0 || *cs > (1u << 24)) return simple(400, "bad chunked size\n");
    return generated(200, *n, static_cast<std::uint32_t>(*cs));
  }
  if (top == "close" && seg.size() <= 2) {
    std::uint64_t n = 1000;
    if (seg.size() == 2) {
      auto v = to_u64(seg[1]);
      if (!v) return simple(400, "bad size\n");
      n = *v;
    }
    Step h;
    http::write_status_line(h.bytes, 200);
    add_common(h.bytes);
    http::write_header(h.bytes, "Connection", "close");
    http::end_head(h.bytes);
    c.steps.push_back(std::move(h));
    if (!head_only) c.steps.push_back(Step{Step::Gen, 0, {}, n, 0, 0});
    c.steps.push_back(Step{Step::Close, 0, {}, 0, 0, 0});
    return;
  }
  if (top == "status" && seg.size() == 2) {
    auto s = to_u64(seg[1]);
    if (!s || *s < 200 || *s > 599) return simple(400, "bad status\n");
    return simple(static_cast<int>(*s), "status " + std::string(seg[1]) + "\n");
  }
  if (top == "echo" && seg.size() == 1) {
    std::string body = req.raw_head + req.body;
    Step s;
    http::write_status_line(s.bytes, 200);
    add_common(s.bytes);
    http::write_header(s.bytes, "Content-Type", "text/plain");
    http::write_header(s.bytes, "X-Echo-Body-Bytes", std::uint64_t{req.body.size()});
    if (req.chunked) http::write_header(s.bytes, "Transfer-Encoding", "chunked");
    else http::write_header(s.bytes, "Content-Length", std::uint64_t{body.size()});
    write_connection(s.bytes, req.head, close);
    http::end_head(s.bytes);
    if (!head_only) {
      if (req.chunked) {
        http::append_chunk(s.bytes, body);
        s.bytes.append(http::kLastChunk);
      } else {
        s.bytes.append(body);
      }
    }
    c.steps.push_back(std::move(s));
    if (close) c.steps.push_back(Step{Step::Close, 0, {}, 0, 0, 0});
    return;
  }
  if (top == "slow" && seg.size() >= 3 && seg[1] == "head") {
    auto ms = to_u64(seg[2]);
    if (!ms || *ms > 600000) return simple(400, "bad delay\n");
    std::size_t first_new = c.steps.size();
    std::string rest;
    for (std::size_t i = 3; i < seg.size(); ++i) rest += "/" + std::string(seg[i]);
    if (rest.empty()) simple(200, "");
    else respond(c, req, rest, false);
    if (first_new < c.steps.size()) c.steps[first_new].delay_ms = static_cast<int>(*ms);
    return;
  }
  if (top == "slow" && seg.size() == 4 && seg[1] == "body") {
    auto ms = to_u64(seg[2]);
    auto n = to_u64(seg[3]);
    if (!ms || !n || *ms > 600000 || *n > 100000) return simple(400, "bad slow body\n");
    Step h;
    http::write_status_line(h.bytes, 200);
    add_common(h.bytes);
    http::write_header(h.bytes, "Content-Length", *n);
    write_connection(h.bytes, req.head, close);
    http::end_head(h.bytes);
    c.steps.push_back(std::move(h));
    if (!head_only) {
      std::string all;
      append_content(all, 0, *n);
      for (char ch : all) {
        Step b;
        b.delay_ms = static_cast<int>(*ms);
        b.bytes.assign(1, ch);
        c.steps.push_back(std::move(b));
      }
    }
    if (close) c.steps.push_back(Step{Step::Close, 0, {}, 0, 0, 0});
    return;
  }
  if (top == "hang" && seg.size() == 1) {
    c.steps.push_back(Step{Step::Hang, 0, {}, 0, 0, 0});
    return;
  }
  if (top == "drop") {
    if (seg.size() == 2 && seg[1] == "head") {
      c.steps.push_back(Step{Step::Close, 0, {}, 0, 0, 0});
      return;
    }
    std::uint64_t n = 1000;
    if (seg.size() == 2) {
      auto v = to_u64(seg[1]);
      if (!v || *v == 0) return simple(400, "bad size\n");
      n = *v;
    }
    Step h;
    http::write_status_line(h.bytes, 200);
    add_common(h.bytes);
    http::write_header(h.bytes, "Content-Length", n);
    http::end_head(h.bytes);
    append_content(h.bytes, 0, n / 2);
    c.steps.push_back(std::move(h));
    c.steps.push_back(Step{Step::Close, 0, {}, 0, 0, 0});
    return;
  }
  if (top == "cache" && seg.size() >= 2) {
    std::string cc, vary, etag, extra;
    std::optional<std::time_t> lm;
    std::optional<std::uint64_t> size;
    int status = 200;
    bool chunked = false;
    for (std::size_t i = 2; i < seg.size(); ++i) {
      std::string_view d = seg[i];
      std::size_t eq = d.find('=');
      std::string_view key = d.substr(0, eq);
      std::string_view val = eq == std::string_view::npos ? std::string_view{} : d.substr(eq + 1);
      auto num = to_u64(val);
      auto add_cc = [&](std::string_view v) {
        if (!cc.empty()) cc += ", ";
        cc += v;
      };
      if ((key == "max-age" || key == "s-maxage") && num) add_cc(d);
      else if (eq == std::string_view::npos && (key == "no-store" || key == "no-cache" || key == "private" ||
                                                key == "public" || key == "must-revalidate" || key == "immutable"))
        add_cc(d);
      else if (key == "vary" && !val.empty()) {
        for (char ch : val) vary += ch == ',' ? std::string(", ") : std::string(1, ch);
      } else if (key == "etag" && !val.empty()) etag = "\"" + std::string(val) + "\"";
      else if (key == "weak-etag" && !val.empty()) etag = "W/\"" + std::string(val) + "\"";
      else if (key == "lm") lm = eq == std::string_view::npos ? 1700000000 : static_cast<std::time_t>(num.value_or(0));
      else if (key == "expires" && num) extra += "Expires: " + http_date(std::time(nullptr) + static_cast<std::time_t>(*num)) + "\r\n";
      else if (key == "age" && num) extra += "Age: " + std::string(val) + "\r\n";
      else if (key == "cookie" && eq == std::string_view::npos) extra += "Set-Cookie: origin=1\r\n";
      else if (key == "status" && num && *num >= 200 && *num <= 599) status = static_cast<int>(*num);
      else if (key == "size" && num) size = num;
      else if (key == "chunked" && eq == std::string_view::npos) chunked = true;
      else return simple(400, "bad cache directive " + std::string(d) + "\n");
    }
    if (!cc.empty()) extra += "Cache-Control: " + cc + "\r\n";
    if (!vary.empty()) extra += "Vary: " + vary + "\r\n";
    if (!etag.empty()) extra += "ETag: " + etag + "\r\n";
    std::string lm_text = lm ? http_date(*lm) : std::string();
    if (lm) extra += "Last-Modified: " + lm_text + "\r\n";
    extra += "X-Fetch-Count: " + std::to_string(fetches) + "\r\n";
    // Conditional requests (RFC 9110 §13.2.2: If-None-Match first).
    bool not_modified = false;
    if (const http::Header* inm = req.head.headers.find("If-None-Match"); inm && !etag.empty()) {
      auto strip_weak = [](std::string_view t) { return t.substr(0, 2) == "W/" ? t.substr(2) : t; };
      std::string_view mine = strip_weak(etag);
      std::string_view v = inm->value;
      while (!v.empty()) {
        std::size_t comma = v.find(',');
        std::string_view t = v.substr(0, comma);
        while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
        while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
        if (t == "*" || strip_weak(t) == mine) not_modified = true;
        if (comma == std::string_view::npos) break;
        v.remove_prefix(comma + 1);
      }
    } else if (const http::Header* ims = req.head.headers.find("If-Modified-Since"); ims && lm) {
      if (auto t = parse_http_date(ims->value); t && *t >= *lm) not_modified = true;
    }
    if (not_modified && (req.head.method == http::Method::Get || head_only)) {
      Step s;
      http::write_status_line(s.bytes, 304);
      add_common(s.bytes);
      s.bytes.append(extra);
      write_connection(s.bytes, req.head, close);
      http::end_head(s.bytes);
      c.steps.push_back(std::move(s));
      if (close) c.steps.push_back(Step{Step::Close, 0, {}, 0, 0, 0});
      return;
    }
    if (size) return generated(status, *size, chunked ? 4096 : 0, extra);
    std::string body = "cache " + std::string(seg[1]) + " fetch " + std::to_string(fetches) + "\n";
    if (!vary.empty()) {
      for (std::string_view v = vary; !v.empty();) {
        std::size_t comma = v.find(',');
        std::string_view name = v.substr(0, comma);
        while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
        const http::Header* h = req.head.headers.find(name);
        body += std::string(name) + ": " + (h ? std::string(h->value) : std::string("(none)")) + "\n";
        if (comma == std::string_view::npos) break;
        v.remove_prefix(comma + 1);
      }
    }
    if (chunked) {
      Step s;
      http::write_status_line(s.bytes, status);
      add_common(s.bytes);
      s.bytes.append(extra);
      http::write_header(s.bytes, "Transfer-Encoding", "chunked");
      write_connection(s.bytes, req.head, close);
      http::end_head(s.bytes);
      if (!head_only) {
        http::append_chunk(s.bytes, body);
        s.bytes.append(http::kLastChunk);
      }
      c.steps.push_back(std::move(s));
      if (close) c.steps.push_back(Step{Step::Close, 0, {}, 0, 0, 0});
      return;
    }
    Step s;
    http::write_status_line(s.bytes, status);
    add_common(s.bytes);
    s.bytes.append(extra);
    http::write_header(s.bytes, "Content-Length", std::uint64_t{body.size()});
    write_connection(s.bytes, req.head, close);
    http::end_head(s.bytes);
    if (!head_only) s.bytes.append(body);
    c.steps.push_back(std::move(s));
    if (close) c.steps.push_back(Step{Step::Close, 0, {}, 0, 0, 0});
    return;
  }
  simple(404, "not found\n");
}

// ---- the event loop ----------------------------------------------------------------

class Loop {
 public:
  Loop(int listen_fd, int stop_fd) : listen_fd_(listen_fd), stop_fd_(stop_fd) {}

  int run() {
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) return perror_ret("epoll_create1");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenId;
    if (epoll_ctl(ep_, EPOLL_CTL_ADD, listen_fd_, &ev) < 0) return perror_ret("epoll_ctl listen");
    ev.data.u64 = kStopId;
    if (epoll_ctl(ep_, EPOLL_CTL_ADD, stop_fd_, &ev) < 0) return perror_ret("epoll_ctl stop");
    epoll_event evs[256];
    while (!g_stop.load(std::memory_order_relaxed)) {
      int timeout = -1;
      if (!timers_.empty()) {
        std::int64_t d = timers_.top().due - now_ms();
        timeout = d < 0 ? 0 : static_cast<int>(std::min<std::int64_t>(d, 60000));
      }
      int n = epoll_wait(ep_, evs, 256, timeout);
      if (n < 0) {
        if (errno == EINTR) continue;
        return perror_ret("epoll_wait");
      }
      for (int i = 0; i < n; ++i) {
        std::uint64_t id = evs[i].data.u64;
        if (id == kStopId) return 0;
        if (id == kListenId) {
          accept_all();
          continue;
        }
        auto it = conns_.find(id);
        if (it == conns_.end()) continue;
        Conn& c = *it->second;
        if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) read_some(c);
        drive(c);
      }
      fire_timers();
    }
    return 0;
  }

  ~Loop() {
    for (auto& [id, c] : conns_) ::close(c->fd);
    if (ep_ >= 0) ::close(ep_);
  }

 private:
  static constexpr std::uint64_t kListenId = 0;
  static constexpr std::uint64_t kStopId = 1;

  struct Timer {
    std::int64_t due;
    std::uint64_t conn;
    bool operator>(const Timer& o) const { return due > o.due; }
  };

  static int perror_ret(const char* what) {
    std::fprintf(stderr, "ringlog_test_origin: %s: %s\n", what, std::strerror(errno));
    return kExitRuntime;
  }

  void accept_all() {
    while (true) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or a transient error: the listener stays armed
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      auto c = std::make_unique<Conn>();
      c->id = next_id_++;
      c->fd = fd;
      c->events = EPOLLIN | EPOLLRDHUP;
      epoll_event ev{};
      ev.events = c->events;
      ev.data.u64 = c->id;
      if (epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) < 0) {
        ::close(fd);
        continue;
      }
      g_stats.add_connection();
      conns_.emplace(c->id, std::move(c));
    }
  }

  void read_some(Conn& c) {
    if (c.peer_eof) return;
    char buf[65536];
    ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n > 0) {
      if (!c.lingering) c.in.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0) {
      c.peer_eof = true;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      c.dead = true;
    }
  }

  // Reads requests off c.in while no response is waiting; returns whether it did anything.
  bool parse_requests(Conn& c) {
    bool progress = false;
    while (c.steps.empty() && !c.dead && !c.lingering) {
      if (!c.in_body) {
        if (c.in.empty()) break;
        http::ParseResult r = c.parser.parse(c.in, c.head);
        if (r.need_more()) break;
        if (r.failed()) {
          g_stats.add_bad();
          Step s;
          http::write_status_line(s.bytes, r.http_status);
          add_common(s.bytes);
          std::string body = std::string(http::error_reason(r.error)) + "\n";
          http::write_header(s.bytes, "Content-Length", std::uint64_t{body.size()});
          http::write_header(s.bytes, "Connection", "close");
          http::end_head(s.bytes);
          s.bytes += body;
          c.steps.push_back(std::move(s));
          c.steps.push_back(Step{Step::Close, 0, {}, 0, 0, 0});
          c.in.clear();
          return true;
        }
        c.raw_head.assign(c.in, 0, r.consumed);
        c.chunked = c.head.body == http::BodyKind::Chunked;
        c.body_left = c.head.body == http::BodyKind::Length ? c.head.content_length : 0;
        c.body.clear();
        c.sent_continue = false;
        c.expect_continue = c.head.expect_continue;  // c.head's views die with the erase
        c.in.erase(0, r.consumed);
        c.in_body = true;
        if (c.chunked) c.dec.reset();
        progress = true;
      }
      // Body.
      bool complete = false;
      if (c.chunked) {
        while (!c.in.empty()) {
          auto s = c.dec.step(c.in);
          if (s.kind == http::ChunkedDecoder::Step::Failed) {
            g_stats.add_bad();
            c.dead = true;  // nothing sensible to answer mid-body
            return true;
          }
          if (s.kind == http::ChunkedDecoder::Step::Data) c.body.append(s.data);
          c.in.erase(0, s.consumed);
          progress |= s.consumed > 0;
          if (s.kind == http::ChunkedDecoder::Step::Done) {
            complete = true;
            break;
          }
          if (s.kind == http::ChunkedDecoder::Step::NeedMore) break;
        }
      } else {
        std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(c.body_left, c.in.size()));
        c.body.append(c.in, 0, k);
        c.in.erase(0, k);
        c.body_left -= k;
        progress |= k > 0;
        complete = c.body_left == 0;
      }
      if (!complete) {
        // RFC 9110 §10.1.1: answer 100 Continue when the client waits for it.
        if (c.expect_continue && !c.sent_continue && c.in.empty()) {
          c.sent_continue = true;
          c.out.append("HTTP/1.1 100 Continue\r\n\r\n");
          progress = true;
        }
        break;
      }
      c.in_body = false;
      Request req;
      req.raw_head = std::move(c.raw_head);
      req.body = std::move(c.body);
      req.chunked = c.chunked;
      http::RequestParser p;
      http::ParseResult r = p.parse(req.raw_head, req.head);
      if (!r.done()) {  // cannot happen: the same bytes parsed before
        c.dead = true;
        return true;
      }
      respond(c, req, req.head.target, !is_stats(req.head.target));
      c.raw_head.clear();
      c.body.clear();
      progress = true;
    }
    return progress;
  }

  static bool is_stats(std::string_view t) { return t == "/stats" || t == "/stats/reset"; }

  // Runs queued steps as far as time and output space allow.
  bool run_steps(Conn& c) {
    bool progress = false;
    while (!c.steps.empty()) {
      Step& s = c.steps.front();
      if (s.delay_ms > 0) {
        if (!c.timer_armed) {
          c.timer_armed = true;
          timers_.push({now_ms() + s.delay_ms, c.id});
        }
        return progress;
      }
      switch (s.kind) {
        case Step::Bytes:
          c.out.append(s.bytes);
          c.steps.pop_front();
          progress = true;
          break;
        case Step::Gen: {
          if (c.pending() >= kOutHigh) return progress;
          while (s.gen_left && c.pending() < kOutHigh) {
            std::uint64_t n = std::min<std::uint64_t>(s.gen_left, s.chunk ? s.chunk : 64 * 1024);
            if (s.chunk) {
              char h[http::kChunkHeaderMax];
              c.out.append(h, http::chunk_header(h, n));
            }
            append_content(c.out, s.gen_off, n);
            if (s.chunk) c.out.append(http::kChunkDataEnd);
            s.gen_off += n;
            s.gen_left -= n;
          }
          progress = true;
          if (s.gen_left) return progress;
          if (s.chunk) c.out.append(http::kLastChunk);
          c.steps.pop_front();
          break;
        }
        case Step::Close:
          if (c.pending()) return progress;
          start_linger(c);
          c.steps.clear();
          return true;
        case Step::Hang:
          return progress;
      }
    }
    return progress;
  }

  void start_linger(Conn& c) {
    ::shutdown(c.fd, SHUT_WR);
    c.lingering = true;
    c.in.clear();
    timers_.push({now_ms() + kLingerMs, c.id});
    c.timer_armed = true;
  }

  std::size_t write_out(Conn& c) {
    std::size_t total = 0;
    while (c.pending()) {
      ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.pending(), MSG_NOSIGNAL);
      if (n > 0) {
        c.out_off += static_cast<std::size_t>(n);
        total += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0 && errno == EINTR) continue;
      c.dead = true;
      break;
    }
    if (!c.pending()) {
      c.out.clear();
      c.out_off = 0;
    } else if (c.out_off > (1u << 20)) {
      c.out.erase(0, c.out_off);
      c.out_off = 0;
    }
    return total;
  }

  void drive(Conn& c) {
    // Until nothing moves: pipelined requests already read must not wait for an event.
    while (!c.dead) {
      bool p = run_steps(c);
      p |= parse_requests(c);
      p |= write_out(c) > 0;
      if (!p) break;
    }
    if (c.dead || (c.peer_eof && c.lingering) ||
        (c.peer_eof && !c.pending() && (c.steps.empty() || c.steps.front().kind == Step::Hang))) {
      close_conn(c);
      return;
    }
    // After the peer's FIN, EPOLLIN/EPOLLRDHUP would fire on every wait (level
    // triggered) while a delayed answer is pending: stop asking for them.
    std::uint32_t want = c.peer_eof ? 0u : static_cast<std::uint32_t>(EPOLLRDHUP);
    if (!c.peer_eof && c.in.size() < kInCap) want |= EPOLLIN;
    if (c.pending()) want |= EPOLLOUT;
    if (want != c.events) {
      c.events = want;
      epoll_event ev{};
      ev.events = want;
      ev.data.u64 = c.id;
      epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev);
    }
  }

  void fire_timers() {
    std::int64_t now = now_ms();
    while (!timers_.empty() && timers_.top().due <= now) {
      Timer t = timers_.top();
      timers_.pop();
      auto it = conns_.find(t.conn);
      if (it == conns_.end()) continue;
      Conn& c = *it->second;
      c.timer_armed = false;
      if (c.lingering) {
        close_conn(c);
        continue;
      }
      if (!c.steps.empty()) c.steps.front().delay_ms = 0;
      drive(c);
    }
  }

  void close_conn(Conn& c) {
    epoll_ctl(ep_, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    conns_.erase(c.id);
  }

  int listen_fd_;
  int stop_fd_;
  int ep_ = -1;
  std::uint64_t next_id_ = 2;
  std::unordered_map<std::uint64_t, std::unique_ptr<Conn>> conns_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
};

int make_listener(std::uint16_t port, std::string& err) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    err = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 || ::listen(fd, 1024) < 0) {
    err = "cannot listen on 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringlog_test_origin: HTTP/1.1 origin server for ringproxy tests and benchmarks (127.0.0.1 only).\n"
               "The URL scheme is documented in support/origin/README.md."};
  int port = 0;
  unsigned threads = 1;
  std::string port_file;
  app.add_option("-p,--port", port, "TCP port on 127.0.0.1; 0 picks a free one (default)")->check(CLI::Range(0, 65535));
  app.add_option("-t,--threads", threads, "Event-loop threads, each with its own SO_REUSEPORT listener (default 1)")
      ->check(CLI::Range(1, 64));
  app.add_option("--port-file", port_file, "Also write the chosen port to this file (for scripts)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return e.get_exit_code() == 0 ? rc : kExitUsage;
  }

  ::signal(SIGPIPE, SIG_IGN);
  // SIGTERM/SIGINT are taken by a thread that wakes the loops through an eventfd.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  std::string err;
  std::vector<int> listeners;
  int first = make_listener(static_cast<std::uint16_t>(port), err);
  if (first < 0) {
    std::fprintf(stderr, "ringlog_test_origin: %s\n", err.c_str());
    return kExitUsage;
  }
  sockaddr_in a{};
  socklen_t alen = sizeof a;
  getsockname(first, reinterpret_cast<sockaddr*>(&a), &alen);
  std::uint16_t chosen = ntohs(a.sin_port);
  listeners.push_back(first);
  for (unsigned i = 1; i < threads; ++i) {
    int fd = make_listener(chosen, err);
    if (fd < 0) {
      std::fprintf(stderr, "ringlog_test_origin: %s\n", err.c_str());
      return kExitUsage;
    }
    listeners.push_back(fd);
  }
  int stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) {
    std::perror("ringlog_test_origin: eventfd");
    return kExitRuntime;
  }
  if (!port_file.empty()) {
    std::string tmp = port_file + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f || std::fprintf(f, "%u\n", chosen) < 0 || std::fclose(f) != 0 || std::rename(tmp.c_str(), port_file.c_str()) != 0) {
      std::fprintf(stderr, "ringlog_test_origin: cannot write %s: %s\n", port_file.c_str(), std::strerror(errno));
      return kExitUsage;
    }
  }
  std::printf("ringlog_test_origin listening on 127.0.0.1:%u\n", chosen);
  std::fflush(stdout);

  std::thread sig([&] {
    int s = 0;
    sigwait(&set, &s);
    g_stop.store(true, std::memory_order_relaxed);
    std::uint64_t one = 1;
    if (::write(stop_fd, &one, sizeof one) < 0) std::perror("ringlog_test_origin: eventfd write");
  });
  sig.detach();

  std::vector<std::thread> loops;
  std::atomic<int> rc{kExitOk};
  for (int fd : listeners) {
    loops.emplace_back([fd, stop_fd, &rc] {
      Loop loop(fd, stop_fd);
      int r = loop.run();
      if (r != kExitOk) {
        rc.store(r);
        g_stop.store(true);
        std::uint64_t one = 1;
        if (::write(stop_fd, &one, sizeof one) < 0) std::perror("ringlog_test_origin: eventfd write");
      }
    });
  }
  for (auto& t : loops) t.join();
  for (int fd : listeners) ::close(fd);
  return rc.load();
}
