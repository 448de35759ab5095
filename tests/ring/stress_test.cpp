// W writer threads x R reader threads on one ring. Every message carries writer id,
// sequence and checksum. Readers must never see a torn message; a pinned reader sees
// exactly the messages whose write was accepted, in order per writer; passive readers
// see in-order subsets, and any gap comes with a counted loss.
#include <atomic>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "observe.hpp"
#include "ringlog/ring.hpp"
#include "test_util.hpp"

using namespace ringlog;
using namespace ringlog::test;

namespace {

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr std::uint64_t kScale = 8;  // sanitizers are ~10x slower
#else
constexpr std::uint64_t kScale = 1;
#endif

// Written once the writers are done: drops are announced in-band by the next batch that
// has room for the notice too, so a run whose last writes were dropped needs one more.
constexpr std::string_view kEndOfTest = "end-of-test";

struct WriterLog {
  std::vector<std::uint8_t> accepted;  // per sequence: 1 if the write was accepted
};

struct ReaderCheck {
  ReaderKind kind;
  std::vector<std::int64_t> last;  // last sequence seen per writer
  std::vector<std::uint64_t> seen;
  std::vector<std::vector<std::uint64_t>> seqs;  // pinned: every sequence seen
  std::uint64_t torn = 0, disorder = 0, lost = 0, notices = 0;
};

void read_until(Reader& rd, ReaderCheck& c, std::atomic<bool>& writers_done, bool keep_seqs) {
  std::vector<std::byte> buf;
  int empty_after_done = 0;
  for (;;) {
    ReadResult r = rd.next(buf);
    if (r.status == ReadStatus::empty) {
      if (writers_done.load(std::memory_order_acquire)) {
        if (++empty_after_done > 3) return;
      }
      rd.wait(std::chrono::milliseconds(2));
      continue;
    }
    empty_after_done = 0;
    if (r.status == ReadStatus::lost) {
      c.lost += r.lost;
      continue;
    }
    if (r.kind == format::MsgKind::notice) {
      ++c.notices;
      continue;
    }
    if (std::string_view(reinterpret_cast<const char*>(buf.data()), buf.size()) == kEndOfTest) continue;
    StressMsg m;
    if (!check_stress(buf.data(), buf.size(), m) || m.writer >= c.last.size()) {
      ++c.torn;
      continue;
    }
    if (static_cast<std::int64_t>(m.seq) <= c.last[m.writer]) ++c.disorder;
    c.last[m.writer] = static_cast<std::int64_t>(m.seq);
    ++c.seen[m.writer];
    if (keep_seqs) c.seqs[m.writer].push_back(m.seq);
  }
}

// What a run forced: writes dropped (full behind a pinned reader) and bytes the passive
// readers lost (overrun).
struct StressResult {
  std::uint64_t dropped = 0, passive_lost = 0;
};

// held: the readers start late, so that the run must drop and overrun: the pinned ones
// once the writers have dropped (the ring is full behind them), the passive ones once
// head has passed where they started (their first read is a loss). The writers then go
// on past per_writer until head has passed it, so that the overrun never depends on
// how the threads were scheduled (the writers could otherwise finish, dropping, before
// a pinned reader ran and let head move).
StressResult run_stress(unsigned writers, unsigned pinned, unsigned passive, std::uint64_t per_writer,
                        std::uint64_t area, unsigned queues, bool held = false) {
  ScratchPath p;
  Ring ring = Ring::create(p, {.area_size = area}, {.queues = queues});
  std::vector<Reader> readers;
  std::vector<ReaderCheck> checks;
  for (unsigned i = 0; i < pinned + passive; ++i) {
    ReaderKind k = i < pinned ? ReaderKind::pinned : ReaderKind::passive;
    readers.push_back(k == ReaderKind::pinned ? Reader::attach(ring, {.kind = k}) : Reader::open(p, {.kind = k}));
    checks.push_back({k, std::vector<std::int64_t>(writers, -1), std::vector<std::uint64_t>(writers, 0),
                      std::vector<std::vector<std::uint64_t>>(writers), 0, 0, 0, 0});
  }
  std::atomic<bool> done{false}, writers_done{false};
  std::vector<std::thread> rthreads;
  for (unsigned i = 0; i < readers.size(); ++i)
    rthreads.emplace_back([&, i] {
      if (held) {
        const bool is_pinned = checks[i].kind == ReaderKind::pinned;
        // Both come: nothing reads before the first drop, and the writers write more
        // than the area holds; they do not end before head has passed area.
        while (!ringlog::test::wait_until([&] {
          RingStats s = ring.stats();
          return is_pinned ? s.msgs_dropped > 0 : s.head > area;
        })) {
        }
      }
      read_until(readers[i], checks[i], done, checks[i].kind == ReaderKind::pinned);
    });
  std::vector<WriterLog> logs(writers);
  std::vector<std::thread> wthreads;
  for (unsigned w = 0; w < writers; ++w)
    wthreads.emplace_back([&, w] {
      logs[w].accepted.reserve(per_writer);
      for (std::uint64_t s = 0; s < per_writer || (held && ring.stats().head <= area); ++s) {
        std::string msg = make_stress(w, s, mix_len(s + w));
        WriteStatus st = ring.write(msg);
        ASSERT_NE(st, WriteStatus::too_big);
        logs[w].accepted.push_back(st == WriteStatus::ok);
        if (s % 64 == 0) std::this_thread::yield();
      }
    });
  for (auto& t : wthreads) t.join();
  writers_done = true;
  // The writers' drops, before the end marker: its own dropped attempts (ring full
  // behind the pinned reader) count in msgs_dropped too.
  const std::uint64_t writers_dropped = ring.stats().msgs_dropped;
  // The ring may be full behind the pinned readers until they move on: retry the end
  // marker until it goes in (a bounded poll on the write status).
  EXPECT_TRUE(ringlog::test::wait_until([&] { return ring.write(kEndOfTest) == WriteStatus::ok; }))
      << "the end marker never fitted";
  done.store(true, std::memory_order_release);
  for (auto& t : rthreads) t.join();

  RingStats st = ring.stats();
  StressResult res;
  res.dropped = writers_dropped;
  std::uint64_t accepted_total = 0, attempted = 0;
  for (auto& l : logs) {
    for (auto a : l.accepted) accepted_total += a;
    attempted += l.accepted.size();
  }
  EXPECT_EQ(writers_dropped + accepted_total, attempted);
  for (auto& c : checks) {
    EXPECT_EQ(c.torn, 0u) << "torn or corrupted messages delivered";
    EXPECT_EQ(c.disorder, 0u) << "messages of one writer out of order";
    if (c.kind == ReaderKind::pinned) {
      EXPECT_EQ(c.lost, 0u) << "a pinned reader lost data";
      for (unsigned w = 0; w < writers; ++w) {
        std::vector<std::uint64_t> expect;
        for (std::uint64_t s = 0; s < logs[w].accepted.size(); ++s)
          if (logs[w].accepted[s]) expect.push_back(s);
        EXPECT_EQ(c.seqs[w], expect) << "pinned reader did not see exactly the accepted messages of writer " << w;
      }
      if (st.msgs_dropped) {
        EXPECT_GT(c.notices, 0u) << "drops were not announced in-band";
      }
    } else {
      res.passive_lost += c.lost;
      std::uint64_t seen = 0;
      for (auto s : c.seen) seen += s;
      if (seen < accepted_total) {
        EXPECT_GT(c.lost, 0u) << "a passive reader missed messages without a loss report";
      }
    }
  }
  return res;
}

}  // namespace

TEST(Stress, WritersOnlyNoReaders) { run_stress(4, 0, 0, 200000 / kScale, 1 << 20, 6); }

TEST(Stress, FourWritersPinnedAndPassiveReaders) { run_stress(4, 1, 2, 100000 / kScale, 1 << 18, 6); }

TEST(Stress, SmallRingForcesDropsAndOverruns) {
  StressResult r = run_stress(4, 2, 2, 40000 / kScale, 8192, 6, true);
  EXPECT_GT(r.dropped, 0u) << "no write was dropped";
  EXPECT_GT(r.passive_lost, 0u) << "no passive reader was overrun";
}

TEST(Stress, ManyWritersOneQueue) { run_stress(12, 1, 1, 20000 / kScale, 1 << 16, 1); }

TEST(Stress, OversubscribedSixteenWriters) { run_stress(16, 1, 1, 10000 / kScale, 1 << 20, 6); }
