// ringlog: the live tail of a ringlog instance, like varnishlog: groups records into
// transactions (-g), selects them (-q, -c/-b, -k, -R), filters records (-i/-x/-I/-X)
// and prints them in varnishlog's layouts, as JSON lines (-j), or stores them in a
// binary file (-w) that -r reads back. It only reads the ring (passive) unless
// --pinned is given.
//
// Exit codes (the shared set of program.hpp, documented in ringlog(1)):
//   0 success, 1 runtime error (missing ring after -t, unreadable or damaged file,
//   write error), 2 bad command line (bad flag or value, bad query with its position),
//   3 ring unusable (permission denied, not a ringlog ring).
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "ringlog_cli11.hpp"

#include "reader_tool.hpp"
#include "ringlog/json.hpp"
#include "ringlog/logfile.hpp"
#include "ringlog/printer.hpp"

namespace {

namespace rt = ringlog::tool;

constexpr const char* kTool = "ringlog";
constexpr std::size_t kOutFlushAt = 1 << 18;

// Where text goes: stdout, or the -w file with -A. Reopened on SIGHUP.
class TextOut {
 public:
  void open(const std::string& path, bool append) {
    if (path == "-") return;  // -w - -A: the text goes to standard output, as without -w
    path_ = path;
    append_ = append;
    reopen(append);
  }
  void reopen(bool append) {
    if (path_.empty()) return;
    flush();
    if (f_ && f_ != stdout) std::fclose(f_);
    f_ = std::fopen(path_.c_str(), append ? "a" : "w");
    if (!f_) throw rt::RuntimeError("cannot open " + path_ + ": " + std::strerror(errno));
  }
  ringlog::OutBuffer& buf() { return buf_; }
  // JSON lines are built in a string, then copied to the buffer.
  void append_json(const ringlog::Group& g, const ringlog::JsonFilter& jf) {
    json_.clear();
    ringlog::append_json(json_, g, jf);
    buf_ += json_;
  }
  void maybe_flush() {
    if (buf_.size() >= kOutFlushAt) write_out();
  }
  // One write(2) per chunk (stdio's buffer would only copy it once more).
  void write_out() {
    if (buf_.empty()) return;
    if (std::fflush(f_) != 0) failed_ = true;
    const char* p = buf_.data();
    std::size_t left = buf_.size();
    while (left > 0 && !failed_) {
      ssize_t n = ::write(fileno(f_), p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        failed_ = true;
        break;
      }
      p += n;
      left -= std::size_t(n);
    }
    buf_.clear();
  }
  void flush() {
    write_out();
    if (f_ && std::fflush(f_) != 0) failed_ = true;
  }
  bool failed() const { return failed_; }
  const std::string& path() const { return path_; }
  ~TextOut() {
    if (f_ && f_ != stdout) std::fclose(f_);
  }

 private:
  std::FILE* f_ = stdout;
  std::string path_;
  bool append_ = false;
  ringlog::OutBuffer buf_;
  std::string json_;
  bool failed_ = false;
};

// printer.cpp's level markers: "-   ", "--  ", "--- ", then "-4- ".
void level_marker(ringlog::OutBuffer& out, unsigned level, char c) {
  if (level > 3) {
    out += c;
    out += std::to_string(level);
    out += c;
    out += ' ';
    return;
  }
  out.append(level, c);
  out.append(4 - level, ' ');
}

// A group in varnishlog's layout with the record filters applied; -v prints each
// record like -g raw does (vxid, tag, side) after its level marker.
void print_filtered(ringlog::OutBuffer& out, const ringlog::Group& g, const rt::RecordFilter& f, bool verbose) {
  if (f.empty() && !verbose) {
    ringlog::print_group(out, g);
    return;
  }
  if (g.mode == ringlog::Grouping::raw) {
    for (const ringlog::Transaction* t : g.txns)
      for (std::size_t i = 0; i < t->records.size(); ++i) {
        ringlog::Record r = t->record(i);
        if (f.show(r)) ringlog::print_raw(out, r);
      }
    return;
  }
  std::size_t before = out.size();
  for (const ringlog::Transaction* t : g.txns) {
    if (!f.show_txn(*t)) continue;
    level_marker(out, t->level, '*');
    if (verbose) out.append(11, ' ');  // varnishlog -v lines the label up with the tags
    out += ringlog::txn_label(*t);
    out += verbose ? "   " : " ";
    std::string v = std::to_string(t->vxid);
    out += v;
    if (v.size() < 10) out.append(10 - v.size(), ' ');
    out += '\n';
    for (std::size_t i = 0; i < t->records.size(); ++i) {
      ringlog::Record r = t->record(i);
      if (!f.show(r)) continue;
      if (verbose) {
        level_marker(out, t->level, '-');
        ringlog::print_raw(out, r);
      } else {
        ringlog::print_terse(out, t->level, r);
      }
    }
  }
  if (out.size() != before) out += '\n';
}

}  // namespace

int main(int argc, char** argv) {
  rt::Cli cli(kTool, "ringlog - show the records of a ringlog instance, grouped into transactions (like varnishlog)");
  CLI::App& app = cli.app();
  rt::ReaderOptions ro;
  bool verbose = false, json = false, append = false, text_file = false;
  std::string write_file;
  rt::add_reader_options(app, ro);
  app.add_flag("-v", verbose, "Verbose record lines: vxid, tag and side on every record of a group");
  app.add_flag("-j", json, "Print one JSON object per transaction group, one per line");
  app.add_option("-w", write_file,
                 "Write the selected transactions to FILE in ringlog's binary format (SIGHUP reopens it)")
      ->type_name("FILE");
  app.add_flag("-a", append, "With -w, append to FILE instead of overwriting it");
  app.add_flag("-A", text_file, "With -w, write the text output (or -j lines) instead of the binary format");
  cli.footer(
      "Default: tail the default instance from now on, grouped by vxid.\n"
      "Queries: see ringlog-query(7). Record filters -i/-x/-I/-X apply in command-line order.",
      {{rt::kExitOk, "ok"},
       {rt::kExitFailure, "runtime error (missing ring, unreadable or damaged file, write error)"},
       {rt::kExitUsage, "bad command line (bad flag or value, bad query: the error names its position)"},
       {rt::kExitUnusable, "ring unusable (permission denied, not a ringlog ring)"}});

  if (auto rc = rt::parse_reader_command_line(cli, ro, argc, argv)) return *rc;
  auto usage_error = [&cli](const std::string& msg) { return cli.usage_error(msg); };
  if ((append || text_file) && write_file.empty()) return usage_error("-a and -A need -w FILE");
  if (json && !write_file.empty() && !text_file) return usage_error("-j with -w writes JSON lines only with -A");
  if (verbose && json) return usage_error("-v and -j exclude each other");
  if (!write_file.empty() && write_file == ro.read_file && write_file != "-")
    return usage_error("-w and -r name the same file");

  rt::install_signal_handlers();
  std::setvbuf(stdout, nullptr, _IOFBF, 1 << 16);

  TextOut text;
  std::optional<ringlog::LogFileWriter> bin;
  try {
    if (!write_file.empty()) {
      if (text_file) text.open(write_file, append);
      else bin.emplace(ringlog::LogFileWriter::open(write_file, append));
    }
  } catch (const std::exception& e) {
    return cli.fail(e.what());
  }

  // -g raw with -q/-k/-R: one record at a time, as varnishlog (see RawSelect). -k and
  // -R count the records printed (or, with -w, stored).
  rt::RawSelect raw(ro);

  rt::ReaderLoop loop(ro, kTool);
  const rt::RecordFilter& filter = ro.filter;
  ringlog::JsonFilter jf;
  if (!filter.empty()) {
    jf.txn_filter = [&filter](const ringlog::Transaction& t) { return filter.show_txn(t); };
    jf.record_filter = [&filter](const ringlog::Transaction&, const ringlog::Record& r) { return filter.show(r); };
  }
  bool io_failed = false;
  std::string io_error;

  // -g raw with -q/-k/-R: `kept` gathers the records of a batch that were selected (for
  // -j and -w), one transaction at a time.
  ringlog::Transaction kept;
  const ringlog::Group kept_group{ringlog::Grouping::raw, {&kept}};
  const ringlog::JsonFilter no_filter;  // kept holds only records already selected
  auto raw_records = [&](const ringlog::Group& g) {
    raw.select(
        g, loop,
        [&](const ringlog::Transaction& t) {
          rt::copy_txn_fields(kept, t);
          kept.clear_records();
        },
        [&](const ringlog::Record& r) { return bin ? raw.side_ok(r) : filter.show(r); },  // -w stores records unfiltered
        [&](const ringlog::Transaction& t, std::size_t i, const ringlog::Record& r) {
          if (bin || json) kept.add(t.record(i));
          else ringlog::print_raw(text.buf(), r);
        },
        [&](const ringlog::Transaction&) {
          if (kept.records.empty()) return;
          if (bin) bin->write_group(kept_group);
          else text.append_json(kept_group, no_filter);
        });
    text.maybe_flush();
  };

  loop.on_group([&](const ringlog::Group& g) {
    if (raw.active()) {
      raw_records(g);
      return;
    }
    if (bin) {
      bin->write_group(g);
      return;
    }
    if (json) text.append_json(g, jf);
    else print_filtered(text.buf(), g, filter, verbose);
    text.maybe_flush();
  });
  if (!json && !raw.active()) {
    loop.on_raw([&](std::span<const std::byte> msg) {
      if (bin) {
        bin->write(msg);
        return;
      }
      ringlog::OutBuffer& out = text.buf();
      ringlog::BatchDecoder d(msg);
      ringlog::Record r;
      const bool all = filter.empty();
      while (d.next(r))
        if (all || filter.show(r)) ringlog::print_raw(out, r);
      if (!d.valid() || d.status() != ringlog::DecodeStatus::ok) {
        // Damaged bytes: say so like the grouper does, never drop silently.
        ringlog::Record s{ringlog::Tag::VSL, ringlog::VxidKind::none, false, true, d.header().vxid,
                          std::string_view(ringlog::to_string(d.status()))};
        if (all || filter.show(s)) ringlog::print_raw(out, s);
      }
      text.maybe_flush();
    });
  }
  auto flush_all = [&] {
    try {
      if (bin) bin->flush();
    } catch (const std::exception& e) {
      if (!io_failed) io_error = e.what();
      io_failed = true;
      ringlog::tool::request_stop();
    }
    text.flush();
    if (text.failed() && !io_failed) {
      io_failed = true;
      io_error = std::string("write error: ") + std::strerror(errno);
      ringlog::tool::request_stop();
    }
  };
  auto on_hup = [&] {
    if (!rt::take_hup()) return;
    try {
      if (bin) bin->reopen();
      else if (!text.path().empty()) text.reopen(true);
    } catch (const std::exception& e) {
      if (!io_failed) io_error = e.what();
      io_failed = true;
      ringlog::tool::request_stop();
    }
  };
  loop.on_idle([&] {
    flush_all();
    on_hup();
  });
  loop.on_tick(on_hup);

  int rc = loop.run();
  flush_all();
  if (io_failed) return cli.fail(io_error);
  return rc;
}
