// A user's program sees the public API only: compiled once per CASE by
// tests/cmake/compile_fail.cmake. Case 0 uses it as a user does and must compile; cases
// 1..5 call a compiler entry point that the API hides and must not.
#include <memory>
#include <source_location>

#include "tandem/tandem.h"

namespace {

tandem::Tensor forward(tandem::Builder& b, tandem::Tensor x) {
  x = b.relu(b.conv2d(x, {.out_channels = 4, .pad = 1}));
#if CASE == 1
  b.beginGraph(nullptr, true);
#elif CASE == 2
  x = b.addInput("x", x.value()->type());
#elif CASE == 3
  x = b.addNode({}, "layer", std::source_location::current());
#endif
  return b.linear(b.flatten(x), {.out_features = 10});
}

}  // namespace

int main() {
  const tandem::ModelSpec spec = tandem::classifierModel("m", {1, 8, 8}, 10, forward);
  auto model = tandem::Model::create(spec, {}, tandem::Data::fashionMnist());
#if CASE == 4
  tandem::Model made(std::unique_ptr<tandem::Model::Impl>{});
#elif CASE == 5
  tandem::ir::Module module("m");
  tandem::Builder builder(module, {});
#endif
  return model.ok() ? 0 : 1;
}
