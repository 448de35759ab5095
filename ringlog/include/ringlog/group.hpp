// Reading side: turns record batches, in ring order, into transaction groups the
// way varnishlog's -g does: raw (each batch as read), vxid (each transaction),
// request (a client request with its backend fetches, joined by Link/Begin) and
// session (a session with its requests and their fetches). A group that cannot
// complete is closed after a timeout or when too many are pending, with synthetic
// VSL records saying why; nothing read is ever dropped silently.
// Thread safety: a Grouper belongs to one thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ringlog/record.hpp"

namespace ringlog {

enum class Grouping : std::uint8_t { raw, vxid, request, session };
std::optional<Grouping> grouping_by_name(std::string_view s) noexcept;  // "raw", "vxid", ...
std::string_view grouping_name(Grouping g) noexcept;

// A record held by a group: its payload is in the transaction's byte store.
struct HeldRecord {
  Tag tag = Tag::invalid;
  bool truncated = false;
  bool synthetic = false;
  std::uint32_t size = 0;    // payload bytes
  std::uint64_t offset = 0;  // where they start in Transaction::bytes
};

struct Transaction {
  std::uint64_t vxid = 0;
  VxidKind kind = VxidKind::none;
  TxnType type = TxnType::unknown;  // from Begin; unknown when Begin was not seen
  std::uint64_t parent = 0;         // from Begin
  std::string reason;               // from Begin
  unsigned level = 1;               // 1 for the group's root, 2 for its children...
  bool begun = false;               // Begin seen
  bool ended = false;               // End (or the batch's last flag) seen
  std::vector<HeldRecord> records;
  // What the records' payloads point into: the batches read, copied whole (one copy
  // per batch, not one string per record), and payloads added one by one.
  std::string bytes;

  std::string_view payload(const HeldRecord& h) const noexcept { return {bytes.data() + h.offset, h.size}; }
  std::string_view payload(std::size_t i) const noexcept { return payload(records[i]); }
  Record record(std::size_t i) const noexcept {
    const HeldRecord& h = records[i];
    return Record{h.tag, kind, h.truncated, h.synthetic, vxid, payload(h)};
  }
  // Appends a record, copying its payload.
  void add(Tag tag, std::string_view payload, bool truncated = false, bool synthetic = false) {
    records.push_back(HeldRecord{tag, truncated, synthetic, std::uint32_t(payload.size()), bytes.size()});
    bytes += payload;
  }
  void add(const Record& r) { add(r.tag, r.payload, r.truncated, r.synthetic); }
  // Points h at a copy of payload (the bytes it pointed at stay, unreferenced).
  void set_payload(HeldRecord& h, std::string_view payload) {
    std::string copy(payload);
    h.offset = bytes.size();
    h.size = std::uint32_t(copy.size());
    bytes += copy;
  }
  void clear_records() noexcept {
    records.clear();
    bytes.clear();
  }
  // Back to a default-made transaction, keeping the containers' room (for reuse).
  void reset() noexcept {
    vxid = 0;
    kind = VxidKind::none;
    type = TxnType::unknown;
    parent = 0;
    reason.clear();
    level = 1;
    begun = false;
    ended = false;
    clear_records();
  }
};

struct Group {
  Grouping mode = Grouping::vxid;
  std::vector<const Transaction*> txns;  // depth first: root, then each child's subtree
};

// Synthetic VSL payloads (Varnish's words where it has them).
inline constexpr std::string_view kSynthTimeout = "timeout";
inline constexpr std::string_view kSynthOverflow = "store overflow";
inline constexpr std::string_view kSynthFlush = "incomplete: end of input";
inline constexpr std::string_view kSynthOverrun = "overrun: records may be missing";
inline constexpr std::string_view kSynthNoBegin = "incomplete: Begin not seen";

struct GroupOptions {
  Grouping mode = Grouping::vxid;
  std::chrono::milliseconds timeout{120'000};  // varnishlog -T: close incomplete groups after this
  std::size_t max_pending = 1000;              // varnishlog -L: at most this many open transactions
};

class Grouper {
 public:
  using Clock = std::chrono::steady_clock;
  using Sink = std::function<void(const Group&)>;

  Grouper(const GroupOptions& opts, Sink sink);
  ~Grouper();

  // One data message from the ring. A message that is not a valid batch is reported as
  // a synthetic record of vxid 0 (never dropped); a cut batch keeps the records before
  // the damage and says so.
  void feed(std::span<const std::byte> msg, Clock::time_point now);
  // A ring notice (drops, recoveries): reported as a synthetic vxid 0 record.
  void notice(std::string_view text, Clock::time_point now);
  // The reader lost bytes: reported at once; every pending transaction is marked.
  void lost(std::uint64_t bytes, Clock::time_point now);
  // Closes groups pending for longer than the timeout.
  void tick(Clock::time_point now);
  // End of input: closes everything still pending.
  void flush();

  std::size_t pending() const noexcept { return nodes_.size(); }
  // Bookkeeping entries held for pending transactions (bounded by pending(); for tests).
  std::size_t held_links() const noexcept { return claimed_.size(); }
  const GroupOptions& options() const noexcept { return opts_; }

 private:
  struct Node;
  Node* node(std::uint64_t vxid) noexcept;
  Node& get_or_add(std::uint64_t vxid, VxidKind kind, Clock::time_point now);
  bool is_root(const Node& n) const noexcept;
  Node* top_of(Node& n) noexcept;
  bool complete(const Node& n, unsigned depth) const noexcept;
  void children_of(const Node& n, std::vector<std::uint64_t>& out) const;
  void try_emit(Node& n);
  void force(Node& n, std::string_view why);
  void emit_tree(Node& top, std::string_view why);
  void emit_single(const Transaction& t);
  Transaction& single();
  void recycle(std::unique_ptr<Node> n) noexcept;
  void enforce_limit();

  GroupOptions opts_;
  Sink sink_;
  std::unordered_map<std::uint64_t, std::unique_ptr<Node>> nodes_;
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> claimed_;  // parent -> children by Begin
  std::deque<std::pair<std::uint64_t, Clock::time_point>> age_;  // arrival order (stale entries skipped)
  std::unordered_set<std::uint64_t> recent_;  // vxids already reported
  std::deque<std::uint64_t> recent_order_;
  Clock::time_point last_now_{};
  // Reused from group to group (their allocations stay): ended nodes, the transaction
  // of -g raw and vxid 0 batches, and emit_tree's lists.
  std::vector<std::unique_ptr<Node>> spare_;
  Transaction single_;
  std::vector<std::unique_ptr<Node>> taken_;
  std::vector<const Transaction*> txns_;
  std::vector<std::uint64_t> kids_;
  std::vector<std::pair<std::uint64_t, unsigned>> stack_;
};

}  // namespace ringlog
