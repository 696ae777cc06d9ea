// The torch bridge's translation from TraceEntry (through its mirror) to TorchEvent actions,
// without torch.
#include <gtest/gtest.h>

#include <utility>

#include "gpumemshim/format/records.h"
#include "translate.h"

namespace th = gpumemshim::torch_hooks;
namespace gf = gpumemshim::format;
using th::TraceAction;

namespace {
int index_of(TraceAction a) { return static_cast<int>(a); }
}  // namespace

TEST(TorchTranslate, EveryActionMapsToItsFormatValue) {
  const std::pair<TraceAction, gf::TorchAction> cases[] = {
      {TraceAction::kAlloc, gf::TorchAction::kAlloc},
      {TraceAction::kFreeRequested, gf::TorchAction::kFreeRequested},
      {TraceAction::kFreeCompleted, gf::TorchAction::kFreeCompleted},
      {TraceAction::kSegmentAlloc, gf::TorchAction::kSegmentAlloc},
      {TraceAction::kSegmentFree, gf::TorchAction::kSegmentFree},
      {TraceAction::kSegmentMap, gf::TorchAction::kSegmentMap},
      {TraceAction::kSegmentUnmap, gf::TorchAction::kSegmentUnmap},
      {TraceAction::kOom, gf::TorchAction::kOom},
  };
  for (const auto& [torch_action, format_action] : cases)
    EXPECT_EQ(th::translate_action(index_of(torch_action)), format_action)
        << "TraceEntry action " << index_of(torch_action);
}

TEST(TorchTranslate, SnapshotAndUnknownAreSkipped) {
  EXPECT_FALSE(th::translate_action(index_of(TraceAction::kSnapshot)));
  EXPECT_FALSE(th::translate_action(index_of(TraceAction::kOom) + 1));  // a later torch's action
  EXPECT_FALSE(th::translate_action(-1));
  th::TorchTraceEvent snap{index_of(TraceAction::kSnapshot), 0, 0, 0, 0};
  EXPECT_FALSE(th::translate(snap));
}

TEST(TorchTranslate, FieldsAreCarried) {
  th::TorchTraceEvent e{index_of(TraceAction::kAlloc), 3, 0x7f0012340000ull, 512,
                        static_cast<uintptr_t>(0xabcdef)};
  std::optional<th::TorchEventArgs> a = th::translate(e);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->action, gf::TorchAction::kAlloc);
  EXPECT_EQ(a->device, 3);
  EXPECT_EQ(a->address, 0x7f0012340000ull);
  EXPECT_EQ(a->size, 512u);
  EXPECT_EQ(a->stream, 0xabcdefu);
}

TEST(TorchTranslate, OomKeepsFreeBytesInAddress) {
  th::TorchTraceEvent e{index_of(TraceAction::kOom), 1, 123456789, 1ull << 34, 0};
  std::optional<th::TorchEventArgs> a = th::translate(e);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->action, gf::TorchAction::kOom);
  EXPECT_EQ(a->address, 123456789u);
  EXPECT_EQ(a->size, 1ull << 34);
}
