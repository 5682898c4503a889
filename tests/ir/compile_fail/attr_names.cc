// Compiled by tests/cmake/compile_fail.cmake once per CASE: case 0 must compile, every
// other case must not (an attribute or operand name the spec does not declare, or a
// required attribute left out). Not part of any target.

#include "ir/op_views.h"

namespace tandem::ir {

int64_t use(const Node& n, Value* x, Value* w) {
  const Conv2dView v(n);
#if CASE == 0  // the names the spec declares
  NodeSpec s = Conv2dArgs{.x = x, .w = w, .stride = 1, .pad = 0}.spec();
  return v.stride().h + attr::pad(n).w + static_cast<int64_t>(s.operands.size());
#elif CASE == 1  // a view accessor misspelled
  return v.strides();
#elif CASE == 2  // a creator field misspelled
  return static_cast<int64_t>(
      Conv2dArgs{.x = x, .w = w, .strides = 1, .pad = 0}.spec().operands.size());
#elif CASE == 3  // a required attribute left out
  return static_cast<int64_t>(Conv2dArgs{.x = x, .w = w, .pad = 0}.spec().operands.size());
#elif CASE == 4  // an attribute by name on any op, misspelled
  return attr::strides(n);
#elif CASE == 5  // an operand misspelled
  return v.bias() != nullptr;
#endif
}

}  // namespace tandem::ir
