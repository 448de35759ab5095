// libFuzzer target: ring files with arbitrary contents. Opening must either refuse the
// file with an Error or map it; reading a mapped ring with damaged framing must end
// (lost bytes reported) without reading outside the area; writing into it must not
// corrupt memory. Two shapes: the input is a whole file (header validation), or the
// input fills the area and positions behind a valid header (framing and reclaim).
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ringlog/ring.hpp"

namespace {

std::string scratch() {
  return "/dev/shm/ringlog-fuzz-" + std::to_string(::getpid());
}

void put(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return;
  if (!bytes.empty()) (void)!::write(fd, bytes.data(), bytes.size());
  ::close(fd);
}

void exercise(const std::string& path) {
  try {
    ringlog::Reader rd = ringlog::Reader::open(path, {.start = ringlog::StartAt::oldest});
    std::vector<std::byte> buf;
    for (int i = 0; i < 10000; ++i)
      if (rd.next(buf).status == ringlog::ReadStatus::empty) break;
  } catch (const ringlog::Error&) {
    return;
  }
  try {
    ringlog::Ring ring = ringlog::Ring::open(path);
    ring.write("fuzz");
    ringlog::Reader pin = ringlog::Reader::attach(ring, {.kind = ringlog::ReaderKind::pinned,
                                                         .start = ringlog::StartAt::oldest});
    std::vector<std::byte> buf;
    for (int i = 0; i < 10000; ++i)
      if (pin.next(buf).status == ringlog::ReadStatus::empty) break;
  } catch (const ringlog::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  static const std::string path = scratch();
  if (data[0] & 1) {
    put(path, std::vector<std::uint8_t>(data + 1, data + size));  // a whole file
  } else {
    // A valid empty ring of 4096 bytes, then: head and tail from the input, the
    // area bytes from the rest.
    constexpr std::uint64_t kArea = 4096;
    try {
      ringlog::Ring::create(path, {.area_size = kArea, .mode = 0600});
    } catch (const ringlog::Error&) {
      return 0;
    }
    std::vector<std::uint8_t> file(ringlog::format::kHeaderLen + kArea);
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return 0;
    (void)!::read(fd, file.data(), ringlog::format::kHeaderLen);
    ::close(fd);
    std::uint64_t head = 0, tail = 1;
    if (size >= 17) {
      std::memcpy(&head, data + 1, 8);
      std::memcpy(&tail, data + 9, 8);
      head %= 1u << 20;
      tail = head + 1 + tail % kArea;  // within the validator's bounds, mostly
    }
    std::memcpy(file.data() + offsetof(ringlog::format::Header, head), &head, 8);
    std::memcpy(file.data() + offsetof(ringlog::format::Header, tail), &tail, 8);
    if (size > 17) std::memcpy(file.data() + ringlog::format::kHeaderLen, data + 17, std::min<std::size_t>(size - 17, kArea));
    put(path, file);
  }
  exercise(path);
  return 0;
}
