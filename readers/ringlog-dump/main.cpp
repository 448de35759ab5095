// ringlog-dump: dumps any ring file (ringlog's, or HAProxy's backing files, like
// haring) from oldest to newest, describes its header (--info), and repairs what a
// crash left behind (--repair). Dumping maps the file read-only and never writes.
//
// Exit codes (the shared set of program.hpp, documented in ringlog-dump(1)):
//   0 clean, 1 damage found (dump: worked around; repair: repaired), 2 bad command line,
//   3 unrecoverable (unreadable file, not a ring, or repair refused/impossible).
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "ringlog_cli11.hpp"

#include "dump.hpp"
#include "program.hpp"
#include "ringlog/ring.hpp"

namespace {

namespace rd = ringlog::dump;

namespace tool = ringlog::tool;
// ringlog-dump's meanings of the shared exit codes (ringlog-dump(1)).
constexpr int kExitClean = tool::kExitOk;
constexpr int kExitDamaged = tool::kExitFailure;        // damage found: worked around or repaired
constexpr int kExitUnrecoverable = tool::kExitUnusable;  // unreadable, not a ring, repair refused

struct Fail {
  std::string msg;
};

// A file mapped read-only (dump) or read-write (in-place repair), or an aligned copy.
struct FileBytes {
  std::uint8_t* data = nullptr;
  std::size_t size = 0;
  bool mapped = false;
  std::uint8_t dummy[64] __attribute__((aligned(64))) = {};
  ~FileBytes() {
    if (mapped && size) ::munmap(data, size);
    else if (!mapped && data != dummy) std::free(data);
  }
  std::span<std::uint8_t> span() { return {data, size}; }
};

int open_checked(const std::string& path, int flags, struct stat& st) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Fail{path + ": " + std::strerror(errno)};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Fail{path + ": not a regular file"};
  }
  return fd;
}

void map_file(const std::string& path, bool writable, FileBytes& fb) {
  struct stat st {};
  int fd = open_checked(path, writable ? O_RDWR : O_RDONLY, st);
  fb.size = static_cast<std::size_t>(st.st_size);
  if (fb.size == 0) {
    ::close(fd);
    fb.data = fb.dummy;
    return;
  }
  void* p = ::mmap(nullptr, fb.size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) throw Fail{path + ": cannot map: " + std::strerror(e)};
  fb.data = static_cast<std::uint8_t*>(p);
  fb.mapped = true;
}

void copy_file(const std::string& path, FileBytes& fb, mode_t& mode) {
  struct stat st {};
  int fd = open_checked(path, O_RDONLY, st);
  mode = st.st_mode & 07777;
  fb.size = static_cast<std::size_t>(st.st_size);
  if (fb.size == 0) {
    ::close(fd);
    fb.data = fb.dummy;
    return;
  }
  fb.data = static_cast<std::uint8_t*>(std::aligned_alloc(4096, (fb.size + 4095) / 4096 * 4096));
  if (!fb.data) {
    ::close(fd);
    throw Fail{path + ": out of memory for a copy"};
  }
  std::size_t got = 0;
  while (got < fb.size) {
    ssize_t n = ::pread(fd, fb.data + got, fb.size - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      throw Fail{path + ": read: " + (n == 0 ? std::string("file shrank") : std::strerror(e))};
    }
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

void write_file(const std::string& path, std::span<const std::uint8_t> bytes, mode_t mode) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw Fail{tmp + ": " + std::strerror(errno)};
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Fail{tmp + ": write: " + std::strerror(e)};
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0 || ::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw Fail{path + ": " + std::strerror(e)};
  }
}

// Another process that maps the file writable and shared, with its name; 0 if none.
// HAProxy records no writer in its ring files: a live HAProxy shows up here. (A
// process whose maps cannot be read is not seen: run as the ring's owner or root.)
std::pair<pid_t, std::string> writable_mapper(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {0, ""};
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir("/proc"), ::closedir);
  if (!d) return {0, ""};
  const pid_t me = ::getpid();
  while (dirent* e = ::readdir(d.get())) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end || pid <= 0 || pid == me) continue;
    std::ifstream maps(std::string("/proc/") + e->d_name + "/maps");
    // "start-end perms offset major:minor inode path"
    for (std::string line; std::getline(maps, line);) {
      std::istringstream in(line);
      std::string range, perms, offset, dev;
      unsigned long long ino = 0;
      if (!(in >> range >> perms >> offset >> dev >> ino) || perms.size() < 4 || ino != st.st_ino) continue;
      unsigned maj = 0, min = 0;
      if (std::sscanf(dev.c_str(), "%x:%x", &maj, &min) != 2) continue;
      if (perms[1] == 'w' && perms[3] == 's' && maj == major(st.st_dev) && min == minor(st.st_dev)) {
        std::ifstream comm(std::string("/proc/") + e->d_name + "/comm");
        std::string name;
        std::getline(comm, name);
        return {static_cast<pid_t>(pid), name};
      }
    }
  }
  return {0, ""};
}

void out(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
}

}  // namespace

int main(int argc, char** argv) {
  tool::Cli cli("ringlog-dump", "ringlog-dump - dump and repair ring files (ringlog's and HAProxy's), live or after a crash");
  CLI::App& app = cli.app();
  std::string file, layout_arg, output;
  bool raw = false, records = false, lf = false, info = false, json = false, scan = false, force = false;
  bool do_repair = false, in_place = false;
  app.add_option("FILE", file, "Ring file (or instance name under $RINGLOG_DIR)")->type_name("FILE");
  app.add_flag("-r,--raw", raw, "Print message payloads, one per line (the default for HAProxy rings)");
  app.add_flag("-d,--records", records, "Decode records and print them like 'ringlog -g raw' (the default for ringlog rings)");
  app.add_flag("-l", lf, "Replace LF inside payloads by CR VT, to keep one message per line (as haring -l)");
  app.add_flag("-i,--info", info, "Describe the header: layout, sizes, head, tail, lock, writers, readers, counters");
  app.add_flag("-j,--json", json, "Print messages, --info or the repair report as JSON");
  app.add_flag("-s,--scan", scan, "After damage, scan for the next message boundary and go on (haring -r)");
  app.add_flag("-f,--force", force, "Read a file whose sizes do not match its layout, or force --layout on it");
  app.add_option("--layout", layout_arg, "Read the file with this layout: ringlog, haproxy-v1, haproxy-v2, haproxy-v2a")
      ->type_name("LAYOUT");
  app.add_flag("--repair", do_repair, "Repair the ring: into a copy (-o) or in place (--in-place)");
  app.add_option("-o,--output", output, "With --repair: write the repaired copy to this path")->type_name("OUT");
  app.add_flag("--in-place", in_place, "With --repair: repair the file itself (refused while a writer is alive)");
  cli.footer(
      "Dumping maps the file read-only and never writes to it. Layouts are detected: ringlog\n"
      "rings by their magic, HAProxy backing files (2.x 'struct buffer', 3.x 'size, rsvd, tail,\n"
      "head', unaligned or cache-aligned) as haring does.",
      {{kExitClean, "clean"},
       {kExitDamaged, "damage found (dump: skipped, repair: repaired)"},
       {tool::kExitUsage, "bad command line"},
       {kExitUnrecoverable, "unrecoverable (unreadable, not a ring, repair refused or impossible)"}});

  if (auto rc = cli.parse(argc, argv)) return *rc;
  auto usage_error = [&cli](const std::string& msg) { return cli.usage_error(msg); };
  if (file.empty()) return usage_error("no ring file given");
  if (raw && records) return usage_error("--raw and --records exclude each other");
  std::optional<rd::Layout> layout;
  if (!layout_arg.empty()) {
    layout = rd::layout_by_name(layout_arg);
    if (!layout) return usage_error("--layout: expected ringlog, haproxy-v1, haproxy-v2 or haproxy-v2a, got '" + layout_arg + "'");
  }
  if (!do_repair && (in_place || !output.empty())) return usage_error("-o and --in-place go with --repair");
  if (do_repair) {
    if (in_place == !output.empty()) return usage_error("--repair needs either -o OUT or --in-place");
    if (info || raw || records || lf || scan) return usage_error("--repair does not dump: drop --info, --raw, --records, -l, --scan");
  }
  std::string path = ringlog::resolve_ring_path(file);

  try {
    if (do_repair) {
      FileBytes fb;
      mode_t mode = 0640;
      if (in_place) {
        map_file(path, true, fb);
      } else {
        struct stat a {}, b {};
        if (::stat(path.c_str(), &a) == 0 && ::stat(output.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
            a.st_ino == b.st_ino)
          return usage_error("-o names the ring itself; use --in-place to repair it in place");
        copy_file(path, fb, mode);
      }
      rd::Image img;
      std::string why = rd::parse(fb.span(), layout, force, img);
      if (!why.empty()) throw Fail{path + ": " + why};
      for (auto& w : img.warnings) std::cerr << "ringlog-dump: warning: " << w << "\n";
      if (in_place && img.layout != rd::Layout::ringlog) {
        if (auto [pid, name] = writable_mapper(path); pid) {
          std::cerr << "ringlog-dump: " << path << ": repair refused: process " << pid << " (" << name
                    << ") maps the ring writable; stop it, or repair a copy with -o\n";
          return kExitUnrecoverable;
        }
      }
      rd::RepairReport rep;
      std::string err;
      rd::RepairStatus st = rd::repair(img, rd::RepairOptions{.in_place = in_place}, rep, err);
      if (st == rd::RepairStatus::refused || st == rd::RepairStatus::unrecoverable) {
        std::cerr << "ringlog-dump: " << path << ": "
                  << (st == rd::RepairStatus::refused ? "repair refused: " : "cannot repair: ") << err << "\n";
        return kExitUnrecoverable;
      }
      if (in_place) {
        if (fb.mapped && ::msync(fb.data, fb.size, MS_SYNC) != 0) throw Fail{path + ": msync: " + std::strerror(errno)};
      } else {
        write_file(output, fb.span(), mode);
      }
      out(rd::format_report(rep, json));
      std::fflush(stdout);
      return st == rd::RepairStatus::repaired ? kExitDamaged : kExitClean;
    }

    FileBytes fb;
    map_file(path, false, fb);
    rd::Image img;
    std::string why = rd::parse(fb.span(), layout, force, img);
    if (!why.empty()) throw Fail{path + ": " + why};
    for (auto& w : img.warnings) std::cerr << "ringlog-dump: warning: " << w << "\n";
    // Without a tail there is nothing to dump; --info still describes the header.
    if (!img.tail_ok && !info) throw Fail{path + ": cannot dump: " + img.positions_why};
    rd::WalkResult w = rd::walk(img, rd::WalkOptions{.scan = scan});
    bool damaged = !w.complete || !w.skipped.empty() || w.head_rebuilt || img.tail_rebuilt;
    if (img.locked && img.layout == rd::Layout::ringlog && !rd::lock_owner(img).alive) damaged = true;
    if (info) {
      out(rd::format_info(img, w, json));
    } else {
      rd::PrintOptions po;
      po.mode = raw ? rd::Mode::raw : records ? rd::Mode::records
                                              : (img.layout == rd::Layout::ringlog ? rd::Mode::records : rd::Mode::raw);
      po.lf_remap = lf;
      po.json = json;
      out(rd::format_messages(img, w, po));
    }
    if (std::fflush(stdout) != 0) throw Fail{std::string("write: ") + std::strerror(errno)};
    // What was worked around goes to stderr, so stdout stays the messages. HAProxy
    // positions are shown as the offsets its files hold.
    auto shown = [&](std::uint64_t p) { return img.layout == rd::Layout::ringlog ? p : p % img.area_size; };
    if (!img.positions_ok) std::cerr << "ringlog-dump: " << path << ": " << img.positions_why << "\n";
    if (img.tail_rebuilt) std::cerr << "ringlog-dump: " << path << ": " << img.tail_why << "\n";
    if (w.head_rebuilt) std::cerr << "ringlog-dump: " << path << ": head rebuilt by scanning: starting at " << shown(w.start) << "\n";
    for (auto& s : w.skipped)
      std::cerr << "ringlog-dump: " << path << ": skipped " << (s.end - s.pos) << " bytes at " << shown(s.pos) << ": " << s.why << "\n";
    if (w.lost_bytes) std::cerr << "ringlog-dump: " << path << ": " << w.lost_bytes << " bytes overwritten by writers while reading\n";
    if (!w.complete)
      std::cerr << "ringlog-dump: " << path << ": stopped before the tail: " << w.stop_reason
                << " (--scan skips damage; --repair fixes the file)\n";
    return damaged ? kExitDamaged : kExitClean;
  } catch (const Fail& f) {
    std::cerr << "ringlog-dump: " << f.msg << "\n";
    return kExitUnrecoverable;
  } catch (const std::exception& e) {
    std::cerr << "ringlog-dump: " << path << ": " << e.what() << "\n";
    return kExitUnrecoverable;
  }
}
