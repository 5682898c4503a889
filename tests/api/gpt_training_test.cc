// The zoo's GPT (issue 43) as a model like any other: its parameters (the output
// projection tied to the token table: one variable, one update), nanoGPT's parameter
// groups for weight decay, training by steps on text whose last tenth is held out, and the
// same losses step by step whatever the split of the batch over devices, dropout (in the
// fused attention too) included.

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "frontend/build_module.h"
#include "frontend/zoo/zoo.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"
#include "runtime/data/text_source.h"
#include "tandem/tandem.h"
#include "tests/test_util.h"
#include "tests/tools/cli_helpers.h"
#include "train/compile.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

zoo::GptShape tinyGpt() {
  zoo::GptShape s;
  s.vocab = 30;
  s.context = 16;
  s.layers = 2;
  s.heads = 2;
  s.width = 32;
  return s;
}

TEST(Gpt, ParametersAreNanoGptsWithTheOutputProjectionTied) {
  // wte 65x128, wpe 128x128, per block two LayerNorms (512), q, k, v and c_proj (4 x
  // 16,512), c_fc 66,048 and the MLP's c_proj 65,664; ln_f 256. No separate lm_head.
  auto m = buildModule(zoo::gpt(), {.batch = 4});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->countElements(ir::VarRole::kParam),
            65 * 128 + 128 * 128 + 4 * (512 + 4 * 16'512 + 66'048 + 65'664) + 256);
  const ir::Graph& g = *(*m)->graph(ir::kTrainGraph);
  int reads = 0, embeddings = 0, projections = 0;
  for (const auto& n : g.nodes()) {
    if (n->op() != ir::Op::kParam || n->symbolAttr("var") != "wte.table") continue;
    ++reads;
    for (const auto& u : g.nodes())
      for (size_t i = 0; i < u->numOperands(); ++i)
        if (u->operand(i) == n->result()) {
          embeddings += u->op() == ir::Op::kEmbedding;
          projections += u->op() == ir::Op::kMatmul;
        }
  }
  EXPECT_EQ(reads, 1);  // one read of one variable, feeding both uses
  EXPECT_EQ(embeddings, 1);
  EXPECT_EQ(projections, 1);
}

// Weight decay 0.1 on the linear layers' weights only (nanoGPT's and timm's groups): the
// tied token table, the position table, LayerNorms and biases are not decayed; the tied
// table is updated once, with the sum of its two gradients.
TEST(Gpt, WeightDecayGoesToTheMatricesAndTheTiedTableIsUpdatedOnce) {
  const ModelSpec spec = zoo::gpt(tinyGpt());
  training::CompileOptions o = training::withModelDefaults(spec);
  o.build.batch = 4;
  o.stop_after = "autodiff";
  auto m = training::compileModel(spec, o);
  ASSERT_TRUE(m.ok()) << m.status();
  std::map<std::string, std::vector<double>> decay;
  for (const auto& n : (*m)->graph(ir::kTrainGraph)->nodes())
    if (n->op() == ir::Op::kAdamwUpdate) {
      const ir::AdamwUpdateView v(*n);
      decay[v.w()->def()->symbolAttr("var")].push_back(v.weight_decay());
    }
  EXPECT_THAT(decay["wte.table"], ::testing::ElementsAre(0.0));
  EXPECT_THAT(decay["wpe.table"], ::testing::ElementsAre(0.0));
  EXPECT_THAT(decay["h0.attn.ln_1.gamma"], ::testing::ElementsAre(0.0));
  EXPECT_THAT(decay["h0.attn.q.b"], ::testing::ElementsAre(0.0));
  EXPECT_THAT(decay["h0.attn.q.w"], ::testing::ElementsAre(0.1));
  EXPECT_THAT(decay["h1.mlp.c_fc.w"], ::testing::ElementsAre(0.1));
  EXPECT_THAT(decay["ln_f.gamma"], ::testing::ElementsAre(0.0));
}

TEST(Gpt, ASizeThatDoesNotFitIsRefusedNamingIt) {
  zoo::GptShape s = tinyGpt();
  s.heads = 3;
  EXPECT_THAT(std::string(zoo::checkGptShape(s).message()),
              HasSubstr("width 32 does not divide into 3 heads"));
  s = tinyGpt();
  s.context = 0;
  EXPECT_THAT(std::string(zoo::checkGptShape(s).message()), HasSubstr("context must be >= 1"));
}

/// A text of ~12,000 characters of 30 distinct ones: sentences drawn from a small grammar
/// with a fixed generator, so the model has something to learn.
std::string writeText(const testing::TempDir& dir) {
  const char* words[] = {"the", "lord", "said",  "unto", "moses", "and", "he",   "went",
                         "up",  "into", "mount", "of",   "god",   "in",  "that", "day"};
  std::string text;
  uint64_t x = 12345;
  while (text.size() < 12000) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    text += words[(x >> 33) % 16];
    text += (x >> 40) % 7 == 0 ? ".\n" : " ";
  }
  return dir.write("corpus.txt", text);
}

/// Per-step training losses of a tiny GPT trained by steps on `devices` with `split`.
std::vector<double> stepLosses(const std::string& text, const std::string& devices,
                               const std::string& split, int64_t steps) {
  zoo::GptShape shape = tinyGpt();
  auto vocab = runtime::data::TextVocabulary::characters([&] {
    std::ifstream in(text);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }());
  EXPECT_TRUE(vocab.ok());
  shape.vocab = vocab.ok() ? vocab->size() : 30;
  std::vector<double> losses;
  TrainConfig c{.devices = devices, .batch = 8, .seed = 3, .warmup = 2, .split = split};
  c.steps = steps;
  c.eval_every = steps;
  absl::StatusOr<Model> m = train(zoo::gpt(shape), c, Data::fromSpec("text:" + text),
                                  {.on_step = [&](const StepMetrics& s) {
                                    losses.push_back(s.loss);
                                    return true;
                                  }});
  EXPECT_TRUE(m.ok()) << m.status();
  return losses;
}

// Dropout draws the same masks for a sample whichever device holds it (after the
// embedding, in the blocks and on attention's probabilities), so only the f32 order of the
// gradient's reduction separates the runs.
TEST(Gpt, TheLossesOfEveryStepDoNotDependOnTheSplit) {
  testing::TempDir dir;
  const std::string text = writeText(dir);
  const std::vector<double> one = stepLosses(text, "cpu:0", "even", 12);
  ASSERT_EQ(one.size(), 12u);
  EXPECT_LT(one.back(), one.front());  // it learns
  for (const auto& [devices, split] :
       {std::pair{"cpu:0,cpu:1", "even"}, std::pair{"cpu:0,cpu:1", "3,1"}}) {
    const std::vector<double> other = stepLosses(text, devices, split, 12);
    ASSERT_EQ(other.size(), one.size()) << devices << " " << split;
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_NEAR(other[i], one[i], 1e-5 * std::abs(one[i]))
          << devices << " split " << split << ", step " << i + 1;
  }
}

TEST(Gpt, StepsOnDataOfExamplesAreRefusedNamingTheSetting) {
  TrainConfig c{.batch = 8};
  c.steps = 4;
  absl::StatusOr<Model> m = train(zoo::gpt(tinyGpt()), c, Data::fashionMnist());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("trains by steps over random windows of token data"));
}

}  // namespace
}  // namespace tandem
