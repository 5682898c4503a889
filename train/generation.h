#pragma once

// Sampling text from a trained language model with a KV cache (issue 43): the model's
// one-token decoding step (ModelSpec::decode) compiled as a prediction and run a token at
// a time; each step writes the token's keys and values into every layer's cache and
// attends over the cache, so no prefix is computed again. Both front ends run it:
// `tandem generate` and Model::generate.
//
// The context: the caches hold the model's context of positions. When a sequence reaches
// it, the last half of the context is fed again from position 0 (the cache refilled) and
// sampling goes on, as nanoGPT's sampling crops its input to the last block_size tokens
// (there at every token, here every half context: the model sees between half and all of
// its context, never more).

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "frontend/model.h"
#include "ir/ir.h"
#include "runtime/host_tensor.h"
#include "runtime/predictor.h"

namespace tandem::training {

struct SamplingOptions {
  /// The logits are divided by it (> 0): below 1 sharper, above 1 flatter.
  double temperature = 1.0;
  /// > 0: only the k most likely tokens are drawn from (ties by the smaller id).
  int64_t top_k = 0;
  /// The generator's seed: the same seed, model and prompt give the same tokens.
  uint64_t seed = 0;
};

/// A token drawn from softmax(logits / temperature) over the top_k largest logits, in
/// double, with one uniform draw of `gen` (53 bits of one 64-bit output, so that the draw
/// is the same on every platform; std::uniform_real_distribution's is not specified).
int32_t sampleToken(absl::Span<const float> logits, const SamplingOptions& o, std::mt19937_64& gen);

class Generator {
 public:
  /// The value of each trained variable the step reads (a checkpoint's, a trained model's);
  /// an error names the variable it lacks.
  using ValueOf = std::function<absl::StatusOr<runtime::HostTensor>(const ir::Var& var)>;

  /// Compiles `spec`'s decoding step for one sequence on `device` and writes its trained
  /// variables (the caches start at zeros).
  static absl::StatusOr<std::unique_ptr<Generator>> create(const ModelSpec& spec,
                                                           const ir::Device& device,
                                                           const ValueOf& value_of);

  /// Feeds `prompt` (at least one id), then draws `count` tokens, calling `on_token` with
  /// each as it is drawn (false stops there); returns the drawn ids.
  absl::StatusOr<std::vector<int32_t>> generate(absl::Span<const int32_t> prompt, int64_t count,
                                                const SamplingOptions& options,
                                                const std::function<bool(int32_t)>& on_token = {});

  /// The logits after each of `tokens`, fed from position 0 (at most the context): what
  /// the whole sequence's prediction gives at each position (the tests' check of the cache).
  absl::StatusOr<std::vector<std::vector<float>>> logitsOf(absl::Span<const int32_t> tokens);

  /// Seconds of each step of the last generate by the position it ran at, the prompt's
  /// first (what bench/generate_bench compares: a token's cost by its position).
  const std::vector<std::pair<int64_t, double>>& stepSeconds() const { return step_seconds_; }
  int64_t context() const { return context_; }
  int64_t vocabulary() const { return vocab_; }

 private:
  Generator() = default;
  /// The logits of `token` at `position`.
  absl::StatusOr<std::vector<float>> step(int32_t token, int64_t position);

  std::unique_ptr<runtime::Predictor> predictor_;
  int64_t context_ = 0, vocab_ = 0;
  std::vector<std::pair<int64_t, double>> step_seconds_;
};

}  // namespace tandem::training
