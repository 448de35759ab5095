// Text forms of stats snapshots (varnishstat -1/-j/-l shapes and Prometheus exposition).
// Input strings come from a shared file: they are escaped for every output format.
#include <fnmatch.h>
#include <time.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>

#include "ringlog/stats_output.hpp"

#include "ringlog/json.hpp"

namespace ringlog::stats {

Filter::Filter(std::vector<std::string> globs) {
  for (auto& g : globs) {
    if (!g.empty() && g[0] == '^') exclude_.push_back(g.substr(1));
    else include_.push_back(std::move(g));
  }
}

bool Filter::match(std::string_view name) const {
  std::string n(name);
  if (!include_.empty()) {
    bool in = false;
    for (const auto& g : include_)
      if (::fnmatch(g.c_str(), n.c_str(), 0) == 0) {
        in = true;
        break;
      }
    if (!in) return false;
  }
  for (const auto& g : exclude_)
    if (::fnmatch(g.c_str(), n.c_str(), 0) == 0) return false;
  return true;
}

char flag_letter(Type t) noexcept {
  switch (t) {
    case Type::counter: return 'c';
    case Type::gauge: return 'g';
    case Type::bitmap: return 'b';
  }
  return '?';
}

char format_letter(Type t, Format f) noexcept {
  if (t == Type::bitmap) return 'b';
  switch (f) {
    case Format::integer: return 'i';
    case Format::bytes: return 'B';
    case Format::duration: return 'd';
  }
  return '?';
}

std::string value_text(const CounterValue& c) {
  char buf[64];
  if (c.format == Format::duration && c.type != Type::bitmap) {
    std::snprintf(buf, sizeof buf, "%.6f", c.value());
  } else if (c.type == Type::gauge) {
    std::snprintf(buf, sizeof buf, "%" PRId64, c.as_signed());
  } else {
    std::snprintf(buf, sizeof buf, "%" PRIu64, c.raw);
  }
  return buf;
}

std::string dhms(double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  auto t = static_cast<std::uint64_t>(seconds);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%" PRIu64 "+%02u:%02u:%02u", t / 86400, unsigned(t / 3600 % 24),
                unsigned(t / 60 % 60), unsigned(t % 60));
  return buf;
}

std::string format_once(const Snapshot& s, const Filter& f) {
  std::size_t w = 18;
  for (const auto& c : s.counters)
    if (f.match(c.name)) w = std::max(w, c.name.size());
  const double up = s.uptime_seconds();
  std::string out;
  char buf[128];
  for (const auto& c : s.counters) {
    if (!f.match(c.name)) continue;
    out += c.name;
    out.append(w - c.name.size(), ' ');
    std::snprintf(buf, sizeof buf, " %12s", value_text(c).c_str());
    out += buf;
    if (c.type == Type::counter) std::snprintf(buf, sizeof buf, " %12.2f ", up > 0 ? c.value() / up : 0.0);
    else std::snprintf(buf, sizeof buf, " %12s ", ".");
    out += buf;
    for (char ch : c.description) out += static_cast<unsigned char>(ch) < 0x20 ? ' ' : ch;  // one line each
    out += '\n';
  }
  return out;
}

std::string format_json(const Snapshot& s, const Filter& f) {
  char ts[64];
  time_t t = static_cast<time_t>(s.timestamp_ns / 1000000000u);
  struct tm tm {};
  localtime_r(&t, &tm);
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out = "{\n  \"version\": 1,\n  \"timestamp\": \"";
  out += ts;
  out += "\",\n  \"counters\": {";
  bool first = true;
  for (const auto& c : s.counters) {
    if (!f.match(c.name)) continue;
    out += first ? "\n" : ",\n";
    first = false;
    out += "    ";
    append_json_string(out, c.name);
    out += ": {\n      \"description\": ";
    append_json_string(out, c.description);
    out += ",\n";
    out += std::string("      \"flag\": \"") + flag_letter(c.type) + "\",\n";
    out += std::string("      \"format\": \"") + format_letter(c.type, c.format) + "\",\n";
    out += "      \"value\": " + value_text(c) + "\n    }";
  }
  out += first ? "}\n}\n" : "\n  }\n}\n";
  return out;
}

std::string format_list(const Snapshot& s, const Filter& f) {
  std::size_t w = 30;
  for (const auto& c : s.counters)
    if (f.match(c.name)) w = std::max(w, c.name.size() + 1);
  auto row = [&](std::string_view a, std::string_view b) {
    std::string r(a);
    r.append(w - a.size(), ' ');
    r += b;
    r += '\n';
    return r;
  };
  std::string out = "Available fields:\n";
  out += row("Field name", "Description");
  out += row("----------", "-----------");
  for (const auto& c : s.counters)
    if (f.match(c.name)) out += row(c.name, c.description);
  return out;
}

namespace {
std::string metric_chars(std::string_view s) {
  std::string o;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    o += ok ? static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c) : '_';
  }
  return o;
}
std::string help_escape(std::string_view s) {
  std::string o;
  for (char c : s) {
    if (c == '\\') o += "\\\\";
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o;
}
// The length of the valid UTF-8 sequence at s[i], 0 if it is not one (overlong forms,
// surrogates and values past U+10FFFF are not).
std::size_t utf8_len(std::string_view s, std::size_t i) {
  auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned c = b(i);
  std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  unsigned v = n == 1 ? c : c & (0x7f >> n);
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    v = (v << 6) | (b(i + k) & 0x3f);
  }
  static constexpr unsigned kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < kMin[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
  return n;
}
// A label value: backslash, newline and double quote escaped; bytes that are not UTF-8
// (Prometheus refuses the whole scrape for one) become U+FFFD.
std::string label_escape(std::string_view s) {
  std::string o;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t n = utf8_len(s, i);
    if (n == 0) {
      o += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    char c = s[i];
    if (c == '\\') o += "\\\\";
    else if (c == '\n') o += "\\n";
    else if (c == '"') o += "\\\"";
    else o.append(s.substr(i, n));
    i += n;
  }
  return o;
}

// Families in the order they first appear, each with its samples, so that HELP and TYPE
// come once and the samples of a family stay together (the text format requires it).
class Exposition {
 public:
  // Adds the sample "name{labels} value"; labels is "" or `a="x",b="y"`. A sample whose
  // type contradicts its family's is dropped.
  void add(const std::string& name, std::string_view help, const char* type, const std::string& labels,
           const char* value) {
    auto [it, fresh] = fam_.try_emplace(name);
    Family& fm = it->second;
    if (fresh) {
      order_.push_back(name);
      fm.help = help_escape(help);
      fm.type = type;
    } else if (std::string_view(fm.type) != type) {
      return;
    }
    fm.samples += name;
    if (!labels.empty()) fm.samples += "{" + labels + "}";
    fm.samples += ' ';
    fm.samples += value;
    fm.samples += '\n';
  }
  void add(const CounterValue& c, const std::string& instance_label) {
    std::string labels = instance_label;
    if (!c.ident.empty()) labels += (labels.empty() ? "" : ",") + std::string("ident=\"") + label_escape(c.ident) + "\"";
    char buf[64];
    if (c.format == Format::duration && c.type != Type::bitmap) std::snprintf(buf, sizeof buf, "%.9f", c.value());
    else if (c.type == Type::gauge) std::snprintf(buf, sizeof buf, "%" PRId64, c.as_signed());
    else std::snprintf(buf, sizeof buf, "%" PRIu64, c.raw);
    add(prometheus_family(c), c.description, c.type == Type::counter ? "counter" : "gauge", labels, buf);
  }
  std::string text() const {
    std::string out;
    for (const auto& n : order_) {
      const Family& fm = fam_.at(n);
      out += "# HELP " + n + " " + fm.help + "\n";
      out += "# TYPE " + n + " " + fm.type + "\n";
      out += fm.samples;
    }
    return out;
  }

 private:
  struct Family {
    std::string help;
    const char* type = "";
    std::string samples;
  };
  std::vector<std::string> order_;
  std::map<std::string, Family> fam_;
};
}  // namespace

std::string prometheus_family(const CounterValue& c) {
  std::string n = "ringlog_" + metric_chars(c.group) + "_" + metric_chars(c.field);
  if (c.type != Type::bitmap) {
    if (c.format == Format::bytes && !n.ends_with("bytes")) n += "_bytes";  // s_resp_bodybytes stays
    if (c.format == Format::duration && !n.ends_with("_seconds")) n += "_seconds";
  }
  if (c.type == Type::counter) n += "_total";
  return n;
}

std::string format_prometheus(const Snapshot& s, const Filter& f) {
  Exposition e;
  for (const auto& c : s.counters)
    if (f.match(c.name)) e.add(c, "");
  return e.text();
}

std::string format_prometheus(std::span<const PrometheusInstance> instances, const Filter& f) {
  Exposition e;
  auto label = [](const PrometheusInstance& in) {
    return std::string(kPrometheusInstanceLabel) + "=\"" + label_escape(in.name) + "\"";
  };
  const std::string up = "ringlog_up", running = "ringlog_writer_running";
  for (const auto& in : instances)
    e.add(up, "1 when the instance's stats or ring file could be read for this scrape, 0 when absent or unreadable",
          "gauge", label(in), in.snapshot ? "1" : "0");
  for (const auto& in : instances)
    e.add(running, "1 while the process that created the instance's files runs", "gauge", label(in),
          in.snapshot && in.snapshot->writer_alive ? "1" : "0");
  for (const auto& in : instances) {
    if (!in.snapshot) continue;
    std::string l = label(in);
    for (const auto& c : in.snapshot->counters)
      // A writer's group WRITER with a gauge "running" would be read as the state above.
      if (f.match(c.name) && prometheus_family(c) != running) e.add(c, l);
  }
  return e.text();
}

}  // namespace ringlog::stats
