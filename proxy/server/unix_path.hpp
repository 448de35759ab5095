// A unix-domain socket address for any path length.
//
// sockaddr_un holds at most 107 bytes of path. Instance directories under a deep
// $RINGLOG_DIR (a CI checkout, a build tree) exceed that, so a longer path is reached
// through its parent directory: the directory is opened O_PATH and the socket is named
// /proc/self/fd/N/<basename>, which the kernel resolves like the full path. The
// directory descriptor lives as long as this object; bind or connect before dropping it.
#pragma once

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace ringproxy {

class UnixPath {
 public:
  // Throws nothing; ok() is false (and error() says why) when the path cannot be named.
  explicit UnixPath(const std::string& path) {
    addr_.sun_family = AF_UNIX;
    if (path.empty()) {
      error_ = "empty socket path";
      return;
    }
    if (path.size() < sizeof addr_.sun_path) {
      std::memcpy(addr_.sun_path, path.c_str(), path.size() + 1);
      return;
    }
    auto slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
    std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    dirfd_ = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dirfd_ < 0) {
      error_ = "cannot open the directory " + dir + ": " + std::strerror(errno);
      return;
    }
    std::string alias = "/proc/self/fd/" + std::to_string(dirfd_) + "/" + base;
    if (alias.size() >= sizeof addr_.sun_path) {
      error_ = "socket file name too long: " + base;
      return;
    }
    std::memcpy(addr_.sun_path, alias.c_str(), alias.size() + 1);
  }
  ~UnixPath() {
    if (dirfd_ >= 0) ::close(dirfd_);
  }
  UnixPath(const UnixPath&) = delete;
  UnixPath& operator=(const UnixPath&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&addr_); }
  socklen_t len() const { return sizeof addr_; }

 private:
  sockaddr_un addr_{};
  int dirfd_ = -1;
  std::string error_;
};

}  // namespace ringproxy
