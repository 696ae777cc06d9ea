// Advice for an OOM that activations filled (analyzer/findings/activation_advice.h), on traces
// built with the format's encoder: a deep model's forward pass under a memory-fraction cap, batch
// doubled each step until the allocator refuses; and the same cap filled by weights instead. Then
// growth that an autograd graph kept past its step holds (findings/retained_graph.h): the loop
// line that made it and the line of the user's source that keeps it.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <string>

#include "gpumemshim/analyzer/analyze.h"
#include "gpumemshim/analyzer/render.h"
#include "gpumemshim/analyzer/report.h"
#include "gpumemshim/format/records.h"
#include "temp_dir.h"
#include "trace_builder.h"

namespace an = gpumemshim::analyzer;
namespace gf = gpumemshim::format;
using gpumemshim::testing::TempDir;
using gpumemshim::testing::TraceBuilder;

namespace {

constexpr uint64_t MiB = 1 << 20;
constexpr uint64_t kDevice = 80ull << 30;
constexpr uint64_t kSegment = 0x7f0000000000ull;
constexpr uint64_t kAppBase = 0x400000;
constexpr uint8_t kParameter = 1, kGradient = 2;

void backward(TraceBuilder& t, bool push) {
  t.marker(push ? gf::MarkerKind::kRangePush : gf::MarkerKind::kRangePop, "torch.backward");
}

// The rest of a training step after its forward pass: the backward pass makes 64 MiB of
// gradients at `grads` (stack 1) and frees `saved`, what the forward pass kept for it; the
// gradients are told as such and freed, and optimizer.step() is marked.
void backward_and_step(TraceBuilder& t, uint64_t grads, std::initializer_list<uint64_t> saved) {
  backward(t, true);
  t.torch(gf::TorchAction::kAlloc, grads, 64 * MiB, 1);
  for (uint64_t block : saved) t.torch(gf::TorchAction::kFreeCompleted, block, 0);
  backward(t, false);
  t.torch(gf::TorchAction::kTag, grads, kGradient);
  t.torch(gf::TorchAction::kFreeCompleted, grads, 0);
  t.marker(gf::MarkerKind::kStep, "optimizer.step");
}

TraceBuilder base(uint64_t cap_bytes) {
  TraceBuilder t;
  t.process(11, "train.py");
  t.module("/nonexistent/bin/app", kAppBase, 0x10000);
  t.device(0, kDevice, "Fake GPU");
  t.add(gf::AttributeRecord{"torch.allowed_bytes.0", std::to_string(cap_bytes)});
  t.stack(1, {kAppBase + 0x1000});  // the weights
  t.stack(2, {kAppBase + 0x2000});  // a forward layer
  t.stack(3, {kAppBase + 0x3000});  // another one
  t.alloc(kSegment, cap_bytes);     // the allocator's segment: the whole cap
  t.torch(gf::TorchAction::kSegmentAlloc, kSegment, cap_bytes);
  return t;
}

// Weights of 64 MiB and their gradients, then steps whose forward passes keep `per_layer` bytes
// per layer (two layers) for backward, doubling each step; the last forward pass is refused.
TraceBuilder activation_oom() {
  const uint64_t cap = 1024 * MiB;
  TraceBuilder t = base(cap);
  t.torch(gf::TorchAction::kAlloc, kSegment, 64 * MiB, 1);
  t.torch(gf::TorchAction::kTag, kSegment, kParameter);
  uint64_t per_layer = 32 * MiB;
  uint64_t next = kSegment + 128 * MiB;
  for (int step = 0; step < 3; ++step, per_layer *= 2) {
    const uint64_t a = next, b = next + per_layer;
    t.torch(gf::TorchAction::kAlloc, a, per_layer, 2);
    t.torch(gf::TorchAction::kAlloc, b, per_layer, 3);
    if (step == 2) {  // 2 x 128 MiB held, 800 MiB more refused: 64 + 256 + 800 MiB is over the cap
      t.torch(gf::TorchAction::kOom, kDevice - 1100 * MiB, 800 * MiB);
      break;
    }
    backward_and_step(t, kSegment + 64 * MiB, {a, b});
  }
  t.end();
  return t;
}

// Layers added to a model until the cap refuses the next one's weights: small activations.
TraceBuilder weights_oom() {
  const uint64_t cap = 1024 * MiB;
  TraceBuilder t = base(cap);
  for (uint64_t i = 0; i < 7; ++i) {
    t.torch(gf::TorchAction::kAlloc, kSegment + i * 128 * MiB, 128 * MiB, 1);
    t.torch(gf::TorchAction::kTag, kSegment + i * 128 * MiB, kParameter);
  }
  backward(t, true);  // a forward and backward pass between, with little to keep
  backward(t, false);
  t.torch(gf::TorchAction::kAlloc, kSegment + 900 * MiB, 4 * MiB, 2);
  t.torch(gf::TorchAction::kOom, kDevice - 1100 * MiB, 256 * MiB);
  t.end();
  return t;
}

const an::Advice* find(const an::ProcessReport& p, const std::string& id) {
  auto it = std::find_if(p.advice.begin(), p.advice.end(),
                         [&](const an::Advice& a) { return a.id == id; });
  return it == p.advice.end() ? nullptr : &*it;
}

an::ProcessReport analyze(const TraceBuilder& t, const TempDir& dir) {
  return an::analyze({t.write(dir.file("t.trace"))}).processes.at(0);
}

}  // namespace

TEST(ActivationAdvice, AnActivationBoundOomGetsCheckpointingMixedPrecisionAndAMicroBatch) {
  TempDir dir;
  an::ProcessReport p = analyze(activation_oom(), dir);
  ASSERT_TRUE(p.categories);
  ASSERT_EQ(p.categories->ooms.size(), 1u);
  // The refused forward pass's blocks: its activations as far as the trace can tell.
  EXPECT_EQ(p.categories->ooms[0].in_pass, 256 * MiB);

  const an::Advice* ckpt = find(p, "activation-checkpointing");
  ASSERT_TRUE(ckpt);
  EXPECT_NE(ckpt->evidence.find("activations 256.00 MiB of 320.00 MiB in tensors (80 %)"),
            std::string::npos)
      << ckpt->evidence;
  const an::Advice* amp = find(p, "mixed-precision");
  ASSERT_TRUE(amp);
  EXPECT_NE(amp->action.find("up to 128.00 MiB less"), std::string::npos) << amp->action;
  // 1 GiB cap, 64 MiB that does not grow with the batch: (1024 - 64) / (256 + 800) = 91 %.
  const an::Advice* micro = find(p, "micro-batch");
  ASSERT_TRUE(micro);
  EXPECT_NE(micro->action.find("at most 91 % of this batch fits in 1.00 GiB"), std::string::npos)
      << micro->action;
  EXPECT_NE(micro->action.find("Run 2 micro-batches"), std::string::npos) << micro->action;
  // The cap, not fragmentation, stopped it; the peak's general advice gives way to these.
  EXPECT_FALSE(find(p, "expandable-segments"));
  EXPECT_FALSE(find(p, "gradient-checkpointing"));
  EXPECT_FALSE(find(p, "gradient-accumulation"));
}

TEST(ActivationAdvice, AWeightsBoundOomGetsNone) {
  TempDir dir;
  an::ProcessReport p = analyze(weights_oom(), dir);
  ASSERT_TRUE(p.categories);
  ASSERT_EQ(p.categories->ooms.size(), 1u);
  for (const char* id : {"activation-checkpointing", "mixed-precision", "micro-batch"})
    EXPECT_FALSE(find(p, id)) << id;
}

TEST(ActivationAdvice, NoneWithoutCategories) {
  TempDir dir;
  TraceBuilder t = base(1024 * MiB);
  t.torch(gf::TorchAction::kAlloc, kSegment, 900 * MiB, 2);  // untagged, no backward pass marked
  t.torch(gf::TorchAction::kOom, kDevice - 1100 * MiB, 256 * MiB);
  t.end();
  an::ProcessReport p = analyze(t, dir);
  EXPECT_FALSE(find(p, "activation-checkpointing"));
}

namespace {

// Steps under a 1 GiB cap that fit: 64 MiB of weights, forward passes keeping `per_layer` bytes at
// each of two layers for backward, 64 MiB of gradients made while they are alive. No OOM.
TraceBuilder near_cap(uint64_t per_layer, uint64_t weights = 64 * MiB) {
  const uint64_t cap = 1024 * MiB;
  TraceBuilder t = base(cap);
  t.torch(gf::TorchAction::kAlloc, kSegment, weights, 1);
  t.torch(gf::TorchAction::kTag, kSegment, kParameter);
  const uint64_t a = kSegment + weights + 64 * MiB, b = a + per_layer;
  for (int step = 0; step < 4; ++step) {
    t.torch(gf::TorchAction::kAlloc, a, per_layer, 2);
    t.torch(gf::TorchAction::kAlloc, b, per_layer, 3);
    backward_and_step(t, kSegment + weights, {a, b});
  }
  t.end();
  return t;
}

}  // namespace

TEST(ActivationAdvice, APeakNearTheCapThatActivationsFillGetsTheSameAdviceWithoutAnOom) {
  TempDir dir;
  an::ProcessReport p = analyze(near_cap(420 * MiB), dir);
  ASSERT_TRUE(p.categories);
  EXPECT_TRUE(p.categories->ooms.empty());
  const an::Advice* ckpt = find(p, "activation-checkpointing");
  ASSERT_TRUE(ckpt);
  EXPECT_EQ(ckpt->finding, "peak:11");
  // 840 MiB of activations among 968 MiB of tensors at the peak; the cap's segment is the device's.
  EXPECT_NE(ckpt->evidence.find("at the peak (1.00 GiB of 1.00 GiB, 100 %): activations 840.00 MiB "
                                "of 968.00 MiB in tensors (87 %)"),
            std::string::npos)
      << ckpt->evidence;
  EXPECT_TRUE(find(p, "mixed-precision"));
  const an::Advice* micro = find(p, "micro-batch");
  ASSERT_TRUE(micro);
  EXPECT_NE(micro->action.find("give back about 420.00 MiB, bringing what this peak needs beyond "
                               "the allocator's cache from 968.00 MiB to about 548.00 MiB (54 % "
                               "of 1.00 GiB)"),
            std::string::npos)
      << micro->action;
  // The categories' advice replaces the peak's general advice.
  for (const char* id : {"gradient-checkpointing", "amp", "gradient-accumulation"})
    EXPECT_FALSE(find(p, id)) << id;
}

TEST(ActivationAdvice, NoneAtAPeakFarFromTheCapOrFilledByWeights) {
  TempDir dir;
  // The cap's whole segment is reserved at once, so the device peak is always at the cap; what
  // the tensors hold decides. Weights of 700 MiB against 2 x 60 MiB of activations:
  an::ProcessReport weights = analyze(near_cap(60 * MiB, 700 * MiB), dir);
  for (const char* id : {"activation-checkpointing", "mixed-precision", "micro-batch"})
    EXPECT_FALSE(find(weights, id)) << id;
}

namespace {

// Steps of a training loop: each forward pass saves 1 MiB at stack 2 for backward; with `retain`
// the backward pass leaves it alive (a graph kept past its step, as backward(retain_graph=True)
// with the loss summed as a tensor does), else frees it.
TraceBuilder training(bool retain, int steps = 24) {
  TraceBuilder t = base(4096 * MiB);
  t.torch(gf::TorchAction::kAlloc, kSegment, 64 * MiB, 1);
  t.torch(gf::TorchAction::kTag, kSegment, kParameter);
  uint64_t next = kSegment + 128 * MiB;
  for (int step = 0; step < steps; ++step) {
    const uint64_t saved = next;
    next += 2 * MiB;
    t.torch(gf::TorchAction::kAlloc, saved, 1 * MiB, 2);
    if (retain)
      backward_and_step(t, kSegment + 64 * MiB, {});
    else
      backward_and_step(t, kSegment + 64 * MiB, {saved});
  }
  t.end();
  return t;
}

}  // namespace

TEST(RetainedGraph, GrowthHeldByAGraphKeptPastItsStepSaysSo) {
  TempDir dir;
  an::ProcessReport p = analyze(training(true), dir);
  ASSERT_TRUE(p.categories);
  ASSERT_FALSE(p.categories->kept_sites.empty());
  // The last step's block has seen no backward pass after its own yet.
  EXPECT_EQ(p.categories->kept_sites[0].bytes, 23 * MiB);
  ASSERT_FALSE(p.growth.empty());
  const an::Advice* a = find(p, "retained-graph");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->finding, "growth:" + p.growth[0].id);
  EXPECT_NE(a->evidence.find("23.00 MiB made by forward passes had outlived the backward pass"),
            std::string::npos)
      << a->evidence;
  EXPECT_NE(a->action.find("loss.item(), out.detach()"), std::string::npos) << a->action;
}

TEST(RetainedGraph, NoneWhenBackwardFreesWhatItSaved) {
  TempDir dir;
  an::ProcessReport p = analyze(training(false), dir);
  ASSERT_TRUE(p.categories);
  EXPECT_TRUE(p.categories->kept_sites.empty());
  EXPECT_FALSE(find(p, "retained-graph"));
}

namespace {

// A training step (stack 2, saved for its backward pass and freed by it) and then an evaluation
// at line 7 of `train_py`: a forward pass through model.py's two layers (stacks 5 and 6, 1 MiB and
// 512 KiB) whose graph is kept, so its blocks outlive every backward pass after them.
// `returns`: the loop runs in a function whose local list kept the graphs, freed when it returns
// before the process ends.
TraceBuilder evaluation_kept(const std::string& train_py, int steps = 24, bool returns = false) {
  TraceBuilder t = base(4096 * MiB);
  t.stack(5, {kAppBase + 0x5000});
  // torch's own frames between are shared by both layers: not the loop's line.
  const TraceBuilder::PyFrame call{"/venv/lib/python3.12/site-packages/torch/nn/modules/module.py",
                                   "Module._call_impl", 1750};
  t.python_stack(5, {{"/src/model.py", "Net.forward", 30}, call, {train_py, "<module>", 7}});
  t.stack(6, {kAppBase + 0x6000});
  t.python_stack(6, {{"/src/model.py", "Net.forward", 31}, call, {train_py, "<module>", 7}});
  t.torch(gf::TorchAction::kAlloc, kSegment, 64 * MiB, 1);
  t.torch(gf::TorchAction::kTag, kSegment, kParameter);
  uint64_t next = kSegment + 128 * MiB;
  for (int step = 0; step < steps; ++step) {
    t.torch(gf::TorchAction::kAlloc, kSegment + 96 * MiB, 1 * MiB, 2);
    backward(t, true);
    t.torch(gf::TorchAction::kFreeCompleted, kSegment + 96 * MiB, 0);
    backward(t, false);
    t.marker(gf::MarkerKind::kStep, "optimizer.step");
    t.torch(gf::TorchAction::kAlloc, next, 1 * MiB, 5);
    t.torch(gf::TorchAction::kAlloc, next + 1 * MiB, 512 * 1024, 6);
    next += 2 * MiB;
  }
  if (returns)
    for (uint64_t a = kSegment + 128 * MiB; a < next; a += 2 * MiB) {
      t.torch(gf::TorchAction::kFreeCompleted, a, 0);
      t.torch(gf::TorchAction::kFreeCompleted, a + 1 * MiB, 0);
    }
  t.end();
  return t;
}

// train.py with line 7 making the evaluation's graph and `after` (lines 8 on) doing with it what
// the user's loop does; `made` replaces line 7.
std::string write_loop(const TempDir& dir, const std::string& after,
                       const std::string& made = "    val_loss = F.cross_entropy(model(xv), yv)") {
  const std::string path = dir.file("train.py");
  std::ofstream(path) << "import torch\n"
                         "losses, outputs, total = [], {}, 0\n"
                         "for step in range(24):\n"
                         "    loss = model(x).sum()\n"
                         "    loss.backward()\n"
                         "    opt.step()\n"
                      << made << "\n"
                      << after;
  return path;
}

const an::Growth& growth_at(const an::ProcessReport& p, uint32_t line) {
  for (const an::Growth& g : p.growth)
    for (const an::Frame& f : g.stack)
      if (f.python && f.file == "/src/model.py" && f.line == line) return g;
  ADD_FAILURE() << "no growth at model.py:" << line;
  static const an::Growth none;
  return none;
}

}  // namespace

TEST(RetainedGraph, NamesTheLoopLineAndTheListAppendThatKeepsIt) {
  TempDir dir;
  const std::string train = write_loop(dir,
                                       "    print(val_loss.item())\n"
                                       "    losses.append(val_loss)\n");
  an::ProcessReport p = analyze(evaluation_kept(train), dir);
  const an::Growth& g = growth_at(p, 30);
  EXPECT_EQ(g.bytes_per_step, static_cast<double>(MiB));
  EXPECT_EQ(g.cause, "retained_graph");
  EXPECT_EQ(g.graph_made_at, train + ":7");
  // Line 8 reads the loss as a number: not what keeps it.
  EXPECT_EQ(g.graph_held_at, train + ":9");
  EXPECT_EQ(g.graph_held_how, "appends it to a list");
  EXPECT_EQ(g.graph_held_text, "losses.append(val_loss)");
  const an::Advice* a = find(p, "retained-graph");
  ASSERT_TRUE(a);
  EXPECT_NE(a->action.find("Blocks made at /src/model.py:30 by the forward pass that " + train +
                           ":7 runs outlive the backward pass"),
            std::string::npos)
      << a->action;
  EXPECT_NE(a->action.find(train + ":9 keeps it: `losses.append(val_loss)` appends it to a list."),
            std::string::npos)
      << a->action;

  an::Report r = an::analyze({evaluation_kept(train).write(dir.file("r.trace"))});
  const nlohmann::json cause = an::report_json(r)["growth"][0]["cause"];
  EXPECT_EQ(cause["kind"], "retained_graph");
  EXPECT_EQ(cause["made_at"], train + ":7");
  EXPECT_EQ(cause["held_at"], train + ":9");
  EXPECT_EQ(cause["held_how"], "appends it to a list");
  EXPECT_NE(an::report_text(r).find("  cause: an autograd graph kept past its step holds the "
                                    "activations it saved; its forward pass runs at " +
                                    train + ":7; " + train + ":9 keeps it"),
            std::string::npos)
      << an::report_text(r);
  EXPECT_NE(an::report_html(r).find("cause: an autograd graph kept past its step"),
            std::string::npos);
}

TEST(RetainedGraph, AGraphKeptByALocalListFreedWhenItsFunctionReturnsIsNamedToo) {
  TempDir dir;
  const std::string train = write_loop(dir, "    losses.append(val_loss)\n");
  an::ProcessReport p = analyze(evaluation_kept(train, 24, /*returns=*/true), dir);
  const an::Growth& g = growth_at(p, 30);
  EXPECT_EQ(g.cause, "retained_graph");
  EXPECT_EQ(g.graph_made_at, train + ":7");
  EXPECT_EQ(g.graph_held_at, train + ":8");
  // Both layers' blocks outlived their backward passes over the run, though none is alive at the
  // end.
  ASSERT_TRUE(p.categories);
  ASSERT_EQ(p.categories->kept_sites.size(), 2u);
  EXPECT_EQ(p.categories->kept_sites[0].bytes, 22 * MiB);  // all but the last two steps' blocks
}

TEST(RetainedGraph, NamesADictStoreOnTheLoopLineItself) {
  TempDir dir;
  const std::string train =
      write_loop(dir, "print(len(outputs))\n", "    outputs[step] = model(xv)");
  an::ProcessReport p = analyze(evaluation_kept(train), dir);
  const an::Growth& g = growth_at(p, 30);
  EXPECT_EQ(g.graph_held_at, train + ":7");
  EXPECT_EQ(g.graph_held_how, "stores it in a dict or list");
}

TEST(RetainedGraph, NamesALossSummedAsATensor) {
  TempDir dir;
  const std::string train = write_loop(dir, "    total = total + val_loss  # running sum\n");
  an::ProcessReport p = analyze(evaluation_kept(train), dir);
  const an::Growth& g = growth_at(p, 30);
  EXPECT_EQ(g.graph_held_at, train + ":8");
  EXPECT_EQ(g.graph_held_how, "sums it across steps");
}

TEST(RetainedGraph, NoKeeperNamedWhenTheLoopKeepsOnlyNumbersOrTheSourceIsGone) {
  TempDir dir;
  // .item() and .detach() keep no graph; the append after the loop's block is not in the loop.
  const std::string train = write_loop(dir,
                                       "    total += val_loss.item()\n"
                                       "    losses.append(val_loss.detach())\n"
                                       "losses.append(val_loss)\n");
  an::ProcessReport p = analyze(evaluation_kept(train), dir);
  const an::Growth& g = growth_at(p, 30);
  EXPECT_EQ(g.cause, "retained_graph");  // the trace still shows the blocks kept
  EXPECT_EQ(g.graph_made_at, train + ":7");
  EXPECT_EQ(g.graph_held_at, "");
  const an::Advice* a = find(p, "retained-graph");
  ASSERT_TRUE(a);
  EXPECT_NE(a->action.find("Something keeps it: a loss summed as a tensor, or losses or outputs"),
            std::string::npos)
      << a->action;

  an::ProcessReport gone = analyze(evaluation_kept(dir.file("missing.py")), dir);
  EXPECT_EQ(growth_at(gone, 30).graph_made_at, dir.file("missing.py") + ":7");
  EXPECT_EQ(growth_at(gone, 30).graph_held_at, "");
}
