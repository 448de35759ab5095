// Transaction grouping (varnishlog -g). Transactions are collected by vxid; a group is
// reported when its root and every transaction linked under it have ended, or forced
// out by timeout, the pending limit or end of input, with synthetic VSL records on
// each transaction that was still incomplete. Input may be hostile: every walk over
// parent/child links is bounded, so cycles cannot hang or overflow the stack.
#include "ringlog/group.hpp"

#include <algorithm>
#include <charconv>

namespace ringlog {

namespace {

constexpr unsigned kMaxDepth = 64;        // deeper link chains are treated as broken
constexpr std::size_t kRecentMax = 65536; // reported vxids remembered for late children

HeldRecord hold(const Record& r) { return HeldRecord{r.tag, r.truncated, false, std::string(r.payload)}; }
HeldRecord synth(std::string text) { return HeldRecord{Tag::VSL, false, true, std::move(text)}; }

// "<type> <vxid> <reason>" (Begin, Link).
bool parse_ref(std::string_view s, TxnType& type, std::uint64_t& vxid, std::string& reason) {
  std::size_t sp = s.find(' ');
  if (sp == std::string_view::npos) return false;
  type = type_by_name(s.substr(0, sp));
  s.remove_prefix(sp + 1);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), vxid);
  if (ec != std::errc()) return false;
  s.remove_prefix(std::size_t(p - s.data()));
  if (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  reason.assign(s);
  return true;
}

}  // namespace

struct Grouper::Node {
  Transaction t;
  std::vector<std::uint64_t> links;  // children named by Link records, in order
  Clock::time_point seen;
  bool overrun = false;
};

std::optional<Grouping> grouping_by_name(std::string_view s) noexcept {
  if (s == "raw") return Grouping::raw;
  if (s == "vxid") return Grouping::vxid;
  if (s == "request") return Grouping::request;
  if (s == "session") return Grouping::session;
  return std::nullopt;
}

std::string_view grouping_name(Grouping g) noexcept {
  switch (g) {
    case Grouping::raw: return "raw";
    case Grouping::vxid: return "vxid";
    case Grouping::request: return "request";
    case Grouping::session: return "session";
  }
  return "?";
}

Grouper::Grouper(const GroupOptions& opts, Sink sink) : opts_(opts), sink_(std::move(sink)) {
  if (opts_.max_pending == 0) opts_.max_pending = 1;
}

Grouper::~Grouper() = default;

Grouper::Node* Grouper::node(std::uint64_t vxid) noexcept {
  auto it = nodes_.find(vxid);
  return it == nodes_.end() ? nullptr : it->second.get();
}

Grouper::Node& Grouper::get_or_add(std::uint64_t vxid, VxidKind kind, Clock::time_point now) {
  auto& slot = nodes_[vxid];
  if (!slot) {
    slot = std::make_unique<Node>();
    slot->t.vxid = vxid;
    slot->t.kind = kind;
    slot->seen = now;
    age_.emplace_back(vxid, now);
  }
  return *slot;
}

void Grouper::emit_single(Transaction t) {
  Group g;
  g.mode = opts_.mode;
  g.txns.push_back(&t);
  sink_(g);
}

void Grouper::feed(std::span<const std::byte> msg, Clock::time_point now) {
  last_now_ = now;
  BatchDecoder d(msg);
  if (!d.valid()) {
    Transaction t;
    t.records.push_back(synth(std::string(to_string(d.status())) + " (" + std::to_string(msg.size()) + " bytes)"));
    t.ended = true;
    emit_single(std::move(t));
    return;
  }
  const BatchHeader& h = d.header();
  Record r;
  if (opts_.mode == Grouping::raw || h.vxid == 0) {
    Transaction t;
    t.vxid = h.vxid;
    t.kind = h.kind;
    t.ended = true;
    while (d.next(r)) t.records.push_back(hold(r));
    if (d.status() != DecodeStatus::ok) t.records.push_back(synth(std::string("batch cut: ") + to_string(d.status())));
    emit_single(std::move(t));
    return;
  }
  Node& n = get_or_add(h.vxid, h.kind, now);
  // Most transactions are one batch of a few dozen records: one allocation, not the
  // vector's doubling (its moves showed in the -g request profile).
  if (n.t.records.empty()) n.t.records.reserve(32);
  while (d.next(r)) {
    if (r.tag == Tag::Begin && !n.t.begun) {
      if (parse_ref(r.payload, n.t.type, n.t.parent, n.t.reason)) {
        n.t.begun = true;
        if (n.t.parent != 0 && n.t.parent != n.t.vxid) claimed_[n.t.parent].push_back(n.t.vxid);
      }
    } else if (r.tag == Tag::Link) {
      TxnType ct;
      std::uint64_t cv = 0;
      std::string why;
      if (parse_ref(r.payload, ct, cv, why) && cv != 0 && cv != n.t.vxid &&
          std::find(n.links.begin(), n.links.end(), cv) == n.links.end())
        n.links.push_back(cv);
    } else if (r.tag == Tag::End) {
      n.t.ended = true;
    }
    n.t.records.push_back(hold(r));
  }
  if (d.status() != DecodeStatus::ok) n.t.records.push_back(synth(std::string("batch cut: ") + to_string(d.status())));
  if (h.last) n.t.ended = true;
  if (n.t.ended) try_emit(n);
  enforce_limit();
}

void Grouper::notice(std::string_view text, Clock::time_point now) {
  last_now_ = now;
  Transaction t;
  t.ended = true;
  t.records.push_back(synth("ring: " + std::string(text)));
  emit_single(std::move(t));
}

void Grouper::lost(std::uint64_t bytes, Clock::time_point now) {
  last_now_ = now;
  for (auto& [vx, n] : nodes_) n->overrun = true;
  Transaction t;
  t.ended = true;
  t.records.push_back(synth("overrun: " + std::to_string(bytes) + " bytes lost"));
  emit_single(std::move(t));
}

bool Grouper::is_root(const Node& n) const noexcept {
  if (opts_.mode == Grouping::vxid || opts_.mode == Grouping::raw) return true;
  if (!n.t.begun) return false;  // its parent is not known yet
  if (n.t.parent == 0 || recent_.count(n.t.parent)) return true;
  if (n.t.type == TxnType::sess) return true;
  if (opts_.mode == Grouping::request && n.t.type == TxnType::req) {
    if (n.t.reason == "rxreq") return true;
    auto it = nodes_.find(n.t.parent);
    if (it != nodes_.end() && it->second->t.begun && it->second->t.type == TxnType::sess) return true;
  }
  return false;
}

Grouper::Node* Grouper::top_of(Node& n) noexcept {
  Node* cur = &n;
  for (unsigned d = 0; d < kMaxDepth; ++d) {
    if (is_root(*cur)) return cur;
    Node* p = node(cur->t.parent);
    if (!p) return nullptr;
    cur = p;
  }
  return nullptr;
}

void Grouper::children_of(const Node& n, std::vector<std::uint64_t>& out) const {
  out.clear();
  if (opts_.mode == Grouping::vxid || opts_.mode == Grouping::raw) return;
  out = n.links;
  if (auto it = claimed_.find(n.t.vxid); it != claimed_.end())
    for (std::uint64_t c : it->second)
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
}

bool Grouper::complete(const Node& n, unsigned depth) const noexcept {
  if (!n.t.ended || depth >= kMaxDepth) return false;
  std::vector<std::uint64_t> kids;
  children_of(n, kids);
  for (std::uint64_t c : kids) {
    auto it = nodes_.find(c);
    if (it == nodes_.end() || !complete(*it->second, depth + 1)) return false;
  }
  return true;
}

void Grouper::try_emit(Node& n) {
  if (opts_.mode == Grouping::request && n.t.type == TxnType::sess) {
    // As in varnishlog -g request: sessions are not part of request groups.
    emit_tree(n, {});
    return;
  }
  if (!n.t.begun) {
    // Its first batch went by before we started reading: its place in a group is
    // unknowable, so it is reported alone (emit_tree says what is missing).
    emit_tree(n, {});
    return;
  }
  Node* top = top_of(n);
  if (top && complete(*top, 0)) emit_tree(*top, {});
}

void Grouper::force(Node& n, std::string_view why) {
  Node* cur = &n;
  for (unsigned d = 0; d < kMaxDepth && !is_root(*cur); ++d) {
    Node* p = node(cur->t.parent);
    if (!p || p == &n) break;
    if (opts_.mode == Grouping::request && p->t.type == TxnType::sess) break;
    cur = p;
  }
  emit_tree(*cur, why);
}

void Grouper::emit_tree(Node& top, std::string_view why) {
  bool hide = opts_.mode == Grouping::request && top.t.type == TxnType::sess;
  std::vector<std::unique_ptr<Node>> taken;
  Group g;
  g.mode = opts_.mode;
  std::vector<std::uint64_t> kids;
  // Depth-first, pre-order, bounded; each node is taken out of the map once.
  struct Item {
    std::uint64_t vxid;
    unsigned level;
  };
  std::vector<Item> stack{{top.t.vxid, 1}};
  while (!stack.empty()) {
    Item it = stack.back();
    stack.pop_back();
    auto found = nodes_.find(it.vxid);
    if (found == nodes_.end()) continue;
    bool orphan = it.level == 1 && !why.empty() && found->second->t.begun && !is_root(*found->second);
    std::unique_ptr<Node> np = std::move(found->second);
    nodes_.erase(found);
    Node& x = *np;
    if (orphan) x.t.records.push_back(synth("parent " + std::to_string(x.t.parent) + " not seen"));
    x.t.level = it.level;
    if (!x.t.begun && x.t.vxid != 0) x.t.records.push_back(synth(std::string(kSynthNoBegin)));
    if (!why.empty() && !x.t.ended) x.t.records.push_back(synth(std::string(why)));
    if (x.overrun) x.t.records.push_back(synth(std::string(kSynthOverrun)));
    children_of(x, kids);
    if (!hide && it.level < kMaxDepth) {
      for (auto c = kids.rbegin(); c != kids.rend(); ++c) {
        if (nodes_.count(*c))
          stack.push_back({*c, it.level + 1});
        else if (!why.empty() && !recent_.count(*c))
          x.t.records.push_back(synth("link to " + std::to_string(*c) + " not seen"));
      }
    }
    if (!hide) g.txns.push_back(&x.t);
    taken.push_back(std::move(np));
    if (hide) break;
  }
  for (auto& np : taken) {
    claimed_.erase(np->t.vxid);
    // Forget this child in its parent's list too: a parent that never shows up must
    // not keep a list growing for as long as the reader runs.
    if (auto it = claimed_.find(np->t.parent); np->t.begun && it != claimed_.end()) {
      std::erase(it->second, np->t.vxid);
      if (it->second.empty()) claimed_.erase(it);
    }
    if (recent_.insert(np->t.vxid).second) {
      recent_order_.push_back(np->t.vxid);
      if (recent_order_.size() > kRecentMax) {
        recent_.erase(recent_order_.front());
        recent_order_.pop_front();
      }
    }
  }
  if (!g.txns.empty()) sink_(g);
}

void Grouper::tick(Clock::time_point now) {
  last_now_ = now;
  while (!age_.empty()) {
    auto [vx, seen] = age_.front();
    Node* n = node(vx);
    if (!n || n->seen != seen) {
      age_.pop_front();
      continue;
    }
    if (now - seen < opts_.timeout) break;
    age_.pop_front();
    force(*n, kSynthTimeout);
    if (Node* still = node(vx); still && still->seen == seen) emit_tree(*still, kSynthTimeout);
  }
}

void Grouper::enforce_limit() {
  while (nodes_.size() > opts_.max_pending && !age_.empty()) {
    auto [vx, seen] = age_.front();
    age_.pop_front();
    Node* n = node(vx);
    if (!n || n->seen != seen) continue;
    force(*n, kSynthOverflow);
    if (Node* still = node(vx); still && still->seen == seen) emit_tree(*still, kSynthOverflow);
  }
}

void Grouper::flush() {
  while (!age_.empty()) {
    auto [vx, seen] = age_.front();
    age_.pop_front();
    Node* n = node(vx);
    if (!n || n->seen != seen) continue;
    force(*n, kSynthFlush);
    if (Node* still = node(vx); still && still->seen == seen) emit_tree(*still, kSynthFlush);
  }
  nodes_.clear();
  claimed_.clear();
}

}  // namespace ringlog

