// Chunked transfer coding: decoding (extensions, trailers, every byte split), the
// size-line attacks (overflow, non-hex, missing CRLF, bare LF), and the encoder.
#include "http_test_util.hpp"

using namespace ringproxy::http;
using namespace ringproxy::http::test;

namespace {

struct Decoded {
  std::string body;
  bool done = false;
  Error error = Error::None;
  std::size_t consumed = 0;  // through Done or the failure point
};

// Decodes `wire` delivered in pieces of `piece` bytes (0: all at once).
Decoded decode(std::string_view wire, std::size_t piece = 0) {
  Decoded d;
  ChunkedDecoder dec;
  std::size_t off = 0;
  while (off < wire.size() && !d.done && d.error == Error::None) {
    std::size_t n = piece ? std::min(piece, wire.size() - off) : wire.size() - off;
    std::string_view in = wire.substr(off, n);
    while (true) {
      auto s = dec.step(in);
      in.remove_prefix(s.consumed);
      off += s.consumed;
      if (s.kind == ChunkedDecoder::Step::Data) {
        d.body.append(s.data);
        continue;
      }
      if (s.kind == ChunkedDecoder::Step::Done) d.done = true;
      if (s.kind == ChunkedDecoder::Step::Failed) d.error = s.error;
      break;
    }
  }
  d.consumed = off;
  return d;
}

Error decode_error(std::string_view wire) {
  Decoded d = decode(wire);
  EXPECT_FALSE(d.done) << wire;
  // Splitting changes nothing.
  for (std::size_t piece = 1; piece < 4; ++piece) EXPECT_EQ(decode(wire, piece).error, d.error) << wire;
  return d.error;
}

}  // namespace

TEST(ChunkedDecoder, DecodesChunksAndStopsAtTheEnd) {
  std::string wire = "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nNEXT";
  Decoded d = decode(wire);
  EXPECT_TRUE(d.done);
  EXPECT_EQ(d.body, "hello world");
  EXPECT_EQ(d.consumed, wire.size() - 4);
}

TEST(ChunkedDecoder, DataIsAViewIntoTheInput) {
  std::string wire = "3\r\nabc\r\n0\r\n\r\n";
  ChunkedDecoder dec;
  auto s = dec.step(wire);
  ASSERT_EQ(s.kind, ChunkedDecoder::Step::Data);
  EXPECT_EQ(s.data, "abc");
  EXPECT_EQ(s.data.data(), wire.data() + 3);
  EXPECT_EQ(s.consumed, 6u);
  EXPECT_EQ(dec.body_bytes(), 3u);
}

TEST(ChunkedDecoder, HexSizesLeadingZerosAndExtensions) {
  EXPECT_EQ(decode("A\r\n0123456789\r\n0\r\n\r\n").body, "0123456789");
  EXPECT_EQ(decode("a\r\n0123456789\r\n0\r\n\r\n").body, "0123456789");
  EXPECT_EQ(decode("0000000000000000000000003\r\nabc\r\n000\r\n\r\n").body, "abc");
  Decoded d = decode("3;name=value;x=\"q s\"\r\nabc\r\n0;last\r\n\r\n");
  EXPECT_TRUE(d.done);
  EXPECT_EQ(d.body, "abc");
  EXPECT_TRUE(decode("3 ;ext\r\nabc\r\n0\r\n\r\n").done);  // BWS before ';'
}

TEST(ChunkedDecoder, Trailers) {
  std::string wire = "3\r\nabc\r\n0\r\nX-Checksum: 1234\r\nX-Other:\r\n\r\n";
  ChunkedDecoder dec;
  std::string_view in = wire;
  std::string body;
  while (true) {
    auto s = dec.step(in);
    in.remove_prefix(s.consumed);
    if (s.kind == ChunkedDecoder::Step::Data) body.append(s.data);
    else {
      ASSERT_EQ(s.kind, ChunkedDecoder::Step::Done);
      break;
    }
  }
  EXPECT_EQ(body, "abc");
  EXPECT_TRUE(in.empty());
  EXPECT_EQ(dec.trailer_fields(), 2u);
  EXPECT_EQ(decode_error("0\r\nX-A: 1\r\n y\r\n\r\n"), Error::BadTrailer);  // obs-fold
  EXPECT_EQ(decode_error("0\r\nX A: 1\r\n\r\n"), Error::BadTrailer);
  EXPECT_EQ(decode_error("0\r\nX-A: \x01\r\n\r\n"), Error::BadTrailer);
  EXPECT_EQ(decode_error("0\r\nX-A: 1\n\r\n"), Error::BareLF);
  EXPECT_EQ(decode_error("0\r\nX-A: 1\r\n\n"), Error::BareLF);
  EXPECT_EQ(decode_error("0\r\nX-A: 1\rx\r\n\r\n"), Error::BareCR);
  ChunkedDecoder small(16);
  auto s = small.step("0\r\nX-Long-Trailer: 12345678\r\n\r\n");
  EXPECT_EQ(s.kind, ChunkedDecoder::Step::Failed);
  EXPECT_EQ(s.error, Error::TrailerTooLarge);
}

TEST(ChunkedDecoder, BadChunkSizes) {
  EXPECT_EQ(decode_error("\r\nabc\r\n0\r\n\r\n"), Error::BadChunkSize);    // empty
  EXPECT_EQ(decode_error("g\r\nabc\r\n0\r\n\r\n"), Error::BadChunkSize);   // non-hex
  EXPECT_EQ(decode_error("0x3\r\nabc\r\n0\r\n\r\n"), Error::BadChunkSize);
  EXPECT_EQ(decode_error("-3\r\nabc\r\n0\r\n\r\n"), Error::BadChunkSize);
  EXPECT_EQ(decode_error("+3\r\nabc\r\n0\r\n\r\n"), Error::BadChunkSize);
  EXPECT_EQ(decode_error(" 3\r\nabc\r\n0\r\n\r\n"), Error::BadChunkSize);
  EXPECT_EQ(decode_error("3x\r\nabc\r\n0\r\n\r\n"), Error::BadChunkSize);
  // Overflow: 2^64 + 3 would wrap to 3 in a naive parser.
  EXPECT_EQ(decode_error("10000000000000003\r\nabc\r\n0\r\n\r\n"), Error::BadChunkSize);
  EXPECT_EQ(decode_error("ffffffffffffffff\r\n"), Error::BadChunkSize);
  // 15 significant digits is the largest accepted size.
  ChunkedDecoder dec;
  auto s = dec.step("fffffffffffffff\r\nab");
  EXPECT_EQ(s.kind, ChunkedDecoder::Step::Data);
}

TEST(ChunkedDecoder, LineEndings) {
  EXPECT_EQ(decode_error("3\nabc\r\n0\r\n\r\n"), Error::BareLF);
  EXPECT_EQ(decode_error("3;ext\nabc\r\n0\r\n\r\n"), Error::BareLF);
  EXPECT_EQ(decode_error("3\rabc\r\n0\r\n\r\n"), Error::BareCR);
  EXPECT_EQ(decode_error("3\r\nabcd\r\n0\r\n\r\n"), Error::MissingChunkCRLF);  // too much data
  EXPECT_EQ(decode_error("3\r\nabc\n0\r\n\r\n"), Error::MissingChunkCRLF);
  EXPECT_EQ(decode_error("3\r\nabc\r0\r\n\r\n"), Error::MissingChunkCRLF);
  EXPECT_EQ(decode_error("3\r\nabc\r\n0\r\n\n"), Error::BareLF);
  EXPECT_EQ(decode_error("3\r\nabc\r\n0\r\n\rx"), Error::BareCR);
}

TEST(ChunkedDecoder, BadExtensions) {
  EXPECT_EQ(decode_error("3 \r\nabc\r\n0\r\n\r\n"), Error::BadChunkExtension);  // BWS without ';'
  EXPECT_EQ(decode_error("3 x\r\nabc\r\n0\r\n\r\n"), Error::BadChunkExtension);
  EXPECT_EQ(decode_error("3;a\x01\r\nabc\r\n0\r\n\r\n"), Error::BadChunkExtension);
  EXPECT_EQ(decode_error(std::string("3;a\0\r\nabc\r\n0\r\n\r\n", 16)), Error::BadChunkExtension);
  ChunkedDecoder dec(1024, 8);
  auto s = dec.step("3;123456789\r\nabc\r\n");
  EXPECT_EQ(s.kind, ChunkedDecoder::Step::Failed);
  EXPECT_EQ(s.error, Error::BadChunkExtension);
}

TEST(ChunkedDecoder, EverySplitGivesTheSameResult) {
  std::string wire = "4;e=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nT: v\r\n\r\n";
  Decoded whole = decode(wire);
  ASSERT_TRUE(whole.done);
  EXPECT_EQ(whole.body, "Wikipedia in\r\n\r\nchunks.");
  for (std::size_t piece = 1; piece <= wire.size(); ++piece) {
    Decoded d = decode(wire, piece);
    EXPECT_TRUE(d.done) << piece;
    EXPECT_EQ(d.body, whole.body) << piece;
    EXPECT_EQ(d.consumed, wire.size()) << piece;
  }
  // Two-part split at every byte.
  for (std::size_t k = 0; k <= wire.size(); ++k) {
    ChunkedDecoder dec;
    std::string body;
    bool done = false;
    for (std::string_view part : {std::string_view(wire).substr(0, k), std::string_view(wire).substr(k)}) {
      while (!part.empty() && !done) {
        auto s = dec.step(part);
        ASSERT_NE(s.kind, ChunkedDecoder::Step::Failed) << k;
        part.remove_prefix(s.consumed);
        if (s.kind == ChunkedDecoder::Step::Data) body.append(s.data);
        if (s.kind == ChunkedDecoder::Step::Done) done = true;
      }
    }
    EXPECT_TRUE(done) << k;
    EXPECT_EQ(body, whole.body) << k;
  }
}

TEST(ChunkedDecoder, AfterDoneOrFailedItStays) {
  ChunkedDecoder dec;
  auto s = dec.step("0\r\n\r\nGET");
  ASSERT_EQ(s.kind, ChunkedDecoder::Step::Done);
  EXPECT_EQ(s.consumed, 5u);
  EXPECT_TRUE(dec.done());
  EXPECT_EQ(dec.step("more").kind, ChunkedDecoder::Step::Done);
  EXPECT_EQ(dec.step("more").consumed, 0u);
  dec.reset();
  EXPECT_EQ(dec.step("zz").kind, ChunkedDecoder::Step::Failed);
  EXPECT_EQ(dec.step("0\r\n\r\n").kind, ChunkedDecoder::Step::Failed);
}

TEST(ChunkedEncoder, RoundTripsThroughTheDecoder) {
  char h[kChunkHeaderMax];
  EXPECT_EQ(std::string_view(h, chunk_header(h, 0)), "0\r\n");
  EXPECT_EQ(std::string_view(h, chunk_header(h, 255)), "ff\r\n");
  EXPECT_EQ(std::string_view(h, chunk_header(h, 4096)), "1000\r\n");
  EXPECT_EQ(std::string_view(h, chunk_header(h, 0xfffffffffffffffULL)), "fffffffffffffff\r\n");
  std::string out;
  std::string expect;
  for (std::size_t n : {1u, 10u, 255u, 256u, 0u, 70000u}) {
    std::string piece(n, static_cast<char>('a' + n % 26));
    append_chunk(out, piece);
    expect += piece;
  }
  out += kLastChunk;
  Decoded d = decode(out);
  EXPECT_TRUE(d.done);
  EXPECT_EQ(d.body, expect);
  EXPECT_EQ(d.consumed, out.size());
}
