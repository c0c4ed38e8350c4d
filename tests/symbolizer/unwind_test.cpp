// SPDX-License-Identifier: Apache-2.0
//
// The DWARF unwinder on a captured sample: this process's own call chain (built without
// frame pointers, unwind_chain.c) copied as a BPF program would copy a sampled thread's,
// then unwound through the public symbolizer and named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "loupe/symbolizer.hpp"
#include "unwind_chain.h"

namespace {

using loupe::make_symbolizer;

loupe_user_regs regs_of(const unwind_capture& c) {
  loupe_user_regs r{};
  r.size = sizeof(r);
  r.arch = LOUPE_ARCH_X86_64;
  r.mask = (1ull << 17) - 1;
  for (int i = 0; i < 17; ++i) r.regs[i] = c.regs[i];
  return r;
}

std::vector<std::string> names(loupe::Symbolizer& sym, const std::vector<std::uint64_t>& addrs) {
  std::vector<loupe_frame> frames(addrs.size());
  sym.symbolize(static_cast<std::uint32_t>(getpid()), LOUPE_FRAME_USER, addrs.data(),
                static_cast<std::uint32_t>(addrs.size()), frames.data());
  std::vector<std::string> out;
  for (const auto& f : frames) out.emplace_back(f.symbol ? f.symbol : "?");
  return out;
}

struct Unwound {
  loupe::UserUnwind res;
  std::vector<std::uint64_t> addrs;
};

Unwound unwind(loupe::Symbolizer& sym, const unwind_capture& c, std::uint32_t len,
               std::uint32_t max = 127) {
  Unwound u;
  u.addrs.resize(max);
  loupe_user_regs regs = regs_of(c);
  u.res = sym.unwind_user(static_cast<std::uint32_t>(getpid()), regs, c.stack, len, u.addrs.data(),
                          max);
  u.addrs.resize(u.res.n);
  return u;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& n : v) s += n + " <- ";
  return s;
}

class Unwinder : public ::testing::Test {
 protected:
  void SetUp() override {
    capture_ = std::make_unique<unwind_capture>();
    ASSERT_NE(unwind_chain_level3(capture_.get(), 5), -1);
    ASSERT_GT(capture_->len, 0u);
  }
  std::unique_ptr<unwind_capture> capture_;
};

}  // namespace

TEST_F(Unwinder, WalksAChainWithoutFramePointersToMain) {
  auto sym = make_symbolizer();
  Unwound u = unwind(*sym, *capture_, capture_->len);
  auto n = names(*sym, u.addrs);
  ASSERT_GE(n.size(), 5u) << joined(n);
  EXPECT_EQ(n[0], "unwind_chain_capture") << joined(n);
  EXPECT_EQ(n[1], "unwind_chain_level1") << joined(n);
  EXPECT_EQ(n[2], "unwind_chain_level2") << joined(n);
  EXPECT_EQ(n[3], "unwind_chain_level3") << joined(n);
  bool main_found = false;
  for (const auto& s : n) main_found = main_found || s == "main";
  EXPECT_TRUE(main_found) << joined(n);
  EXPECT_EQ(u.res.status, LOUPE_UNWIND_OK) << joined(n);
  EXPECT_EQ(sym->stats().unwinders, 1u);
  EXPECT_GE(sym->stats().unwind_modules, 2u);  // this test and libc at least
}

TEST_F(Unwinder, ASliceTooShortStopsWithStackExhausted) {
  auto sym = make_symbolizer();
  // Enough for the leaf's frame only: its caller's return address is beyond it.
  Unwound u = unwind(*sym, *capture_, 16);
  EXPECT_EQ(u.res.status, LOUPE_UNWIND_STACK_EXHAUSTED);
  ASSERT_GE(u.addrs.size(), 1u);
  EXPECT_EQ(names(*sym, u.addrs)[0], "unwind_chain_capture");
  EXPECT_LT(u.addrs.size(), 4u);
}

TEST_F(Unwinder, DepthLimitIsReported) {
  auto sym = make_symbolizer();
  Unwound u = unwind(*sym, *capture_, capture_->len, 3);
  EXPECT_EQ(u.res.status, LOUPE_UNWIND_MAX_DEPTH);
  EXPECT_EQ(u.addrs.size(), 3u);
}

TEST_F(Unwinder, APcOutsideEveryMappingIsUnmapped) {
  auto sym = make_symbolizer();
  unwind_capture& c = *capture_;
  c.regs[16] = 0x10;  // no code there
  Unwound u = unwind(*sym, c, c.len);
  EXPECT_EQ(u.res.status, LOUPE_UNWIND_UNMAPPED_PC);
  ASSERT_EQ(u.addrs.size(), 1u);
  EXPECT_EQ(u.addrs[0], 0x10u);
}

TEST_F(Unwinder, AGoneProcessIsReported) {
  auto sym = make_symbolizer();
  loupe_user_regs regs = regs_of(*capture_);
  std::uint64_t out[8];
  auto r = sym->unwind_user(0x7ffffff0u, regs, capture_->stack, 64, out, 8);
  EXPECT_EQ(r.status, LOUPE_UNWIND_NO_PROCESS);
  EXPECT_EQ(r.n, 0u);
}
