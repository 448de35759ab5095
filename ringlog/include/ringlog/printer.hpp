// Varnish's text layout for records and groups, shared by every tool:
//   grouped:  "*   << Request  >> 32770     "   then  "-   ReqURL         /"
//             (level markers padded to 3 columns, tag left-aligned in 14, vxid in 10,
//             a blank line after each group)
//   raw:      "     32770 ReqURL         c /"  (vxid right-aligned in 10, c/b/-)
// Unsafe tags are printed escaped and quoted when they hold anything unprintable;
// binary tags as "[len] hex". Truncated records end with " [truncated]".
// Thread safety: stateless functions.
#pragma once

#include <string>
#include <string_view>

#include "ringlog/group.hpp"
#include "ringlog/record.hpp"

namespace ringlog {

// "<< Request  >>" and friends, 14 columns (Record for vxid 0, Unknown for no Begin).
std::string_view txn_label(const Transaction& t) noexcept;

// The payload as Varnish prints it, by the tag's flags.
void append_payload(std::string& out, Tag tag, std::string_view payload);
// One -g raw line.
void print_raw(std::string& out, const Record& r);
// One record line at a group level (1 = "-", 2 = "--"...).
void print_terse(std::string& out, unsigned level, const Record& r);
// A whole group: raw lines for Grouping::raw, else the transaction layout.
void print_group(std::string& out, const Group& g);

}  // namespace ringlog
