// SPDX-License-Identifier: Apache-2.0
//
// The lockwait plugin's pure helpers: folding kernel rows into ranked per-lock summaries,
// the p50 estimate, lock type names, and the convoy / long-hold hint.
#include <gtest/gtest.h>

#include "lock_table.hpp"
#include "wait_pattern.hpp"

namespace lw = loupe::lockwait;

namespace {

lw::LockRow lock_row(std::uint32_t tgid, std::uint64_t addr, std::uint64_t waits,
                     std::uint64_t total, std::uint64_t max) {
  lw_lock_key k{};
  k.tgid = tgid;
  k.kind = LW_KIND_FUTEX;
  k.addr = addr;
  lw_lock_val v{};
  v.waits = waits;
  v.total_ns = total;
  v.max_ns = max;
  return {k, v};
}

lw::WaiterRow waiter(std::uint32_t tgid, std::uint32_t tid, std::uint64_t addr, std::int32_t ustack,
                     std::uint64_t waits, std::uint64_t total, const char* comm) {
  lw_waiter_key k{};
  k.tgid = tgid;
  k.tid = tid;
  k.addr = addr;
  k.kind = LW_KIND_FUTEX;
  k.user_stack_id = ustack;
  k.kernel_stack_id = -1;
  lw_waiter_val v{};
  v.waits = waits;
  v.total_ns = total;
  v.max_ns = total / (waits ? waits : 1);
  std::snprintf(v.comm, sizeof(v.comm), "%s", comm);
  return {k, v};
}

}  // namespace

TEST(LockTable, RanksByTotalWaitAndFoldsThreadsAndStacks) {
  auto t = lw::build_lock_table(
      {lock_row(10, 0x1000, 5, 500, 200), lock_row(10, 0x2000, 50, 5000, 300)},
      {waiter(10, 11, 0x2000, 7, 20, 3000, "a"), waiter(10, 12, 0x2000, 7, 10, 1000, "b"),
       waiter(10, 12, 0x2000, 8, 20, 1000, "b"), waiter(10, 11, 0x1000, 9, 5, 500, "a")});
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].key.addr, 0x2000u);
  EXPECT_EQ(t[0].val.total_ns, 5000u);
  ASSERT_EQ(t[0].threads.size(), 2u);
  EXPECT_EQ(t[0].threads[0].tid, 11u);
  EXPECT_EQ(t[0].threads[0].total_ns, 3000u);
  EXPECT_EQ(t[0].threads[1].total_ns, 2000u);
  EXPECT_EQ(t[0].threads[1].waits, 30u);
  ASSERT_EQ(t[0].stacks.size(), 2u);
  EXPECT_EQ(t[0].stacks[0].user_stack_id, 7);
  EXPECT_EQ(t[0].stacks[0].total_ns, 4000u);
  EXPECT_EQ(t[0].stacks[0].waits, 30u);
  EXPECT_EQ(t[0].stacks[0].comm, "a");  // the thread with the largest share
  EXPECT_EQ(t[1].key.addr, 0x1000u);
}

TEST(LockTable, WaiterRowsWithoutALockRowStayVisible) {
  // The lock map was full: the waiter rows are all that is known of this lock.
  auto t = lw::build_lock_table({}, {waiter(10, 11, 0x3000, 1, 4, 400, "a")});
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].val.waits, 4u);
  EXPECT_EQ(t[0].val.total_ns, 400u);
}

TEST(LockTable, SameAddressInTwoProcessesIsTwoLocks) {
  auto t =
      lw::build_lock_table({lock_row(1, 0x1000, 1, 10, 10), lock_row(2, 0x1000, 1, 20, 20)}, {});
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].key.tgid, 2u);
}

TEST(LockTable, P50IsTheMiddleBucketClampedToMinMax) {
  lw_lock_val v{};
  v.slots[23] = 3;  // (2^21, 2^22] ns: slot i holds (2^(i-2), 2^(i-1)]
  v.slots[12] = 1;  // (1024, 2048] ns
  v.min_ns = 1500;
  v.max_ns = 3000000;
  std::uint64_t p50 = lw::hist_p50(v);
  EXPECT_GT(p50, 1u << 21);
  EXPECT_LE(p50, 3000000u);
  EXPECT_EQ(lw::hist_p50(lw_lock_val{}), 0u);
}

TEST(LockTable, TypesFollowContentionFlags) {
  EXPECT_EQ(lw::lock_type(LW_KIND_FUTEX, 0), "futex");
  EXPECT_EQ(lw::lock_type(LW_KIND_KERNEL, LW_LCB_SPIN), "spinlock");
  EXPECT_EQ(lw::lock_type(LW_KIND_KERNEL, LW_LCB_SPIN | LW_LCB_READ), "rwlock:read");
  EXPECT_EQ(lw::lock_type(LW_KIND_KERNEL, LW_LCB_READ), "rwsem:read");
  EXPECT_EQ(lw::lock_type(LW_KIND_KERNEL, LW_LCB_WRITE), "rwsem:write");
  EXPECT_EQ(lw::lock_type(LW_KIND_KERNEL, LW_LCB_MUTEX | LW_LCB_SPIN), "mutex");
  EXPECT_EQ(lw::lock_type(LW_KIND_KERNEL, LW_LCB_PERCPU | LW_LCB_READ), "percpu-rwsem:read");
  EXPECT_EQ(lw::lock_type(LW_KIND_KERNEL, LW_LCB_RT), "rtmutex");
}

TEST(WaitPattern, ManyShortWaitsAreAConvoy) {
  auto h = lw::classify({100000, 100000 * 20000, 20000, 900000, 8, 2.0});
  EXPECT_EQ(h.pattern, lw::WaitPattern::kConvoy) << h.text;
  EXPECT_NE(h.text.find("convoy"), std::string::npos);
}

TEST(WaitPattern, FewLongWaitsAreALongHold) {
  auto h = lw::classify({40, 40 * 5000000ull, 5000000, 9000000, 4, 2.0});
  EXPECT_EQ(h.pattern, lw::WaitPattern::kLongHold) << h.text;
  EXPECT_NE(h.text.find("5.00 ms"), std::string::npos) << h.text;
}

TEST(WaitPattern, InBetweenIsMixedAndTooFewIsNone) {
  EXPECT_EQ(lw::classify({50, 50 * 300000, 300000, 400000, 2, 10.0}).pattern,
            lw::WaitPattern::kMixed);
  EXPECT_EQ(lw::classify({3, 3000, 1000, 1000, 1, 1.0}).pattern, lw::WaitPattern::kNone);
  // Short waits at a low rate are not a convoy.
  EXPECT_EQ(lw::classify({20, 20 * 1000, 1000, 2000, 2, 10.0}).pattern, lw::WaitPattern::kMixed);
}
