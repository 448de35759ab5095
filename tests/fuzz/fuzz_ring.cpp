// libFuzzer target: ring images with arbitrary contents. Opening must either refuse the
// image with an Error or accept it; reading a ring with damaged framing must end (lost
// bytes reported) without reading outside the image; writing into it must not corrupt
// memory. Two shapes: the input is a whole file (header validation), or the input fills
// the area and positions behind a valid header (framing and reclaim).
// The ring is opened over memory (Ring::open_memory, the checks open() makes of a file):
// no file, mapping or system call per input. The image is a heap block of exactly its
// size, so that AddressSanitizer sees any access past its end.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <vector>

#include "ringlog/ring.hpp"

namespace {

using namespace std::chrono_literals;
namespace fmt = ringlog::format;

constexpr std::uint64_t kArea = 4096;  // the smallest area: work per input grows with it
constexpr std::align_val_t kAlign{alignof(fmt::Header)};

// A block of exactly n bytes aligned as a header, freed at the end of the input.
struct Image {
  std::byte* p;
  std::size_t n;
  explicit Image(std::size_t size) : p(static_cast<std::byte*>(::operator new(size ? size : 1, kAlign))), n(size) {}
  ~Image() { ::operator delete(p, kAlign); }
  std::span<std::byte> bytes() const { return {p, n}; }
};

// A freshly created empty ring's header (as Ring::create writes it).
void empty_header(fmt::Header& h) {
  std::memset(static_cast<void*>(&h), 0, sizeof h);
  h.magic = fmt::kMagic;
  h.version = fmt::kVersion;
  h.byte_order = fmt::kByteOrderMark;
  h.word_size = sizeof(void*);
  h.pos_size = 8;
  h.writer_slots = fmt::kWriterSlots;
  h.reader_slots = fmt::kReaderSlots;
  h.header_len = fmt::kHeaderLen;
  h.area_size = kArea;
  h.creator_pid = 1;
  h.instance_id = 1;
  h.owner_saved_rc.store(fmt::kRcNotRecorded, std::memory_order_relaxed);
  h.head.store(0, std::memory_order_relaxed);
  h.tail.store(1, std::memory_order_relaxed);
}

void exercise(std::span<std::byte> image) {
  try {
    ringlog::Reader rd = ringlog::Reader::open_memory(image, {.start = ringlog::StartAt::oldest});
    std::vector<std::byte> buf;
    for (int i = 0; i < 10000; ++i)
      if (rd.next(buf).status == ringlog::ReadStatus::empty) break;
  } catch (const ringlog::Error&) {
    return;
  }
  try {
    // Nobody else writes here: a 0xFF the input left is no writer to wait for. A
    // batch held up by it is dropped at once, a pinned reader stops at it at once.
    ringlog::Ring ring = ringlog::Ring::open_memory(image, {.writer_wait = 0ms, .reader_wait = 0ms});
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
  if (data[0] & 1) {  // a whole file
    Image img(size - 1);
    if (size > 1) std::memcpy(img.p, data + 1, size - 1);
    exercise(img.bytes());
    return 0;
  }
  // A valid empty ring of kArea bytes, then: head and tail from the input, the area
  // bytes from the rest.
  Image img(fmt::kHeaderLen + kArea);
  auto* h = reinterpret_cast<fmt::Header*>(img.p);
  empty_header(*h);
  std::memset(img.p + fmt::kHeaderLen, 0, kArea);
  std::uint64_t head = 0, tail = 1;
  if (size >= 17) {
    std::memcpy(&head, data + 1, 8);
    std::memcpy(&tail, data + 9, 8);
    head %= 1u << 20;
    tail = head + 1 + tail % kArea;  // within the validator's bounds, mostly
  }
  h->head.store(head, std::memory_order_relaxed);
  h->tail.store(tail, std::memory_order_relaxed);
  if (size > 17) std::memcpy(img.p + fmt::kHeaderLen, data + 17, std::min<std::size_t>(size - 17, kArea));
  exercise(img.bytes());
  return 0;
}
