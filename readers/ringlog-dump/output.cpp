// ringlog-dump's output: the messages a walk found (raw payloads, or decoded records
// grouped as ringlog prints them), the description of a file's header and tables
// (--info), and the repair report, each as text or JSON. Formats only what it is given.
#include <time.h>

#include <cinttypes>
#include <cstring>

#include "dump.hpp"
#include "framing.hpp"
#include "ringlog/group.hpp"
#include "ringlog/json.hpp"
#include "ringlog/printer.hpp"
#include "ringlog/record.hpp"
#include "ringlog/ring.hpp"

namespace ringlog::dump {

using namespace format;
using namespace detail;

namespace {

std::string kind_name(MsgKind k) {
  switch (k) {
    case MsgKind::data: return "data";
    case MsgKind::notice: return "notice";
    case MsgKind::pad: return "pad";
  }
  return "reserved";
}

void append_remapped(std::string& out, std::string_view p, bool lf_remap) {
  if (!lf_remap) {
    out += p;
    return;
  }
  for (char c : p) {
    if (c == '\n') out += "\r\v";
    else out += c;
  }
}

void json_skipped(std::string& out, const Image& img, const WalkResult& w) {
  out += "\"skipped\":[";
  for (std::size_t i = 0; i < w.skipped.size(); ++i) {
    const Skipped& s = w.skipped[i];
    out += fmt("%s{\"pos\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"why\":", i ? "," : "",
               is_haproxy(img.layout) ? s.pos % img.area_size : s.pos, s.end - s.pos);
    append_json_string(out, s.why);
    out += "}";
  }
  out += "]";
}

}  // namespace

std::string format_messages(const Image& img, const WalkResult& w, const PrintOptions& o) {
  std::string out;
  const bool records = o.mode == Mode::records;
  if (o.json) {
    out += "{\"layout\":";
    append_json_string(out, layout_name(img.layout));
    out += records ? ",\"records\":[" : ",\"messages\":[";
  }
  bool first = true;
  if (!records) {
    for (const Message& m : w.messages) {
      if (o.json) {
        out += fmt("%s\n{\"pos\":%" PRIu64 ",\"kind\":\"%s\",\"payload\":", first ? "" : ",",
                   is_haproxy(img.layout) ? m.pos % img.area_size : m.pos,
                   kind_name(m.kind).c_str());
        append_json_string(out, m.payload);
        out += "}";
        first = false;
      } else {
        append_remapped(out, m.payload, o.lf_remap);
        out += '\n';
      }
    }
  } else {
    auto sink = [&](const Group& g) {
      if (!o.json) {
        std::string text;
        print_group(text, g);
        append_remapped(out, text, false);
        return;
      }
      for (const Transaction* tx : g.txns)
        for (std::size_t i = 0; i < tx->records.size(); ++i) {
          Record r = tx->record(i);
          out += fmt("%s\n{\"vxid\":%" PRIu64 ",\"kind\":\"%c\",\"tag\":", first ? "" : ",", r.vxid, kind_char(r.kind));
          append_json_string(out, tag_name(r.tag));
          out += ",\"payload\":";
          append_json_string(out, r.payload);
          out += fmt(",\"truncated\":%s,\"synthetic\":%s}", r.truncated ? "true" : "false",
                     r.synthetic ? "true" : "false");
          first = false;
        }
    };
    Grouper g(GroupOptions{.mode = Grouping::raw}, sink);
    auto now = Grouper::Clock::now();
    if (w.lost_bytes) g.lost(w.lost_bytes, now);
    for (const Message& m : w.messages) {
      if (m.kind == MsgKind::notice) g.notice(m.payload, now);
      else g.feed(std::as_bytes(std::span(m.payload.data(), m.payload.size())), now);
    }
    g.flush();
  }
  if (o.json) {
    out += "\n],";
    json_skipped(out, img, w);
    out += fmt(",\"complete\":%s,\"lost_bytes\":%" PRIu64 "}\n", w.complete ? "true" : "false", w.lost_bytes);
  }
  return out;
}

namespace {

struct InfoWriter {
  bool json;
  std::string out;
  bool first = true;
  void key(const char* k) {
    if (json) {
      out += first ? "" : ",";
      out += "\n  \"";
      out += k;
      out += "\":";
    } else {
      out += fmt("%-20s ", k);
    }
    first = false;
  }
  void num(const char* k, std::uint64_t v) {
    key(k);
    out += fmt("%" PRIu64, v);
    if (!json) out += '\n';
  }
  void str(const char* k, std::string_view v) {
    key(k);
    if (json) append_json_string(out, v);
    else {
      out += v;
      out += '\n';
    }
  }
  void boolean(const char* k, bool v) {
    key(k);
    out += v ? "true" : "false";
    if (!json) out += '\n';
  }
};

std::string iso_time(std::uint64_t ns) {
  if (ns == 0) return "-";
  time_t s = static_cast<time_t>(ns / 1000000000u);
  struct tm tm {};
  gmtime_r(&s, &tm);
  char b[64];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

}  // namespace

std::string format_info(const Image& img, const WalkResult& w, bool json) {
  InfoWriter iw{json, {}};
  if (json) iw.out += "{";
  iw.str("layout", layout_name(img.layout));
  iw.num("file_size", img.file.size());
  iw.num("header_len", img.header_len);
  iw.num("area_size", img.area_size);
  const bool rl = img.layout == Layout::ringlog;
  // HAProxy offsets are shown as in the file; ringlog positions are absolute.
  iw.num("head", rl ? img.head : img.positions_ok ? img.head % img.area_size : img.hap_head);
  iw.num("tail", rl ? img.tail : img.positions_ok ? img.tail % img.area_size : img.hap_tail);
  iw.num("used", img.positions_ok ? img.tail - img.head : 0);
  iw.boolean("positions_ok", img.positions_ok);
  if (!img.positions_ok) iw.str("positions_problem", img.positions_why);
  if (img.tail_rebuilt) iw.str("positions_problem", img.tail_why);
  iw.boolean("locked", img.locked);
  for (auto& wmsg : img.warnings) iw.str("warning", wmsg);
  if (rl) {
    const Header& h = img.hdr();
    if (img.locked) {
      repair::LockOwner lo = lock_owner(img);
      if (lo.pid == 0) {
        iw.str("lock_owner", "not recorded");
      } else if (json) {
        iw.key("lock_owner");
        iw.out += fmt("{\"pid\":%u,\"slot\":%d,\"alive\":%s}", lo.pid, lo.slot, lo.alive ? "true" : "false");
      } else {
        iw.str("lock_owner", fmt("pid %u, writer slot %d, %s", lo.pid, lo.slot, lo.alive ? "alive" : "dead"));
      }
    }
    iw.num("version", h.version);
    iw.str("created", iso_time(h.created_ns));
    iw.num("creator_pid", h.creator_pid);
    iw.str("instance_id", fmt("%016" PRIx64, h.instance_id));
    iw.num("max_msg_len", h.max_msg_len);
    iw.num("pinned", h.pinned.load(std::memory_order_relaxed));
    RingStats s = read_stats(h);
    if (json) {
      iw.key("counters");
      iw.out += "{";
    }
    struct C {
      const char* name;
      std::uint64_t v;
    } counters[] = {
        {"msgs_written", s.msgs_written},       {"bytes_written", s.bytes_written},
        {"batches", s.batches},                 {"msgs_dropped", s.msgs_dropped},
        {"bytes_dropped", s.bytes_dropped},     {"msgs_truncated", s.msgs_truncated},
        {"msgs_refused", s.msgs_refused},       {"lock_waits", s.lock_waits},
        {"lock_recoveries", s.lock_recoveries}, {"torn_discarded", s.torn_discarded},
        {"readers_released", s.readers_released}, {"writer_waits", s.writer_waits},
        {"pending_drop_msgs", h.pending_drop_msgs.load(std::memory_order_relaxed)},
    };
    for (std::size_t i = 0; i < std::size(counters); ++i) {
      if (json) iw.out += fmt("%s\"%s\":%" PRIu64, i ? "," : "", counters[i].name, counters[i].v);
      else iw.num(counters[i].name, counters[i].v);
    }
    if (json) iw.out += "}";
    // Writer and reader tables: the used slots only.
    std::string wt, rt;
    unsigned nw = 0, nr = 0;
    for (unsigned i = 0; i < kWriterSlots; ++i) {
      const WriterSlot& ws = h.writers[i];
      std::uint32_t pid = ws.pid.load(std::memory_order_relaxed);
      if (!pid) continue;
      bool a = img.alive(pid, ws.start_time.load(std::memory_order_relaxed));
      std::uint64_t ip = ws.inflight_pos.load(std::memory_order_relaxed);
      std::uint64_t ie = ws.inflight_end.load(std::memory_order_relaxed);
      std::uint64_t b = ws.batches.load(std::memory_order_relaxed);
      if (json)
        wt += fmt("%s{\"slot\":%u,\"pid\":%u,\"tid\":%u,\"alive\":%s,\"inflight_pos\":%" PRIu64
                  ",\"inflight_end\":%" PRIu64 ",\"batches\":%" PRIu64 "}",
                  nw ? "," : "", i, pid, ws.tid.load(std::memory_order_relaxed), a ? "true" : "false", ip, ie, b);
      else
        wt += fmt("  writer %3u  pid %u tid %u %s  batches %" PRIu64 "%s\n", i, pid, ws.tid.load(std::memory_order_relaxed), a ? "alive" : "dead", b,
                  ip ? fmt("  in flight [%" PRIu64 ", %" PRIu64 ")", ip - 1, ie).c_str() : "");
      ++nw;
    }
    for (unsigned i = 0; i < kReaderSlots; ++i) {
      const ReaderSlot& rs = h.readers[i];
      std::uint32_t pid = rs.pid.load(std::memory_order_relaxed);
      if (!pid) continue;
      bool a = img.alive(pid, rs.start_time.load(std::memory_order_relaxed));
      std::uint64_t pos = rs.pos.load(std::memory_order_relaxed);
      std::uint64_t np = rs.next_pos.load(std::memory_order_relaxed);
      std::uint64_t mr = rs.msgs_read.load(std::memory_order_relaxed);
      if (json)
        rt += fmt("%s{\"slot\":%u,\"pid\":%u,\"alive\":%s,\"pos\":%" PRIu64 ",\"next_pos\":%" PRIu64
                  ",\"msgs_read\":%" PRIu64 "}",
                  nr ? "," : "", i, pid, a ? "true" : "false", pos == kNoPos ? 0 : pos, np, mr);
      else
        rt += fmt("  reader %3u  pid %u %s  pos %s  msgs_read %" PRIu64 "%s\n", i, pid, a ? "alive" : "dead",
                  pos == kNoPos ? "-" : fmt("%" PRIu64, pos).c_str(), mr,
                  np ? fmt("  moving to %" PRIu64, np - 1).c_str() : "");
      ++nr;
    }
    if (json) {
      iw.key("writers");
      iw.out += "[" + wt + "]";
      iw.key("readers");
      iw.out += "[" + rt + "]";
    } else {
      iw.num("writers", nw);
      iw.out += wt;
      iw.num("readers", nr);
      iw.out += rt;
    }
  }
  iw.num("messages", w.messages.size());
  iw.num("pads", w.pads);
  iw.num("skipped_ranges", w.skipped.size());
  iw.boolean("complete", w.complete);
  if (!w.complete && !w.stop_reason.empty()) iw.str("stopped", w.stop_reason);
  if (json) iw.out += "\n}\n";
  return iw.out;
}

std::string format_report(const RepairReport& r, bool json) {
  std::string out;
  if (json) {
    out += "{\"fixed\":[";
    for (std::size_t i = 0; i < r.fixed.size(); ++i) {
      if (i) out += ",";
      append_json_string(out, r.fixed[i]);
    }
    out += fmt("],\"kept_msgs\":%" PRIu64 ",\"kept_bytes\":%" PRIu64 ",\"discarded_msgs\":%" PRIu64
               ",\"discarded_bytes\":%" PRIu64 ",\"torn_batches\":%" PRIu64 ",\"bad_records\":%" PRIu64 "}\n",
               r.kept_msgs, r.kept_bytes, r.discarded_msgs, r.discarded_bytes, r.torn_batches, r.bad_records);
    return out;
  }
  for (auto& f : r.fixed) out += "fixed: " + f + "\n";
  // Found, not fixed: such messages are kept as they are (readers report them), so
  // they alone leave the ring clean, and a second repair finds the same.
  if (r.bad_records)
    out += fmt("found: %" PRIu64 " messages start like record batches but do not decode (kept; readers report them)\n",
               r.bad_records);
  if (r.fixed.empty()) out += "clean: nothing to repair\n";
  out += fmt("kept %" PRIu64 " messages (%" PRIu64 " bytes), discarded %" PRIu64 " (%" PRIu64 " bytes)\n",
             r.kept_msgs, r.kept_bytes, r.discarded_msgs, r.discarded_bytes);
  return out;
}

}  // namespace ringlog::dump
