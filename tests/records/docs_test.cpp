// The Records format (docs/FORMAT-records.md, or a Records section of docs/FORMAT.md) is tested
// against the sources of truth: every tag of tags.def with its id, and the control
// area offsets asserted in control.hpp.
#include <gtest/gtest.h>

#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>

#include "ringlog/control.hpp"
#include "ringlog/tags.hpp"

using namespace ringlog;

namespace {

std::string records_doc() {
  for (const char* f : {"/docs/FORMAT-records.md", "/docs/FORMAT.md"}) {
    std::ifstream in(std::string(RINGLOG_SOURCE_DIR) + f);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string s = ss.str();
    if (auto at = s.find("## Records"); at != std::string::npos) return s.substr(at);
  }
  return {};
}

}  // namespace

TEST(RecordsDoc, ListsEveryTagWithItsId) {
  std::string doc = records_doc();
  ASSERT_FALSE(doc.empty()) << "no '## Records' section in docs/FORMAT.md or docs/FORMAT-records.md";
  for (const TagInfo& i : builtin_tags()) {
    std::string row = "| " + std::to_string(i.id) + " | " + i.name + " |";
    EXPECT_NE(doc.find(row), std::string::npos) << "missing tag row: " << row;
  }
}

TEST(RecordsDoc, ControlAreaOffsetsMatchTheStruct) {
  std::string doc = records_doc();
  auto row = [](std::size_t off) { return "| " + std::to_string(512 + off) + " | "; };
  struct F {
    std::size_t off;
    const char* name;
  };
  for (F f : {F{offsetof(RecordsControl, mask_flip), "mask_flip"},
              F{offsetof(RecordsControl, mask_generation), "mask_generation"},
              F{offsetof(RecordsControl, max_record_len), "max_record_len"},
              F{offsetof(RecordsControl, next_vxid), "next_vxid"}}) {
    std::string start = row(f.off);
    auto at = doc.find(start);
    ASSERT_NE(at, std::string::npos) << f.name << " at " << 512 + f.off;
    auto eol = doc.find('\n', at);
    EXPECT_NE(doc.substr(at, eol - at).find(f.name), std::string::npos) << f.name << " documented at another offset";
  }
}
