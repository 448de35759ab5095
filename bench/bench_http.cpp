// bench-link: ringproxy_http
// The ringproxy HTTP/1.1 codec: time to parse a typical ~500-byte browser request,
// against finding the end of the same head with memmem (the least any parser must do)
// in the same run; plus response heads, chunked decoding and head forwarding.
// Reports ns per request and the ratio to the baseline; never a pass/fail on time.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "bench_util.hpp"
#include "ringproxy/http/http.hpp"

namespace http = ringproxy::http;

namespace {

// A real Firefox navigation request, 500 bytes give or take.
const std::string kRequest =
    "GET /articles/2026/11/ring-buffers-across-processes.html?utm_source=feed&page=2 HTTP/1.1\r\n"
    "Host: www.example.org\r\n"
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n"
    "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n"
    "Accept-Language: en-US,en;q=0.5\r\n"
    "Accept-Encoding: gzip, deflate, br, zstd\r\n"
    "Referer: https://www.example.org/articles/\r\n"
    "Connection: keep-alive\r\n"
    "Cookie: session=8f14e45fceea167a5a36dedd4bea2543; theme=dark\r\n"
    "Upgrade-Insecure-Requests: 1\r\n"
    "Priority: u=0, i\r\n"
    "\r\n";

const std::string kResponse =
    "HTTP/1.1 200 OK\r\n"
    "Date: Mon, 30 Nov 2026 01:00:00 GMT\r\n"
    "Server: origin\r\n"
    "Content-Type: text/html; charset=utf-8\r\n"
    "Content-Length: 1024\r\n"
    "Cache-Control: public, max-age=300\r\n"
    "ETag: \"5f3a-1024\"\r\n"
    "Last-Modified: Tue, 14 Nov 2023 22:13:20 GMT\r\n"
    "Vary: Accept-Encoding\r\n"
    "Connection: keep-alive\r\n"
    "\r\n";

void BM_FindHeadEnd(benchmark::State& state) {
  std::size_t total = 0;
  for (auto _ : state) {
    const void* p = memmem(kRequest.data(), kRequest.size(), "\r\n\r\n", 4);
    benchmark::DoNotOptimize(p);
    total += static_cast<const char*>(p) - kRequest.data() + 4;
  }
  benchmark::DoNotOptimize(total);
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kRequest.size()));
}

void BM_ParseRequest(benchmark::State& state) {
  http::RequestParser parser;
  http::RequestHead head;
  for (auto _ : state) {
    http::ParseResult r = parser.parse(kRequest, head);
    benchmark::DoNotOptimize(r);
    benchmark::DoNotOptimize(head.headers.size());
    if (!r.done()) state.SkipWithError("parse failed");
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kRequest.size()));
}

// The same head arriving in 8 reads: the parser resumes its scan instead of restarting.
void BM_ParseRequestIn8Pieces(benchmark::State& state) {
  http::RequestParser parser;
  http::RequestHead head;
  const std::size_t step = kRequest.size() / 8 + 1;
  for (auto _ : state) {
    http::ParseResult r;
    for (std::size_t n = step;; n += step) {
      r = parser.parse(std::string_view(kRequest).substr(0, std::min(n, kRequest.size())), head);
      if (!r.need_more()) break;
    }
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_ParseResponse(benchmark::State& state) {
  http::ResponseParser parser;
  http::ResponseHead head;
  for (auto _ : state) {
    http::ParseResult r = parser.parse(kResponse, head, http::Method::Get);
    benchmark::DoNotOptimize(r);
    if (!r.done()) state.SkipWithError("parse failed");
  }
  state.SetItemsProcessed(state.iterations());
}

// Parse + write the forwarded head (hop-by-hop removal, Via, X-Forwarded-For).
void BM_ParseAndForwardRequest(benchmark::State& state) {
  http::RequestParser parser;
  http::RequestHead head;
  http::ForwardOptions opt;
  opt.client_addr = "192.0.2.44";
  std::string out;
  out.reserve(4096);
  for (auto _ : state) {
    parser.parse(kRequest, head);
    out.clear();
    http::write_forward_request(out, head, opt);
    http::end_head(out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}

// 64 KiB body in 4 KiB chunks: framing overhead of the decoder.
void BM_ChunkedDecode64K(benchmark::State& state) {
  std::string body;
  std::string chunk(4096, 'x');
  for (int i = 0; i < 16; ++i) http::append_chunk(body, chunk);
  body += http::kLastChunk;
  http::ChunkedDecoder dec;
  for (auto _ : state) {
    dec.reset();
    std::string_view in = body;
    std::size_t got = 0;
    while (true) {
      auto s = dec.step(in);
      in.remove_prefix(s.consumed);
      if (s.kind == http::ChunkedDecoder::Step::Data) got += s.data.size();
      else break;
    }
    benchmark::DoNotOptimize(got);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
}

BENCHMARK(BM_FindHeadEnd);
BENCHMARK(BM_ParseRequest);
BENCHMARK(BM_ParseRequestIn8Pieces);
BENCHMARK(BM_ParseResponse);
BENCHMARK(BM_ParseAndForwardRequest);
BENCHMARK(BM_ChunkedDecode64K);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  ringlog::bench::CollectingReporter rep(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_ColorTabular
                                                               : benchmark::ConsoleReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(&rep);
  auto ns = [&](const char* name) {
    double r = rep.median(name);
    return r > 0 ? 1e9 / r : 0.0;
  };
  double base = ns("BM_FindHeadEnd");
  double req = ns("BM_ParseRequest");
  std::printf("\n== HTTP codec (medians; request head = %zu bytes, %d fields) ==\n", kRequest.size(), 11);
  std::printf("  find end of head (memmem baseline) %8.1f ns\n", base);
  std::printf("  parse request                      %8.1f ns/request  (%.1fx the baseline, %.2f ns/byte)\n", req,
              base > 0 ? req / base : 0.0, req / static_cast<double>(kRequest.size()));
  std::printf("  parse request in 8 reads           %8.1f ns/request\n", ns("BM_ParseRequestIn8Pieces"));
  std::printf("  parse response head (%zu bytes)    %8.1f ns\n", kResponse.size(), ns("BM_ParseResponse"));
  std::printf("  parse + forward request head       %8.1f ns\n", ns("BM_ParseAndForwardRequest"));
  std::printf("  chunked decode, 64 KiB in 4 KiB    %8.1f ns\n", ns("BM_ChunkedDecode64K"));
  double la[1];
  if (getloadavg(la, 1) == 1) std::printf("  load average at the end: %.2f\n", la[0]);
  return 0;
}
