#include "train/generation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "ir/predict_graph.h"
#include "ir/status_macros.h"
#include "train/compile.h"

namespace tandem::training {

int32_t sampleToken(absl::Span<const float> logits, const SamplingOptions& o,
                    std::mt19937_64& gen) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const auto larger = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  const size_t kept =
      o.top_k > 0 ? std::min<size_t>(ids.size(), static_cast<size_t>(o.top_k)) : ids.size();
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(kept), ids.end(),
                    larger);
  ids.resize(kept);
  // softmax(logits / T) over the kept ids, shifted by the largest for its exp.
  std::vector<double> weight(kept);
  double total = 0;
  for (size_t i = 0; i < kept; ++i) {
    weight[i] = std::exp((double(logits[ids[i]]) - double(logits[ids[0]])) / o.temperature);
    total += weight[i];
  }
  const double u = static_cast<double>(gen() >> 11) * 0x1.0p-53 * total;
  double below = 0;
  for (size_t i = 0; i < kept; ++i) {
    below += weight[i];
    if (u < below) return ids[i];
  }
  return ids[kept - 1];  // u within rounding of the total
}

absl::StatusOr<std::unique_ptr<Generator>> Generator::create(const ModelSpec& spec,
                                                             const ir::Device& device,
                                                             const ValueOf& value_of) {
  ASSIGN_OR_RETURN(ModelSpec decoding, decodingModel(spec));
  passes::PipelineConfig pipeline;
  pipeline.devices = {device};
  ASSIGN_OR_RETURN(std::unique_ptr<ir::Module> compiled,
                   compilePrediction(decoding, /*batch=*/1, pipeline));
  const ir::Graph* g = compiled->graph(ir::kPredictGraph);
  const ir::TensorType logits = g->outputs().front()->type();  // [1, 1, vocab]
  std::vector<ir::Var> vars(compiled->vars().begin(), compiled->vars().end());
  std::unique_ptr<Generator> gen(new Generator());
  gen->context_ = spec.decode->context;
  gen->vocab_ = logits.shape.back();
  ASSIGN_OR_RETURN(gen->predictor_, runtime::Predictor::create(std::move(compiled), {"logits"}));
  for (const ir::Var& var : vars) {
    if (var.role == ir::VarRole::kBuffer) {  // a cache: zeros (device memory is not)
      RETURN_IF_ERROR(gen->predictor_->setVariable(var.name, runtime::HostTensor(var.type)));
      continue;
    }
    ASSIGN_OR_RETURN(runtime::HostTensor value, value_of(var));
    if (value.type != var.type)
      return absl::InvalidArgumentError(absl::StrCat("variable @", var.name, " is ",
                                                     ir::toString(value.type), "; model ",
                                                     spec.name, " takes ", ir::toString(var.type)));
    RETURN_IF_ERROR(gen->predictor_->setVariable(var.name, value));
  }
  return gen;
}

absl::StatusOr<std::vector<float>> Generator::step(int32_t token, int64_t position) {
  if (token < 0 || token >= vocab_)
    return absl::InvalidArgumentError(
        absl::StrCat("token id ", token, " is outside the vocabulary of ", vocab_));
  runtime::HostTensor ids(ir::TensorType{ir::DType::kI32, {1, 1}});
  runtime::HostTensor at(ir::TensorType{ir::DType::kI32, {1}});
  std::memcpy(ids.buffer.data(), &token, sizeof token);
  const int32_t p = static_cast<int32_t>(position);
  std::memcpy(at.buffer.data(), &p, sizeof p);
  const auto start = std::chrono::steady_clock::now();
  const runtime::HostTensor inputs[] = {std::move(ids), std::move(at)};
  ASSIGN_OR_RETURN(std::vector<runtime::HostTensor> out, predictor_->run(inputs));
  step_seconds_.emplace_back(
      position, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  const float* logits = out.front().f32();
  return std::vector<float>(logits, logits + vocab_);
}

absl::StatusOr<std::vector<std::vector<float>>> Generator::logitsOf(
    absl::Span<const int32_t> tokens) {
  if (static_cast<int64_t>(tokens.size()) > context_)
    return absl::InvalidArgumentError(absl::StrCat(tokens.size(), " tokens are more than the ",
                                                   context_, " of the model's context"));
  std::vector<std::vector<float>> out;
  for (size_t p = 0; p < tokens.size(); ++p) {
    ASSIGN_OR_RETURN(std::vector<float> logits, step(tokens[p], static_cast<int64_t>(p)));
    out.push_back(std::move(logits));
  }
  return out;
}

absl::StatusOr<std::vector<int32_t>> Generator::generate(
    absl::Span<const int32_t> prompt, int64_t count, const SamplingOptions& options,
    const std::function<bool(int32_t)>& on_token) {
  if (prompt.empty())
    return absl::InvalidArgumentError("the prompt is empty: generation starts from a token");
  if (!(options.temperature > 0) || !std::isfinite(options.temperature))
    return absl::InvalidArgumentError(
        absl::StrCat("temperature ", options.temperature, " must be a number above 0"));
  step_seconds_.clear();
  std::mt19937_64 gen(options.seed);
  std::vector<int32_t> sequence(prompt.begin(), prompt.end()), drawn;
  // The prompt's last context tokens fill the caches (feed() past the prompt's length).
  int64_t position = 0;
  std::vector<float> logits;
  auto feed = [&](absl::Span<const int32_t> tokens) -> absl::Status {
    for (int32_t t : tokens) {
      ASSIGN_OR_RETURN(logits, step(t, position));
      ++position;
    }
    return absl::OkStatus();
  };
  const size_t start =
      sequence.size() > static_cast<size_t>(context_) ? sequence.size() - context_ : 0;
  RETURN_IF_ERROR(feed(absl::MakeConstSpan(sequence).subspan(start)));
  for (int64_t i = 0; i < count; ++i) {
    const int32_t next = sampleToken(logits, options, gen);
    sequence.push_back(next);
    drawn.push_back(next);
    if (on_token && !on_token(next)) break;
    if (i + 1 == count) break;
    if (position == context_) {  // the caches are full: the last half again from 0
      position = 0;
      const size_t keep = static_cast<size_t>(std::max<int64_t>(context_ / 2, 1));
      RETURN_IF_ERROR(feed(absl::MakeConstSpan(sequence).subspan(sequence.size() - keep)));
    } else {
      RETURN_IF_ERROR(feed(absl::MakeConstSpan(&sequence.back(), 1)));
    }
  }
  return drawn;
}

}  // namespace tandem::training
