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
constexpr std::size_t kSpareMax = 256;          // reported nodes kept for reuse
constexpr std::size_t kSpareBytesMax = 1 << 16;  // ... unless their byte store grew larger

void synth(Transaction& t, std::string_view text) { t.add(Tag::VSL, text, false, true); }

// Copies a batch into t's byte store whole and holds its records as offsets into it;
// on_record sees each record first (the grouper's Begin/Link/End bookkeeping).
template <class F>
void hold_batch(Transaction& t, BatchDecoder& d, std::span<const std::byte> msg, F&& on_record) {
  const std::uint64_t base = t.bytes.size();
  const char* start = reinterpret_cast<const char*>(msg.data());
  t.bytes.append(start, msg.size());
  Record r;
  while (d.next(r)) {
    on_record(r);
    t.records.push_back(HeldRecord{r.tag, r.truncated, false, std::uint32_t(r.payload.size()),
                                   base + std::uint64_t(r.payload.data() - start)});
  }
  if (d.status() != DecodeStatus::ok) synth(t, std::string("batch cut: ") + to_string(d.status()));
}

// "<type> <vxid> <reason>" (Begin, Link).
bool parse_ref(std::string_view s, TxnType& type, std::uint64_t& vxid, std::string_view& reason) {
  std::size_t sp = s.find(' ');
  if (sp == std::string_view::npos) return false;
  type = type_by_name(s.substr(0, sp));
  s.remove_prefix(sp + 1);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), vxid);
  if (ec != std::errc()) return false;
  s.remove_prefix(std::size_t(p - s.data()));
  if (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  reason = s;
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
    if (spare_.empty()) {
      slot = std::make_unique<Node>();
    } else {
      slot = std::move(spare_.back());
      spare_.pop_back();
    }
    slot->t.vxid = vxid;
    slot->t.kind = kind;
    slot->seen = now;
    age_.emplace_back(vxid, now);
  }
  return *slot;
}

// A node that has been reported, kept for the next transaction with its allocations
// (a few, of common sizes; an unusually large one is freed).
void Grouper::recycle(std::unique_ptr<Node> n) noexcept {
  if (spare_.size() >= kSpareMax || n->t.bytes.capacity() > kSpareBytesMax) return;
  n->t.reset();
  n->links.clear();
  n->seen = {};
  n->overrun = false;
  try {
    spare_.push_back(std::move(n));
  } catch (...) {
  }
}

// The transaction of a group of one (reused: its allocations stay).
Transaction& Grouper::single() {
  single_.reset();
  single_.ended = true;
  return single_;
}

void Grouper::emit_single(const Transaction& t) {
  Group g;
  g.mode = opts_.mode;
  g.txns.assign(1, &t);
  sink_(g);
}

void Grouper::feed(std::span<const std::byte> msg, Clock::time_point now) {
  last_now_ = now;
  BatchDecoder d(msg);
  if (!d.valid()) {
    Transaction& t = single();
    synth(t, std::string(to_string(d.status())) + " (" + std::to_string(msg.size()) + " bytes)");
    emit_single(t);
    return;
  }
  const BatchHeader& h = d.header();
  if (opts_.mode == Grouping::raw || h.vxid == 0) {
    Transaction& t = single();
    t.vxid = h.vxid;
    t.kind = h.kind;
    hold_batch(t, d, msg, [](const Record&) {});
    emit_single(t);
    return;
  }
  Node& n = get_or_add(h.vxid, h.kind, now);
  // Most transactions are one batch of a few dozen records: one allocation, not the
  // vector's doubling (a recycled node has its room already).
  if (n.t.records.capacity() < 32) n.t.records.reserve(32);
  hold_batch(n.t, d, msg, [&](const Record& r) {
    if (r.tag == Tag::Begin && !n.t.begun) {
      std::string_view reason;
      if (parse_ref(r.payload, n.t.type, n.t.parent, reason)) {
        n.t.reason.assign(reason);
        n.t.begun = true;
        if (n.t.parent != 0 && n.t.parent != n.t.vxid) claimed_[n.t.parent].push_back(n.t.vxid);
      }
    } else if (r.tag == Tag::Link) {
      TxnType ct;
      std::uint64_t cv = 0;
      std::string_view why;
      if (parse_ref(r.payload, ct, cv, why) && cv != 0 && cv != n.t.vxid &&
          std::find(n.links.begin(), n.links.end(), cv) == n.links.end())
        n.links.push_back(cv);
    } else if (r.tag == Tag::End) {
      n.t.ended = true;
    }
  });
  if (h.last) n.t.ended = true;
  if (n.t.ended) try_emit(n);
  enforce_limit();
}

void Grouper::notice(std::string_view text, Clock::time_point now) {
  last_now_ = now;
  Transaction& t = single();
  synth(t, "ring: " + std::string(text));
  emit_single(t);
}

void Grouper::lost(std::uint64_t bytes, Clock::time_point now) {
  last_now_ = now;
  for (auto& [vx, n] : nodes_) n->overrun = true;
  Transaction& t = single();
  synth(t, "overrun: " + std::to_string(bytes) + " bytes lost");
  emit_single(t);
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
  if (opts_.mode == Grouping::vxid || opts_.mode == Grouping::raw) return true;
  // Every child (children_of's list, walked in place: a child named twice is only
  // checked twice).
  auto done = [&](std::uint64_t c) {
    auto it = nodes_.find(c);
    return it != nodes_.end() && complete(*it->second, depth + 1);
  };
  for (std::uint64_t c : n.links)
    if (!done(c)) return false;
  if (auto it = claimed_.find(n.t.vxid); it != claimed_.end())
    for (std::uint64_t c : it->second)
      if (!done(c)) return false;
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
  // The member lists, taken for this call (a sink that feeds this grouper again gets
  // fresh ones) and given back with their room at the end.
  std::vector<std::unique_ptr<Node>> taken = std::move(taken_);
  std::vector<std::uint64_t> kids = std::move(kids_);
  std::vector<std::pair<std::uint64_t, unsigned>> stack = std::move(stack_);
  Group g;
  g.mode = opts_.mode;
  g.txns = std::move(txns_);
  taken.clear();
  g.txns.clear();
  stack.clear();
  // Depth-first, pre-order, bounded; each node is taken out of the map once.
  stack.emplace_back(top.t.vxid, 1);
  while (!stack.empty()) {
    auto [vxid, level] = stack.back();
    stack.pop_back();
    auto found = nodes_.find(vxid);
    if (found == nodes_.end()) continue;
    bool orphan = level == 1 && !why.empty() && found->second->t.begun && !is_root(*found->second);
    std::unique_ptr<Node> np = std::move(found->second);
    nodes_.erase(found);
    Node& x = *np;
    if (orphan) synth(x.t, "parent " + std::to_string(x.t.parent) + " not seen");
    x.t.level = level;
    if (!x.t.begun && x.t.vxid != 0) synth(x.t, kSynthNoBegin);
    if (!why.empty() && !x.t.ended) synth(x.t, why);
    if (x.overrun) synth(x.t, kSynthOverrun);
    children_of(x, kids);
    if (!hide && level < kMaxDepth) {
      for (auto c = kids.rbegin(); c != kids.rend(); ++c) {
        if (nodes_.count(*c))
          stack.emplace_back(*c, level + 1);
        else if (!why.empty() && !recent_.count(*c))
          synth(x.t, "link to " + std::to_string(*c) + " not seen");
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
  for (auto& np : taken) recycle(std::move(np));
  taken.clear();
  taken_ = std::move(taken);
  kids_ = std::move(kids);
  stack_ = std::move(stack);
  txns_ = std::move(g.txns);
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

