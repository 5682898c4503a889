// The CUDA backend's NHWC plan (backend/cuda/layout_plan.h) on the compiled training
// graphs of ResNet-18 and LeNet: which values stay NHWC, and that none of them is seen by
// a collective, a variable, the host (graph inputs and outputs) or a kernel that reads
// only NCHW. Runs without a GPU: the plan is a function of the graph.

#include <string>

#include "backend/cuda/layout_plan.h"
#include "gtest/gtest.h"
#include "ir/op_info.h"
#include "tests/device_kinds.h"
#include "tests/runtime/runtime_test_util.h"

namespace tandem::testing {
namespace {

std::unique_ptr<ir::Module> compileFor(const std::string& model, int devices, bool bf16,
                                       bool sync_bn) {
  auto spec = zoo::modelByName(model);
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return nullptr;
  training::CompileOptions c;
  c.build.batch = 8 * devices;
  c.pipeline.devices.clear();
  for (int d = 0; d < devices; ++d)
    c.pipeline.devices.push_back({::tandem::testing::kind("cuda"), d});
  c.pipeline.bf16 = bf16;
  c.pipeline.sync_bn = sync_bn;
  auto module = training::compileModel(*spec, c);
  EXPECT_TRUE(module.ok()) << module.status();
  return module.ok() ? std::move(*module) : nullptr;
}

/// Every NHWC value is made and read only in slots whose kernels take it, in a layout
/// every slot agrees on (the check kernels run when made), and none is a graph input or
/// output, variable storage or a collective's operand or result.
void expectPlanHonoursItsBorders(const ir::Graph& g,
                                 const absl::flat_hash_set<const ir::Value*>& nhwc) {
  for (const auto& n : g.nodes()) {
    EXPECT_TRUE(backend::cuda::checkNhwcSlots(*n, nhwc).ok()) << n->describe();
    const bool border = ir::isSource(n->op()) || ir::isCollective(n->op());
    if (!border) continue;
    for (size_t i = 0; i < n->numOperands(); ++i)
      EXPECT_FALSE(nhwc.contains(n->operand(i))) << n->describe() << " operand " << i;
    for (size_t r = 0; r < n->numResults(); ++r)
      EXPECT_FALSE(nhwc.contains(n->result(r))) << n->describe() << " result " << r;
  }
  for (const ir::Value* v : g.outputs()) EXPECT_FALSE(nhwc.contains(v));
}

/// Activations: 4-D values that are not variables, their gradients or the batch's split.
bool activation(const ir::Value* v) {
  switch (v->def()->op()) {
    case ir::Op::kParam:
    case ir::Op::kInput:
    case ir::Op::kSplit:
    case ir::Op::kAllReduce:
    case ir::Op::kConv2dBackwardFilter:
      return false;
    default:
      return v->type().rank() == 4;
  }
}

TEST(CudaNhwcPlan, Resnet18KeepsEveryActivationButTheImageNhwc) {
  for (bool bf16 : {false, true})
    for (int devices : {1, 2}) {
      SCOPED_TRACE(std::string(bf16 ? "bf16" : "f32") + " x" + std::to_string(devices));
      auto m = compileFor("resnet18", devices, bf16, /*sync_bn=*/devices > 1);
      ASSERT_NE(m, nullptr);
      const ir::Graph& g = *m->graph(ir::kTrainGraph);
      const auto nhwc = backend::cuda::nhwcValues(g);
      expectPlanHonoursItsBorders(g, nhwc);
      size_t activations = 0, stems = 0;
      for (const auto& n : g.nodes()) {
        for (size_t r = 0; r < n->numResults(); ++r) {
          const ir::Value* v = n->result(r);
          if (!activation(v)) continue;
          ++activations;
          // Plain: the 1-channel image (and its bf16 cast) and global_avg_pool's
          // [N,C,1,1] output and gradient, which the head reads as a matrix.
          const bool plain = v->type().shape[1] == 1 || n->op() == ir::Op::kGlobalAvgPool ||
                             n->op() == ir::Op::kFlattenBackward;
          EXPECT_EQ(nhwc.contains(v), !plain) << n->describe();
        }
        if (n->op() == ir::Op::kConv2dStats && n->operand(0)->type().shape[1] == 1) {
          ++stems;  // the stem: NCHW image in, NHWC out (transposed in its workspace)
          EXPECT_FALSE(nhwc.contains(n->operand(0)));
          EXPECT_TRUE(nhwc.contains(n->result(0)));
        }
      }
      EXPECT_EQ(stems, static_cast<size_t>(devices));
      EXPECT_GT(nhwc.size(), 90u * static_cast<size_t>(devices)) << "of " << activations;
    }
}

TEST(CudaNhwcPlan, LenetKeepsOnlyItsFirstBlockNhwc) {
  // conv1's 20 f32 channels are 80 bytes a pixel: conv1 and pool1 (with relu fused into it
  // by fuse-relu-pool in LeNet, separate after LeNet-BN's batch norm) and their gradients
  // stay NHWC: at least conv1's output, pool1's and the two gradients. conv2's 50 channels
  // are 200 bytes, not whole 16-byte vectors, and feed flatten through relu and pooling:
  // NCHW.
  for (const char* model : {"lenet", "lenet_bn"}) {
    SCOPED_TRACE(model);
    auto m = compileFor(model, 1, false, false);
    ASSERT_NE(m, nullptr);
    const ir::Graph& g = *m->graph(ir::kTrainGraph);
    const auto nhwc = backend::cuda::nhwcValues(g);
    expectPlanHonoursItsBorders(g, nhwc);
    size_t conv1_activations = 0;
    for (const auto& n : g.nodes())
      for (size_t r = 0; r < n->numResults(); ++r) {
        const ir::Value* v = n->result(r);
        if (!activation(v)) continue;
        const bool block1 = v->type().shape[1] == 20;
        conv1_activations += block1;
        EXPECT_EQ(nhwc.contains(v), block1) << n->describe();
      }
    EXPECT_EQ(nhwc.size(), conv1_activations);
    EXPECT_GE(nhwc.size(), 4u);
  }
}

}  // namespace
}  // namespace tandem::testing
