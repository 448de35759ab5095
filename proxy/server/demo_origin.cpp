// The built-in demo origin as a backend connection (see demo_origin.hpp): the request
// goes in through send(), the response comes out of recv(), as on a socket.
#include "demo_origin.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "values.hpp"

namespace ringproxy {

namespace {

constexpr std::uint64_t kDemoMaxBody = 1ull << 30;

// 64 KiB of the body pattern: the body repeats it.
const std::string& pattern() {
  static const std::string s = [] {
    std::string p;
    for (int i = 0; i < 64 * 1024; ++i) p += char('a' + (i % 26));
    return p;
  }();
  return s;
}

}  // namespace

DemoObject demo_object(std::string_view target) {
  DemoObject o;
  std::string_view path = target, query;
  if (auto q = target.find('?'); q != std::string_view::npos) {
    path = target.substr(0, q);
    query = target.substr(q + 1);
  }
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] < '0' || path[i] > '9') continue;
    // The digits and a k or m right after them, read by the rule of every size.
    std::size_t j = i;
    while (j < path.size() && path[j] >= '0' && path[j] <= '9') ++j;
    if (j < path.size() && (path[j] == 'k' || path[j] == 'K' || path[j] == 'm' || path[j] == 'M')) ++j;
    std::optional<std::uint64_t> v = ringlog::tool::parse_size(path.substr(i, j - i), kDemoMaxBody);
    o.size = v ? *v : kDemoMaxBody;  // larger: the largest
    break;
  }
  if (path.find("private") != std::string_view::npos || path.find("nocache") != std::string_view::npos)
    o.cache_control = "private, no-store";
  if (auto t = query.find("ttl="); t != std::string_view::npos) {
    std::uint64_t v = 0;
    for (std::size_t j = t + 4; j < query.size() && query[j] >= '0' && query[j] <= '9'; ++j) v = v * 10 + std::uint64_t(query[j] - '0');
    o.cache_control = "public, max-age=" + std::to_string(v);
  }
  return o;
}

char demo_body_byte(std::uint64_t offset) noexcept { return pattern()[std::size_t(offset % pattern().size())]; }

DemoConn::DemoConn(Worker& w, Backend& b) : BackendConn(w, b) {
  can_write = true;  // "connected" at once
  uses = 1;
}

void DemoConn::log_open(ringlog::Txn& bereq, bool) { bereq.record(ringlog::Tag::BackendOpen, "-1 demo - - - -"); }

bool DemoConn::send(Buf& b, bool& blocked, std::uint64_t* sent) {
  blocked = false;
  if (sent) *sent += b.size();
  if (!answering_) request_.append(b.view());  // bytes past the request are dropped
  b.clear();
  if (!have_head_ && !take_head()) return true;
  if (!answering_) take_body();
  return true;
}

// The request head is ours (the fetch built it): the request line, then a
// Content-Length or "Transfer-Encoding: chunked" field when a body follows.
bool DemoConn::take_head() {
  std::size_t end = request_.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  std::string_view head(request_.data(), end + 2);
  std::size_t sp1 = head.find(' '), sp2 = head.find(' ', sp1 + 1);
  head_method_ = head.substr(0, sp1) == "HEAD";
  target_.assign(head.substr(sp1 + 1, sp2 - sp1 - 1));
  for (std::size_t pos = head.find("\r\n") + 2; pos < head.size();) {
    std::size_t eol = head.find("\r\n", pos);
    std::string_view line = head.substr(pos, eol - pos);
    std::size_t colon = line.find(':');
    std::string_view name = line.substr(0, colon), value = colon == line.npos ? "" : line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (http::iequals(name, "Content-Length")) {
      body_ = http::BodyKind::Length;
      body_left_ = std::strtoull(std::string(value).c_str(), nullptr, 10);
    } else if (http::iequals(name, "Transfer-Encoding")) {
      body_ = http::BodyKind::Chunked;
      chunked_.reset();
    }
    pos = eol + 2;
  }
  request_.erase(0, end + 4);
  have_head_ = true;
  return true;
}

// Like a real origin, the demo reads the whole request body before answering.
void DemoConn::take_body() {
  if (body_ == http::BodyKind::Length) {
    std::size_t n = std::size_t(std::min<std::uint64_t>(body_left_, request_.size()));
    body_left_ -= n;
    request_.erase(0, n);
    if (body_left_ == 0) answer();
    return;
  }
  if (body_ == http::BodyKind::Chunked) {
    std::string_view in = request_;
    std::size_t used = 0;
    for (;;) {
      auto s = chunked_.step(in.substr(used));
      used += s.consumed;
      if (s.kind == http::ChunkedDecoder::Step::Data) continue;
      if (s.kind == http::ChunkedDecoder::Step::Done || s.kind == http::ChunkedDecoder::Step::Failed) {
        request_.erase(0, used);
        answer();
        return;
      }
      break;  // NeedMore
    }
    request_.erase(0, used);
    return;
  }
  answer();
}

void DemoConn::answer() {
  DemoObject o = demo_object(target_);
  response_head_ = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(o.size) +
                   "\r\nCache-Control: " + o.cache_control + "\r\nContent-Type: application/octet-stream\r\n\r\n";
  body_size_ = head_method_ ? 0 : o.size;
  answering_ = true;
  can_read = true;
  request_.clear();
}

ssize_t DemoConn::recv(Buf& b) {
  std::size_t left_head = response_head_.size() - head_sent_;
  std::uint64_t left_body = body_size_ - body_sent_;
  if (!answering_ || (left_head == 0 && left_body == 0)) {
    errno = EAGAIN;
    return -1;
  }
  b.make_room(kReadChunk);
  std::size_t room = b.room(), n = 0;
  if (left_head) {
    n = std::min(room, left_head);
    std::memcpy(b.tail(), response_head_.data() + head_sent_, n);
    head_sent_ += n;
  }
  const std::string& p = pattern();
  while (n < room && body_sent_ < body_size_) {
    std::size_t at = std::size_t(body_sent_ % p.size());
    std::size_t k = std::size_t(std::min<std::uint64_t>({room - n, p.size() - at, body_size_ - body_sent_}));
    std::memcpy(b.tail() + n, p.data() + at, k);
    n += k;
    body_sent_ += k;
  }
  b.wr += n;
  return ssize_t(n);
}

}  // namespace ringproxy
