// RFC 5424 formatting and RFC 6587 framing for ringlog-forward (see syslog.hpp).
#include "syslog.hpp"

#include <array>
#include <charconv>
#include <cstdio>

namespace ringlog::forward {

namespace {
constexpr std::array<std::string_view, 24> kFacilities = {
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "authpriv", "ftp",
    "ntp", "security", "console", "solaris-cron", "local0", "local1", "local2", "local3", "local4", "local5",
    "local6", "local7"};
constexpr std::array<std::string_view, 8> kSeverities = {"emerg", "alert", "crit", "err",
                                                         "warning", "notice", "info", "debug"};
}  // namespace

std::optional<Framing> framing_by_name(std::string_view s) noexcept {
  if (s == "octet-counting" || s == "octet") return Framing::octet_counting;
  if (s == "lf") return Framing::lf;
  return std::nullopt;
}

std::optional<int> facility_by_name(std::string_view s) noexcept {
  for (std::size_t i = 0; i < kFacilities.size(); ++i)
    if (kFacilities[i] == s) return static_cast<int>(i);
  return std::nullopt;
}

std::optional<int> severity_by_name(std::string_view s) noexcept {
  for (std::size_t i = 0; i < kSeverities.size(); ++i)
    if (kSeverities[i] == s) return static_cast<int>(i);
  if (s == "error") return 3;
  if (s == "warn") return 4;
  return std::nullopt;
}

std::string sanitize_field(std::string_view s, std::size_t max) {
  std::string out;
  for (char c : s) {
    if (out.size() >= max) break;
    auto u = static_cast<unsigned char>(c);
    if (u >= 33 && u <= 126) out.push_back(c);
  }
  if (out.empty()) out = "-";
  return out;
}

void append_timestamp(std::string& out, std::uint64_t realtime_ns) {
  const auto sec = static_cast<time_t>(realtime_ns / 1'000'000'000u);
  // The date and time of day change once a second: format them then, not per message.
  thread_local time_t cached_sec = -1;
  thread_local char cached[64];
  if (sec != cached_sec) {
    std::tm tm{};
    time_t secs = sec;
    gmtime_r(&secs, &tm);
    std::snprintf(cached, sizeof cached, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    cached_sec = sec;
  }
  out.append(cached, 19);
  char frac[8] = {'.', '0', '0', '0', '0', '0', '0', 'Z'};
  std::uint64_t us = realtime_ns % 1'000'000'000u / 1000;
  for (int i = 6; i >= 1; --i, us /= 10) frac[i] = static_cast<char>('0' + us % 10);
  out.append(frac, sizeof frac);
}

void append_rfc5424(std::string& out, const HeaderFields& h, std::string_view msgid, std::uint64_t realtime_ns,
                    std::string_view msg) {
  char pri[8] = {'<'};
  auto r = std::to_chars(pri + 1, pri + 5, h.facility * 8 + h.severity);
  out.append(pri, r.ptr);
  out += ">1 ";
  append_timestamp(out, realtime_ns);
  out.push_back(' ');
  out += h.hostname;
  out.push_back(' ');
  out += h.app_name;
  out.push_back(' ');
  out += h.procid;
  out.push_back(' ');
  out += msgid.empty() ? std::string_view("-") : msgid;
  out += " -";  // no STRUCTURED-DATA
  if (!msg.empty()) {
    out.push_back(' ');
    out += msg;
  }
}

void append_frame(std::string& out, Framing f, std::string_view msg) {
  if (f == Framing::octet_counting) {
    char len[24];
    auto r = std::to_chars(len, len + sizeof len, msg.size());
    out.append(len, r.ptr);
    out.push_back(' ');
    out += msg;
    return;
  }
  std::size_t start = 0;
  for (;;) {
    std::size_t lf = msg.find('\n', start);
    if (lf == std::string_view::npos) break;
    out.append(msg.substr(start, lf - start));
    out += "#012";  // rsyslog's escape for LF: the frame must not end early
    start = lf + 1;
  }
  out.append(msg.substr(start));
  out.push_back('\n');
}

std::optional<std::string> read_frame(std::string_view in, Framing f, std::size_t& used, bool& bad) {
  bad = false;
  if (f == Framing::lf) {
    std::size_t lf = in.find('\n');
    if (lf == std::string_view::npos) return std::nullopt;
    used = lf + 1;
    return std::string(in.substr(0, lf));
  }
  std::size_t sp = in.find(' ');
  if (sp == std::string_view::npos) {
    bad = in.size() > 10 || in.find_first_not_of("0123456789") != std::string_view::npos;
    return std::nullopt;
  }
  std::size_t len = 0;
  auto r = std::from_chars(in.data(), in.data() + sp, len);
  if (sp == 0 || sp > 10 || r.ptr != in.data() + sp || in[0] == '0') {
    bad = true;
    return std::nullopt;
  }
  if (in.size() - sp - 1 < len) return std::nullopt;
  used = sp + 1 + len;
  return std::string(in.substr(sp + 1, len));
}

}  // namespace ringlog::forward
