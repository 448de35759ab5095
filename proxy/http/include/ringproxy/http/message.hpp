// HTTP/1.1 message heads as the parser hands them out: views into the caller's
// buffer (never copies), plus what RFC 9112 derives from them (body framing,
// keep-alive, Expect). A head is only valid while the bytes it was parsed from are.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace ringproxy::http {

// Limits of one message head; RequestParser/ResponseParser take them at construction
// and set_limits() changes them between messages (param.set).
struct Limits {
  std::size_t max_head_bytes = 64 * 1024;  // start line + fields + final CRLF -> 431
  std::size_t max_headers = 100;           // field lines -> 431
  std::size_t max_url = 8 * 1024;          // request-target bytes -> 414
  // Accept a bare LF as line terminator in the head (RFC 9112 §2.2 MAY). Off for
  // requests (a smuggling vector behind lenient peers), on for responses by default
  // (ResponseParser turns it on unless told otherwise).
  bool allow_bare_lf = false;
};

enum class Method : std::uint8_t { Get, Head, Post, Put, Delete, Connect, Options, Trace, Patch, Other };
std::string_view method_name(Method m);

// How the message body is delimited (RFC 9112 §6.3).
enum class BodyKind : std::uint8_t {
  None,        // no body (HEAD responses, 1xx/204/304, requests without CL/TE)
  Length,      // Content-Length: content_length bytes
  Chunked,     // Transfer-Encoding ending in chunked: use ChunkedDecoder
  UntilClose,  // responses only: body ends when the origin closes
  Tunnel,      // responses only: 2xx to CONNECT or 101: bytes flow both ways until close
};

// The fields the proxy acts on by name (fields.def), so that its filters are bit tests:
// the parser gives each field its id once. Other: any name not listed.
enum class FieldId : std::uint8_t {
  Other,
#define RINGPROXY_FIELD(id, name, hop_by_hop) id,
#include "ringproxy/http/fields.def"
#undef RINGPROXY_FIELD
};
inline constexpr std::size_t kFieldIds = 1
#define RINGPROXY_FIELD(id, name, hop_by_hop) +1
#include "ringproxy/http/fields.def"
#undef RINGPROXY_FIELD
    ;

// A set of field ids. Other has a bit too, but no filter ever holds it.
using FieldSet = std::uint32_t;
static_assert(kFieldIds <= 32, "a FieldSet holds every field id");
constexpr FieldSet field_bit(FieldId id) { return FieldSet{1} << static_cast<unsigned>(id); }
template <class... Ids>
constexpr FieldSet field_set(Ids... ids) {
  return (FieldSet{0} | ... | field_bit(ids));
}
// The hop_by_hop column of fields.def.
inline constexpr FieldSet kHopByHopFields = 0
#define RINGPROXY_FIELD(id, name, hop_by_hop) | ((hop_by_hop) ? field_bit(FieldId::id) : 0)
#include "ringproxy/http/fields.def"
#undef RINGPROXY_FIELD
    ;

// The id of a field name (case-insensitive, exact: a prefix of a listed name is Other).
FieldId field_id(std::string_view name);
// The name as fields.def spells it ("" for Other).
std::string_view field_name(FieldId id);

struct Header {
  std::string_view name;   // as sent (a valid token)
  std::string_view value;  // without leading/trailing OWS; may be empty
  FieldId id = FieldId::Other;  // field_id(name)
  // Received as exactly "name: value\r\n" (one SP, no trailing OWS, CRLF): the bytes
  // from name.data() to two past the value's end can be copied as the line.
  bool verbatim = false;
};

// Field lines in the order received. Storage is reused between messages: after the
// first few messages of a connection, parsing allocates nothing.
class HeaderList {
 public:
  HeaderList() = default;
  void reserve(std::size_t n) { v_.reserve(n); }
  void clear() {
    v_.clear();
    ids_ = 0;
  }
  // h.id must be field_id(h.name): the lookups by id trust it.
  void push_back(Header h) {
    ids_ |= field_bit(h.id);
    v_.push_back(h);
  }
  std::size_t size() const { return v_.size(); }
  bool empty() const { return v_.empty(); }
  const Header& operator[](std::size_t i) const { return v_[i]; }
  auto begin() const { return v_.begin(); }
  auto end() const { return v_.end(); }

  // First field with this name (case-insensitive), nullptr if none.
  const Header* find(std::string_view name) const;
  const Header* find(FieldId id) const {
    if (!has(id)) return nullptr;
    for (const Header& h : v_)
      if (h.id == id) return &h;
    return nullptr;
  }
  // Is there a field with this id? (One bit test: the list keeps the set of its ids.)
  bool has(FieldId id) const { return (ids_ & field_bit(id)) != 0; }
  FieldSet ids() const { return ids_; }
  std::size_t count(std::string_view name) const;
  // Does any field `name` contain `token` in its comma-separated list (case-insensitive)?
  bool has_token(std::string_view name, std::string_view token) const;

 private:
  std::vector<Header> v_;
  FieldSet ids_ = 0;
};

// The values of the Connection header fields, for keep-alive and hop-by-hop decisions.
struct ConnectionInfo {
  static constexpr std::size_t kMaxFields = 8;  // more Connection fields -> 400
  std::array<std::string_view, kMaxFields> values{};  // [0, count) are this message's
  std::uint8_t count = 0;
  bool close = false;       // "close" listed
  bool keep_alive = false;  // "keep-alive" listed
  bool upgrade = false;     // "upgrade" listed
  // The listed tokens that are fields.def names, and whether any other token is listed
  // (set by the parser with `values`): most fields are tested with one bit.
  FieldSet listed = 0;
  bool lists_other = false;
  // Is `token` (a field name) listed in any Connection field? (case-insensitive)
  bool lists(std::string_view token) const;
  // Is the field's name listed? Same answer as lists(h.name), without a scan unless
  // a token that is no fields.def name is listed and the field is Other.
  bool lists(const Header& h) const {
    if (h.id != FieldId::Other) return (listed & field_bit(h.id)) != 0;
    return lists_other && lists(h.name);
  }
  // For the next message: everything but the stale values past count (a head is
  // parsed per request: zeroing 128 bytes of views each time showed in the profile).
  void clear() {
    count = 0;
    close = keep_alive = upgrade = lists_other = false;
    listed = 0;
  }
};

struct RequestHead {
  std::string_view method_name;  // as sent
  Method method = Method::Other;
  std::string_view target;       // request-target as sent (origin/absolute/authority/asterisk form)
  std::uint8_t version_minor = 1;  // HTTP/1.<minor>; anything >= 1 has 1.1 semantics
  HeaderList headers;
  ConnectionInfo connection;
  std::string_view host;         // Host field value (HTTP/1.1 requires exactly one)

  BodyKind body = BodyKind::None;   // None, Length or Chunked
  std::uint64_t content_length = 0; // when body == Length
  bool keep_alive = true;           // 1.1: unless "close"; 1.0: only with "keep-alive"
  bool expect_continue = false;     // Expect: 100-continue
  bool expect_unknown = false;      // another expectation (RFC 9110 §10.1.1: may answer 417)
  std::size_t head_bytes = 0;       // bytes of the head, leading empty lines included
};

struct ResponseHead {
  std::uint8_t version_minor = 1;
  std::uint16_t status = 0;       // 100..599
  std::string_view reason;        // may be empty
  HeaderList headers;
  ConnectionInfo connection;

  BodyKind body = BodyKind::None;
  std::uint64_t content_length = 0;  // when body == Length
  bool keep_alive = true;            // the origin connection can be reused after the body
  bool interim = false;              // 1xx other than 101: another head follows
  bool cl_and_te = false;            // had both (chunked won; the CL must not be forwarded)
  std::size_t head_bytes = 0;
};

// RFC 9110 §5.6.2 tchar / token; field-value bytes (VCHAR, SP, HTAB, obs-text).
bool is_tchar(unsigned char c);
bool is_token(std::string_view s);
bool is_field_value_char(unsigned char c);
bool iequals(std::string_view a, std::string_view b);

}  // namespace ringproxy::http
