// The main() of every GoogleTest program here: GoogleTest's own, except that a run in
// which nothing failed, nothing passed and something was skipped (GTEST_SKIP: io_uring,
// a CPU feature or a tool missing here) exits with kSkipped, which ctest reports as
// skipped (SKIP_RETURN_CODE) instead of passed.
#include <gtest/gtest.h>

namespace {
constexpr int kSkipped = 77;  // tests/CMakeLists.txt: RINGLOG_TEST_SKIPPED
}

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  if (rc != 0) return rc;
  const testing::UnitTest& u = *testing::UnitTest::GetInstance();
  if (u.successful_test_count() == 0 && u.skipped_test_count() > 0) return kSkipped;
  return 0;
}
