// The torch bridge's translation from TraceEntry (through its mirror) to TorchEvent actions,
// without torch.
#include <gtest/gtest.h>

#include "gpumemshim/format/records.h"
#include "translate.h"

namespace th = gpumemshim::torch_hooks;
namespace gf = gpumemshim::format;

TEST(TorchTranslate, EveryActionMapsToItsFormatValue) {
  EXPECT_EQ(th::translate_action(0), static_cast<int>(gf::TorchAction::kAlloc));
  EXPECT_EQ(th::translate_action(1), static_cast<int>(gf::TorchAction::kFreeRequested));
  EXPECT_EQ(th::translate_action(2), static_cast<int>(gf::TorchAction::kFreeCompleted));
  EXPECT_EQ(th::translate_action(3), static_cast<int>(gf::TorchAction::kSegmentAlloc));
  EXPECT_EQ(th::translate_action(4), static_cast<int>(gf::TorchAction::kSegmentFree));
  EXPECT_EQ(th::translate_action(5), static_cast<int>(gf::TorchAction::kSegmentMap));
  EXPECT_EQ(th::translate_action(6), static_cast<int>(gf::TorchAction::kSegmentUnmap));
  EXPECT_EQ(th::translate_action(8), static_cast<int>(gf::TorchAction::kOom));
}

TEST(TorchTranslate, SnapshotAndUnknownAreSkipped) {
  EXPECT_EQ(th::translate_action(7), th::kSkip);
  EXPECT_EQ(th::translate_action(9), th::kSkip);
  EXPECT_EQ(th::translate_action(-1), th::kSkip);
  th::TorchTraceEvent snap{7, 0, 0, 0, 0};
  EXPECT_EQ(th::translate(snap).action, th::kSkip);
}

TEST(TorchTranslate, FieldsAreCarried) {
  th::TorchTraceEvent e{0, 3, 0x7f0012340000ull, 512, static_cast<uintptr_t>(0xabcdef)};
  th::TorchEventArgs a = th::translate(e);
  EXPECT_EQ(a.action, 1);
  EXPECT_EQ(a.device, 3);
  EXPECT_EQ(a.address, 0x7f0012340000ull);
  EXPECT_EQ(a.size, 512u);
  EXPECT_EQ(a.stream, 0xabcdefu);
}

TEST(TorchTranslate, OomKeepsFreeBytesInAddress) {
  th::TorchTraceEvent e{8, 1, 123456789, 1ull << 34, 0};
  th::TorchEventArgs a = th::translate(e);
  EXPECT_EQ(a.action, static_cast<int>(gf::TorchAction::kOom));
  EXPECT_EQ(a.address, 123456789u);
  EXPECT_EQ(a.size, 1ull << 34);
}
