// Helpers for the stats tests: a scratch instance directory removed at the end.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace ringlog::test {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag = "stats") {
    static std::atomic<unsigned> n{0};
    std::string base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path().string();
    path_ = base + "/ringlog-test-" + std::to_string(::getpid()) + "-" + tag + "-" + std::to_string(n++);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& str() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace ringlog::test
