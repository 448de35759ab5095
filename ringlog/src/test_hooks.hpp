// Named steps of the write path, for the crash-torture tests. In normal builds the
// hooks compile to nothing; the test-only library variant (RINGLOG_TEST_HOOKS defined)
// calls ringlog::detail::test_hook(step), which may SIGKILL the process at that step.
// Steps, in write order: locked, reclaimed, tagged, head_moved, unlocked, mid_copy,
// copied, exposed. (mid_copy: a message's framing is written, its payload not yet.)
// queued: a contended writer's cell is in its wait queue with its running total (Q5).
#pragma once

#ifdef RINGLOG_TEST_HOOKS
namespace ringlog::detail {
void test_hook(const char* step) noexcept;
}  // namespace ringlog::detail
#define RINGLOG_HOOK(step) ::ringlog::detail::test_hook(step)
#else
#define RINGLOG_HOOK(step) ((void)0)
#endif
