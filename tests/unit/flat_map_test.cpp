// FlatMap (the replay's live set) must behave like std::unordered_map under any mix of inserts and
// erases, including addresses that share their low bits and probe runs that wrap around.
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "replay/flat_map.h"
#include "replay/live_table.h"

namespace {

struct IdHash {
  size_t operator()(uint64_t k) const noexcept { return static_cast<size_t>(k); }
};

}  // namespace

TEST(FlatMap, MatchesUnorderedMapUnderRandomInsertsAndErases) {
  std::mt19937_64 rng(5);
  gpumemshim::analyzer::FlatMap<uint64_t, uint64_t, IdHash> m;
  std::unordered_map<uint64_t, uint64_t> ref;
  for (int i = 0; i < 200000; ++i) {
    uint64_t key = 0x7f0000000000ull + ((rng() % 3000) << 21);  // 2 MiB-aligned, reused
    switch (rng() % 3) {
      case 0: {
        auto [v, inserted] = m.try_emplace(key);
        EXPECT_EQ(inserted, ref.count(key) == 0);
        *v = i;
        ref[key] = static_cast<uint64_t>(i);
        break;
      }
      case 1: EXPECT_EQ(m.erase(key), ref.erase(key) == 1); break;
      default: {
        const uint64_t* v = m.find(key);
        auto it = ref.find(key);
        ASSERT_EQ(v != nullptr, it != ref.end());
        if (v) {
          EXPECT_EQ(*v, it->second);
        }
      }
    }
    ASSERT_EQ(m.size(), ref.size());
  }
  size_t seen = 0;
  m.for_each([&](uint64_t k, uint64_t v) {
    ++seen;
    EXPECT_EQ(ref.at(k), v);
  });
  EXPECT_EQ(seen, ref.size());
}

// One step of a random run of a LiveTable against a reference map: insert (or update) `key` with
// `value`, or erase it; the table must agree with the reference at each step.
template <typename Table>
void insert_or_erase(Table& t, std::unordered_map<uint64_t, uint64_t>& ref, uint64_t key, bool insert,
                     uint64_t value) {
  if (insert) {
    auto [r, inserted] = t.try_emplace(key);
    ASSERT_EQ(inserted, ref.count(key) == 0);
    if (!inserted) {
      ASSERT_EQ(r->a, ref[key]);
    }
    r->a = value;
    ref[key] = value;
  } else {
    const size_t slot = t.find_slot(key);
    ASSERT_EQ(slot != t.kNone, ref.count(key) == 1);
    if (slot != t.kNone) {
      ASSERT_EQ(t.at_slot(slot).a, ref[key]);
      t.erase_slot(slot);
      ref.erase(key);
    }
  }
  ASSERT_EQ(t.size(), ref.size());
}

// LiveTable (generational maps of records) must keep each key's record through the same mix
// whatever generation its key is in (periods down to one insert, keys that live for the whole run
// as leaks do, records moved by erases' shifts and by aging), and hand out a fresh record for an
// inserted key even where an erased one lay.
class LiveTablePeriod : public ::testing::TestWithParam<size_t> {};
INSTANTIATE_TEST_SUITE_P(Periods, LiveTablePeriod, ::testing::Values(1, 3, 64, 8192));

TEST_P(LiveTablePeriod, MatchesUnorderedMapUnderRandomInsertsAndErases) {
  struct Rec {
    uint64_t a = 0;
  };
  std::mt19937_64 rng(9);
  gpumemshim::analyzer::LiveTable<uint64_t, Rec, IdHash> t(GetParam());
  std::unordered_map<uint64_t, uint64_t> ref;
  for (int i = 0; i < 200000; ++i) {
    // Mostly short-lived keys; one in 50 from a range erased only rarely (long-lived, like leaks).
    const bool lasting = rng() % 50 == 0;
    uint64_t key = lasting ? 0x100000000000ull + ((rng() % 20000) << 12)
                           : 0x7f0000000000ull + ((rng() % 3000) << 21);
    const bool insert = lasting ? rng() % 20 != 0 : rng() % 2 != 0;
    ASSERT_NO_FATAL_FAILURE(insert_or_erase(t, ref, key, insert, static_cast<uint64_t>(i)));
  }
  size_t seen = 0;
  t.for_each([&](uint64_t k, const Rec& r) {
    ++seen;
    EXPECT_EQ(ref.at(k), r.a);
  });
  EXPECT_EQ(seen, ref.size());
  // An erased key's slot is reused by the next insert there, value-initialized.
  auto [first, inserted] = t.try_emplace(1);
  ASSERT_TRUE(inserted);
  first->a = 77;
  t.erase_slot(t.find_slot(1));
  auto [again, inserted_again] = t.try_emplace(1);
  ASSERT_TRUE(inserted_again);
  EXPECT_EQ(again->a, 0u);
}

// Keys whose hashes are equal (here, all of a few hashes) pile up in long runs from the same home:
// they must still be told apart, and an erase must shift such runs right.
TEST(LiveTable, KeysWithEqualHashesStayApart) {
  struct FewHashes {
    size_t operator()(uint64_t k) const noexcept { return static_cast<size_t>(k % 5); }
  };
  struct Rec {
    uint64_t a = 0;
  };
  std::mt19937_64 rng(3);
  gpumemshim::analyzer::LiveTable<uint64_t, Rec, FewHashes> t(16);
  std::unordered_map<uint64_t, uint64_t> ref;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t key = 1000 + rng() % 300;
    ASSERT_NO_FATAL_FAILURE(insert_or_erase(t, ref, key, rng() % 2 == 0, static_cast<uint64_t>(i)));
  }
}
