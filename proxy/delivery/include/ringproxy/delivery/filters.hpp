// Pull filters (Varnish's VDPIO, seeds/000): the transport pulls from the last filter,
// each filter pulls from the one before it, down to the object reader. A filter gives
// back (through the chain's batch) every lease it does not forward; bytes it makes are
// allocated from storage through the reader, so they are leases like any other.
// Contract of pull() is the lease call's (lease.hpp): never blocks, 0 = no room, END flag.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ringproxy/delivery/lease.hpp"
#include "ringproxy/delivery/storage.hpp"

namespace ringproxy::delivery {

class Source {
 public:
  virtual ~Source() = default;
  virtual int pull(ScatterArray& out) noexcept = 0;
};

class Chain;

class Filter : public Source {
 public:
  ~Filter() override = default;
  virtual const char* name() const noexcept = 0;

 protected:
  friend class Chain;
  Source* prev_ = nullptr;
  Chain* chain_ = nullptr;
};

// The delivery pipeline of one response body: reader -> filters -> (transport).
// Owns the reader; returns leases to it in batches. One thread at a time.
class Chain : public Source, public LeaseSink {
 public:
  Chain(ObjRef obj, Notify* notify, std::size_t max_leases = 1024);
  ~Chain() override;
  Chain(const Chain&) = delete;
  Chain& operator=(const Chain&) = delete;

  void push(std::unique_ptr<Filter> f);  // after the filters already there
  int pull(ScatterArray& out) noexcept override;
  // Leases back from the transport or a filter: batched, flushed at the end of pull().
  void give(Lease l) noexcept { batch_.put(l); }
  void give_back(std::span<const Lease> ls) noexcept override {
    for (Lease l : ls) batch_.put(l);
  }
  void give_all(ScatterArray& sa) noexcept { batch_.put_all(sa); }
  void flush_returns() noexcept { batch_.flush(); }
  std::span<std::uint8_t> alloc(std::size_t n, std::uint32_t refs, Lease* l) noexcept {
    return reader_.alloc_buffer(n, refs, l);
  }
  ObjectReader& reader() noexcept { return reader_; }
  std::size_t filters() const noexcept { return filters_.size(); }
  // The filter of that name (Filter::name()), or null.
  Filter* find(std::string_view name) const noexcept {
    for (const auto& f : filters_)
      if (name == f->name()) return f.get();
    return nullptr;
  }

 private:
  struct ReaderSource : Source {
    ObjectReader* r;
    int pull(ScatterArray& out) noexcept override { return r->lease(out); }
  };
  ObjectReader reader_;
  LeaseBatch batch_;
  ReaderSource rs_;
  std::vector<std::unique_ptr<Filter>> filters_;
};

// ---- Range (RFC 9110 14): planning from the header, then the filter.
struct ByteRange {
  std::uint64_t lo, hi;  // [lo, hi)
};
struct RangePlan {
  int status = 200;  // 200: ignore the header; 206; 416
  std::vector<ByteRange> ranges;   // sorted, coalesced
  std::string content_range;       // single range: "bytes a-b/len"; 416: "bytes */len"
  std::string content_type;        // multipart: "multipart/byteranges; boundary=..."
  std::vector<std::string> part_heads;  // multipart: the bytes before each part
  std::string tail;                // multipart: the closing delimiter
  std::uint64_t content_length = 0;     // of the 206 body
};
// header: the Range value; length: the full body's length; type: the object's
// Content-Type (for multipart parts). Syntax errors and non-bytes units -> 200.
RangePlan plan_range(std::string_view header, std::uint64_t length, std::string_view type = {},
                     std::size_t max_ranges = 8);

class RangeFilter : public Filter {
 public:
  // start: stream position of the first byte the previous stage delivers (the chain's
  // reader may have skipped to ranges[0].lo).
  RangeFilter(const RangePlan& plan, std::uint64_t start = 0, std::size_t in_cap = 32);
  ~RangeFilter() override;
  const char* name() const noexcept override { return "range"; }
  int pull(ScatterArray& out) noexcept override;

 private:
  bool emit_bytes(ScatterArray& out, std::string_view s) noexcept;
  std::vector<ByteRange> r_;
  std::vector<std::string> heads_;
  std::string tail_;
  ScatterArray in_;
  std::uint64_t pos_;
  std::size_t k_ = 0;
  bool head_done_ = false;
  bool done_ = false;
  bool failed_ = false;
};

// Chunked transfer coding for bodies of unknown length.
class ChunkedFilter : public Filter {
 public:
  explicit ChunkedFilter(std::size_t in_cap = 32) : in_(in_cap) {}
  ~ChunkedFilter() override;
  const char* name() const noexcept override { return "chunked"; }
  int pull(ScatterArray& out) noexcept override;
  // Body bytes framed so far, without the chunk framing (what ReqAcct counts).
  std::uint64_t payload_bytes() const noexcept { return payload_; }

 private:
  ScatterArray in_;
  bool done_ = false;
  std::uint64_t payload_ = 0;
};

// gzip (compress) and gunzip (decompress) with zlib.
class ZlibFilter : public Filter {
 public:
  enum class Mode { gzip, gunzip };
  explicit ZlibFilter(Mode m, int level = 6, std::size_t out_buf = 16384, std::size_t in_cap = 32);
  ~ZlibFilter() override;
  const char* name() const noexcept override { return mode_ == Mode::gzip ? "gzip" : "gunzip"; }
  int pull(ScatterArray& out) noexcept override;

 private:
  bool emit(ScatterArray& out) noexcept;
  Mode mode_;
  struct Z;
  std::unique_ptr<Z> z_;
  ScatterArray in_;
  std::size_t in_off_ = 0;     // consumed bytes of in_'s first extent
  std::size_t out_size_;
  Lease buf_lease_ = kLeaseNoReturn;
  std::uint8_t* buf_ = nullptr;
  std::size_t buf_used_ = 0;
  bool dirty_ = false;         // gzip: input given since the last flush
  bool stream_end_ = false;
  bool done_ = false;
  bool failed_ = false;
};

// zlib's CRC-32 (crc32_z(crc, p, n): the same values), with the CPU's carry-less
// multiply where there is one (x86-64 PCLMULQDQ: several times zlib's table speed).
std::uint32_t crc32_update(std::uint32_t crc, const void* p, std::size_t n) noexcept;

// Checks the CRC32 of everything that passes (tests, the seeds/000 benchmark).
class Crc32Filter : public Filter {
 public:
  Crc32Filter() = default;
  explicit Crc32Filter(std::uint32_t expected) : expect_(expected), check_(true) {}
  const char* name() const noexcept override { return "crc32"; }
  int pull(ScatterArray& out) noexcept override;
  std::uint32_t crc() const noexcept { return crc_; }
  std::uint64_t bytes() const noexcept { return bytes_; }
  bool mismatch() const noexcept { return mismatch_; }

 private:
  std::uint32_t crc_ = 0;
  std::uint32_t expect_ = 0;
  bool check_ = false;
  bool mismatch_ = false;
  std::uint64_t bytes_ = 0;
};

}  // namespace ringproxy::delivery
