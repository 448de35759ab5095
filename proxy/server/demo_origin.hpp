// The built-in demo origin (no -b given): one kind of backend, reached through a
// connection without a socket. It reads the backend request the fetch sends (head and
// body, as a real origin does), then answers: the first number in the path is the body
// size (k/m suffixes; default 1024, at most 1 GiB); "ttl=N" in the query sets max-age,
// a path with "private" or "nocache" is uncacheable, anything else is cacheable for
// 60 s. May call nothing but the HTTP codec.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "backend.hpp"
#include "ringproxy/http/http.hpp"

namespace ringproxy {

// What the demo origin answers for a request target.
struct DemoObject {
  std::uint64_t size = 1024;
  std::string cache_control = "public, max-age=60";
  int status = 200;
};
DemoObject demo_object(std::string_view target);

// The demo origin's body: byte i is 'a' + (i % 65536) % 26.
char demo_body_byte(std::uint64_t offset) noexcept;

class DemoConn final : public BackendConn {
 public:
  DemoConn(Worker& w, Backend& b);
  int fd() const noexcept override { return -1; }
  int release_fd() noexcept override { return -1; }
  int connect_error() noexcept override { return 0; }
  bool send(Buf& b, bool& blocked, std::uint64_t* sent) override;
  ssize_t recv(Buf& b) override;
  void log_open(ringlog::Txn& bereq, bool reused) override;
  void log_close(ringlog::Txn&, bool) override {}  // nothing was opened
  bool self_driven() const noexcept override { return true; }
  void on_event(std::uint32_t) override {}  // never in an epoll set

 private:
  bool take_head();   // parses the request head once it is complete
  void take_body();   // counts the request body off; answers at its end
  void answer();
  std::string request_;  // the request's bytes not yet consumed
  bool have_head_ = false;
  bool head_method_ = false;
  http::BodyKind body_ = http::BodyKind::None;
  std::uint64_t body_left_ = 0;
  http::ChunkedDecoder chunked_;
  std::string target_;
  std::string response_head_;
  std::size_t head_sent_ = 0;
  std::uint64_t body_size_ = 0, body_sent_ = 0;
  bool answering_ = false;
};

}  // namespace ringproxy
