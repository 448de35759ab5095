// How an application embeds ringlog: open (here: create) a ring, log each request as a
// transaction from worker threads, switch tags and tracing at run time, then read the
// log back the way the ringlog tool does. Exits non-zero if anything is missing.
//
//   ringlog_embed_example [RING_PATH] [REQUESTS_PER_THREAD]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <ringlog/group.hpp>
#include <ringlog/log.hpp>
#include <ringlog/printer.hpp>

namespace {

// One client request served by a worker: a session, the request, a backend fetch.
void serve(ringlog::Log& log, int worker, int n) {
  using ringlog::Tag;
  using ringlog::TxnType;
  ringlog::set_thread_index(static_cast<unsigned>(worker));  // spreads writers over the ring's queues
  for (int i = 0; i < n; ++i) {
    ringlog::Txn sess = log.begin(TxnType::sess, "HTTP/1");
    sess.recordf(Tag::SessOpen, "192.0.2.%d %d a0", worker + 1, 40000 + i);

    ringlog::Txn req = sess.child(TxnType::req, "rxreq");
    if (i == 0) req.set_trace(true);  // trace only this request, whatever the global switch says
    req.timestamp("Start");
    req.record(Tag::ReqMethod, "GET");
    req.recordf(Tag::ReqURL, "/item/%d/%d", worker, i);
    req.record(Tag::ReqHeader, "Host: example.com");
    req.trace("lookup: miss");
    RINGLOG_TRACEF(req, "worker %d picks backend %d", worker, i % 2);

    ringlog::Txn be = req.child(TxnType::bereq, "fetch");
    be.timestamp("Start");
    be.record(Tag::BereqMethod, "GET");
    be.recordf(Tag::BereqURL, "/item/%d/%d", worker, i);
    be.record(Tag::BerespStatus, "200");
    be.timestamp("BerespBody");
    be.end();  // one ring write for the whole fetch

    req.record(Tag::RespStatus, "200");
    req.record(Tag::Debug, "not logged: Debug is masked by default");
    req.timestamp("Resp");
    req.end();
    sess.record(Tag::SessClose, "REM_CLOSE 0.001");
    sess.end();
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = argc > 1 ? argv[1] : "/tmp/ringlog-embed-example-" + std::to_string(::getpid());
  int per_thread = argc > 2 ? std::atoi(argv[2]) : 3;
  try {
    ringlog::Log log = ringlog::Log::create(path, {.area_size = 4u << 20});
    log.set_mask("-ReqHeader");  // any process could do this while we run
    std::vector<std::thread> workers;
    for (int w = 0; w < 2; ++w) workers.emplace_back(serve, std::ref(log), w, per_thread);
    for (auto& t : workers) t.join();

    // Read it back as `ringlog -g request -d` would.
    ringlog::Reader rd = ringlog::Reader::open(path, {.start = ringlog::StartAt::oldest});
    int groups = 0, fetches = 0, traces = 0, headers = 0;
    ringlog::Grouper grouper({.mode = ringlog::Grouping::request}, [&](const ringlog::Group& g) {
      std::string out;
      ringlog::print_group(out, g);
      std::fputs(out.c_str(), stdout);
      ++groups;
      for (const ringlog::Transaction* t : g.txns) {
        if (t->type == ringlog::TxnType::bereq && t->level == 2) ++fetches;
        for (const auto& r : t->records) {
          traces += r.tag == ringlog::Tag::Trace;
          headers += r.tag == ringlog::Tag::ReqHeader;
        }
      }
    });
    std::vector<std::byte> msg;
    for (;;) {
      ringlog::ReadResult r = rd.next(msg);
      if (r.status == ringlog::ReadStatus::empty) break;
      if (r.status == ringlog::ReadStatus::lost) grouper.lost(r.lost, ringlog::Grouper::Clock::now());
      if (r.status == ringlog::ReadStatus::message && r.kind == ringlog::format::MsgKind::data)
        grouper.feed(msg, ringlog::Grouper::Clock::now());
    }
    grouper.flush();
    ::unlink(path.c_str());
    int want = 2 * per_thread;
    std::printf("%d request groups, %d with their fetch, %d trace records, %d masked headers seen\n", groups,
                fetches, traces, headers);
    bool ok = groups == want && fetches == want && traces == 2 * 2 && headers == 0;
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringlog_embed_example: %s\n", e.what());
    ::unlink(path.c_str());
    return 2;
  }
}
