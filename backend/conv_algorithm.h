#pragma once

// The convolution algorithms a device's kernels may choose from (`--conv-algorithm`, the
// backend setting conv_algorithm): a word every backend's options share, each reading it
// its own way.

#include <string>
#include <utility>
#include <vector>

namespace tandem::backend {

enum class ConvAlgorithm {
  kAuto,     // the fastest measured; on CPU that includes Winograd for many 3x3 stride-1
             // convolutions (errors up to ~3e-6 of the largest magnitude; direct: ~4e-7)
  kDirect,   // direct convolution only (no Winograd)
  kMeasure,  // GPU: every cuDNN algorithm timed once per shape (cudnnFind); CPU: as kAuto
};

/// The setting's words, in the order `--conv-algorithm` lists them.
inline std::vector<std::pair<std::string, ConvAlgorithm>> convAlgorithmWords() {
  return {{"auto", ConvAlgorithm::kAuto},
          {"direct", ConvAlgorithm::kDirect},
          {"measure", ConvAlgorithm::kMeasure}};
}

/// The word of `a` ("auto", "direct", "measure").
inline std::string toString(ConvAlgorithm a) {
  for (const auto& [word, value] : convAlgorithmWords())
    if (value == a) return word;
  return "auto";
}

}  // namespace tandem::backend
