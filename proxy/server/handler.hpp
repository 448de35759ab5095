// What a worker's epoll set holds: anything with an on_event. Sessions, backend
// connections, listeners and modules (tunnels, cache notifications) each register their
// own Handler with Worker::add_fd.
#pragma once

#include <cstdint>

namespace ringproxy {

struct Handler {
  virtual ~Handler() = default;
  virtual void on_event(std::uint32_t events) = 0;
};

}  // namespace ringproxy
