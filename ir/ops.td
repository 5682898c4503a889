# The op spec: every Tandem op, once. ir/opgen/opgen.cc reads it when Tandem builds and
# writes the Op enum and OpInfo table, a typed view and a typed creator per op
# (ir/op_views.h), the verifier's attribute and dtype checks, the cost-model table, the
# kernel-table slots every backend fills, and docs/IR.md's op table. docs/DESIGN.md section
# 2 shows every file a new op touches.
#
# Grammar (one statement a line; `#` starts a comment; an indented line belongs to the
# `op` above it):
#   trait NAME: DOC                 a property passes ask (`traits` below); C++ kNameInCamel
#   enum NAME: WORD WORD ...        the words of an enum attribute; C++ `enum class NAME`
#   class NAME: DOC                 a family of ops that share operands, results, traits
#                                   and rules (its indented lines, as an op's); its ops
#                                   use ir/ops' kNameInCamelRules, and the backward ops
#                                   that `grad reads` makes kNameInCamelBackwardRules
#   op NAME [: CLASS]               snake_case text name; the C++ names are its CamelCase;
#                                   with CLASS, its lines first, then the op's own
#     operands A, B?, XS...         `?` optional (trailing only), `...` variadic (last)
#     results  Y, Z?, YS...         the same marks; names for views, costs and docs
#                                   Any of them may say its dtypes: `x: float, labels: i32,
#                                   b?: float, xs...: float`, with DTYPE f32, bf16, i32, f64, i64,
#                                   float (f32|bf16) or a union `f32|i32`; none: any dtype.
#                                   The verifier checks an operand's before the shape rule
#                                   ("labels (%y: f32[8]) must be i32"), so a rule checks
#                                   only how operands relate (the same dtype as x, f32
#                                   master weights beside bf16 activations); a result's is
#                                   what the rule gives (an internal error if not). A
#                                   class' slots and their dtypes go to its ops, and the
#                                   backward op of `grad reads` takes dy as y, dx as x.
#     attr NAME: KIND [= DEFAULT] [CHECK] [preset VALUE]
#                                   KIND: int, float, bool, ints, symbol, devices, hw (a
#                                   window's height and width: `3`, or `[3,2]` when they
#                                   differ; C++ ir::Hw) or an enum; DEFAULT (int, float, bool) makes the attribute
#                                   optional in the IR (the printer leaves it out when
#                                   equal); CHECK (int, float): `>= N`, `> N`, or `in [A,
#                                   B)` with [ or ( and ] or ) (hw: each of h and w): the verifier's "NAME must
#                                   be ..."; preset (int, float): the value front ends give
#                                   when neither the model nor the user does (optimizer
#                                   hyper-parameters), the attribute staying required
#     traits T T ...                trait names declared above
#     cost FORMULA[(ARG, ...)]      the roofline's flops (ir/op_cost.h): none,
#                                   elementwise[(FLOPS per result element)], gemm(FILTER,
#                                   OUT), matmul(A, B), contraction(A, OUT) (a batched
#                                   product, K from A and trans_a), attention(Q, K) and
#                                   attention_backward(Q, K), reduction(X) (one flop
#                                   per element of X); ARGs name operands or results
#     optimizer param=P grad=G [grouped=OP | grouped_of=OP] [sharded=OP] [lr_scale=S]
#                                   an optimizer update (ir/interfaces.h): operand P is the
#                                   trained weight, G its gradient; its multi-tensor form;
#                                   its flat-shard form (shard-weight-update); S its last,
#                                   optional operand: the learning-rate factor
#     optimizer sharded_of=OP       the flat-shard form of OP: OP's operands and attributes,
#                                   one result y, the updated weight shard
#     state S init=INIT var=SUFFIX [when=ATTR>0] [shape=scalar]
#                                   optimizer state operand S: a variable "<param>.SUFFIX"
#                                   of the weight's type (shape=scalar: an f32[1], such as
#                                   an update count), initialized INIT (zeros, ones)
#     collective kind=K reads=R writes=W call=C
#                                   K: reduce, broadcast, scatter, gather, reduce_scatter,
#                                   all_gather; R: per_device, group_source, host,
#                                   module_devices; W: per_device, first_device; C: the
#                                   communicator call (runtime)
#     present OPERAND when=ATTR     optional OPERAND is there exactly when bool ATTR is
#                                   true (so another optional operand may follow it, told
#                                   by the count): softmax_cross_entropy's weight
#     grad reads x|y                (one operand x, one result y; ops of a class only)
#                                   the spec also makes the backward op NAME_backward,
#                                   operands dy and the forward's input x or output y,
#                                   result dx, trait backward, cost and doc from:
#     grad cost FORMULA             the backward op's cost (as `cost`)
#     grad doc TEXT                 the backward op's doc (as `doc`)
#     onnx NAME SINCE..[UNTIL]      one-to-one with ONNX op NAME at opsets SINCE to UNTIL
#                                   (open: to the newest): the importer reads NAME as
#                                   this op and the exporter writes this op as NAME
#     doc TEXT                      one line or more, joined with spaces

trait collective: operands and results span devices, grouped by the `devices` attribute
trait stateful: writes persistent variables (OpRules::writes names them)
trait fusible: candidate for conv-bn-relu style fusion
trait loss: produces the scalar autodiff differentiates
trait declared_type: the result type is written down, not inferred
trait backward: emitted by autodiff as part of a gradient
trait init_only: only meaningful in the init graph
trait low_precision: computes in the low dtype under mixed precision (its activation operand is cast down)
trait full_precision: takes f32 only under mixed precision (low operands are cast up)
trait runtime: executed by the runtime itself (no kernel): graph inputs, variable reads, collectives
trait optimizer: an optimizer update: the `optimizer` line says which operands are what
trait source: a value from outside the dataflow (a graph argument, a variable's replica): no kernel runs it and no arena buffer holds it
trait device_sum: its result is summed over the devices (insert-collectives all-reduces it right after it) before any reader reads it: a global count that a mean divides by
trait view: its result is its first operand's bytes under another shape (a row-major reshape): plan-memory gives the result the operand's arena bytes, and the kernel's copy then has nothing to do
trait sample_indexed: computes per row of its first operand by the row's index in the whole batch: replicate sets attribute `sample_offset` of each device's copy to the index of the device's first row

enum ReduceOp: sum mean max
enum Reduction: mean sum
enum FloatType: f32 bf16
enum CastType: f32 bf16 i32
enum PadMode: constant reflect edge
enum Comparison: eq ne lt le gt ge

# --- values that come from outside the dataflow -----------------------------------------
op input
  results x
  traits declared_type runtime source
  cost none
  doc A graph argument (a batch of data); printed in the graph header.

op param
  results value
  attr var: symbol
  traits runtime source
  cost none
  doc Reads the device's replica of a persistent variable (its initializer is on the var).

op constant
  results tensor
  attr value: float
  traits declared_type
  cost none
  doc A tensor of the declared type filled with one value.

op initialize
  results value
  attr var: symbol
  traits init_only
  cost elementwise
  doc Computes a variable's initial value from its initializer (init graph).

op assign
  operands value
  attr var: symbol
  traits stateful
  cost elementwise
  doc Writes a value into the device's replica of a variable.

# --- forward layers ---------------------------------------------------------------------
op conv2d
  operands x: float, w: float, b?: float
  results y: float
  attr stride: hw >= 1
  attr pad: hw >= 0
  attr groups: int = 1 >= 1
  traits fusible low_precision
  cost gemm(w, y)
  doc 2-D convolution: x[N,C,H,W] * w[O,C/groups,KH,KW] (+ b[O]) -> [N,O,H',W'] in x's dtype;
  doc stride and pad per axis (hw: one int, or [h,w]).
  doc With groups > 1 the channels split into that many groups, output group g reading only
  doc input group g (groups = C = O: depthwise). Under bf16 x, w and b may be f32 master
  doc weights, which the kernel converts as it reads them.

op batch_norm
  operands x: float, gamma: f32, beta: f32, running_mean: f32, running_var: f32
  results y: float, save_mean?: f32, save_invstd?: f32
  attr training: bool
  attr momentum: float in [0, 1]
  attr eps: float > 0
  traits fusible stateful
  cost elementwise
  doc Per-channel batch normalization. Training mode normalizes with batch statistics,
  doc updates the running ones and also returns the saved mean and 1/std for backward.

op layer_norm
  operands x: float, gamma: f32, beta: f32
  results y: float, mean: f32, var: f32
  attr eps: float > 0
  cost elementwise(8)
  doc Layer normalization over the last axis (nn.LayerNorm, affine): y = (x - mean) /
  doc sqrt(var + eps) * gamma + beta per row, var biased; also returns each row's mean and
  doc var (f32, x's shape without its last axis) for the backward. x f32 or bf16; gamma,
  doc beta and the statistics f32.

op softmax
  operands x: float
  results y: float
  attr axis: int
  cost elementwise(5)
  doc exp(x) / sum(exp(x)) over `axis` (negative counts from the end, as in PyTorch).

op log_softmax
  operands x: float
  results y: float
  attr axis: int
  cost elementwise(5)
  doc x - log(sum(exp(x))) over `axis` (negative counts from the end).

# The unary float ops: a new one is its stanza here and its per-element math, one struct
# NameMath in backend/unary_math.h, which the CPU backend shares (docs/DESIGN.md,
# "Adding an op").
class unary_elementwise: y = f(x) element by element, in x's type (f32 or bf16)
  operands x: float
  results y: float

op relu : unary_elementwise
  traits fusible
  cost elementwise
  grad reads y
  grad cost elementwise
  onnx Relu 6..
  doc max(x, 0).
  grad doc dy where relu's output y > 0.

op sigmoid : unary_elementwise
  cost elementwise(4)
  grad reads y
  grad cost elementwise(3)
  onnx Sigmoid 6..
  doc 1 / (1 + exp(-x)).
  grad doc dy * y * (1 - y), from sigmoid's output y.

op gelu : unary_elementwise
  cost elementwise(8)
  grad reads x
  grad cost elementwise(10)
  grad doc dy * (Phi(x) + x phi(x)), from gelu's input x.
  doc x/2 (1 + erf(x / sqrt 2)): the exact GELU (PyTorch's nn.GELU()).

op gelu_tanh : unary_elementwise
  cost elementwise(8)
  grad reads x
  grad cost elementwise(10)
  grad doc gelu_tanh's derivative times dy, from its input x.
  doc x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): the tanh form (nn.GELU(approximate="tanh")).

op tanh : unary_elementwise
  cost elementwise(4)
  grad reads y
  grad cost elementwise(3)
  onnx Tanh 6..
  doc tanh(x).
  grad doc dy * (1 - y^2), from tanh's output y.

op softsign : unary_elementwise
  cost elementwise(3)
  grad reads x
  grad cost elementwise(4)
  onnx Softsign 1..
  doc x / (1 + |x|) (nn.Softsign).
  grad doc dy / (1 + |x|)^2, from softsign's input x.

op hardswish : unary_elementwise
  cost elementwise(4)
  grad reads x
  grad cost elementwise(4)
  onnx HardSwish 14..
  doc x * min(max(x + 3, 0), 6) / 6 (nn.Hardswish, MobileNetV3's activation).
  grad doc dy * (x / 3 + 1/2) for x in [-3, 3] (and NaN x), dy above, 0 below (PyTorch's
  grad doc hardswish_backward), from hardswish's input x.

op hardsigmoid : unary_elementwise
  cost elementwise(3)
  grad reads x
  grad cost elementwise(2)
  doc min(max(x + 3, 0), 6) / 6 (nn.Hardsigmoid; ONNX's HardSigmoid with alpha 1/6 and beta
  doc 1/2, which the importer and exporter map by hand as the op has attributes).
  grad doc dy / 6 where x is strictly inside (-3, 3), else 0 (PyTorch's
  grad doc hardsigmoid_backward), from hardsigmoid's input x.

op relu6 : unary_elementwise
  cost elementwise
  grad reads x
  grad cost elementwise
  doc min(max(x, 0), 6) (nn.ReLU6, MobileNetV2's activation; ONNX's Clip with min 0 and max
  doc 6, mapped by hand as Clip's bounds are inputs).
  grad doc dy where 0 < x < 6, else 0 (NaN x too: PyTorch's hardtanh_backward), from
  grad doc relu6's input x.

op silu : unary_elementwise
  cost elementwise(5)
  grad reads x
  grad cost elementwise(7)
  doc x * sigmoid(x) (nn.SiLU, EfficientNet's Swish; ONNX has no op: the importer reads
  doc PyTorch's Sigmoid and Mul of one input as it).
  grad doc dy * s * (1 + x * (1 - s)), s = sigmoid(x), from silu's input x (PyTorch's
  grad doc silu_backward).

op softplus : unary_elementwise
  cost elementwise(4)
  grad reads x
  grad cost elementwise(4)
  onnx Softplus 1..
  doc log(1 + exp(x)), and x itself above 20 (nn.Softplus's threshold, where the two agree
  doc in f32).
  grad doc dy * z / (z + 1), z = exp(x), and dy above 20, from softplus's input x.

op exp : unary_elementwise
  cost elementwise(4)
  grad reads y
  grad cost elementwise
  onnx Exp 6..
  doc exp(x).
  grad doc dy * y, from exp's output y.

op log : unary_elementwise
  cost elementwise(4)
  grad reads x
  grad cost elementwise
  onnx Log 6..
  doc The natural logarithm (NaN below 0, -inf at 0).
  grad doc dy / x, from log's input x.

op sqrt : unary_elementwise
  cost elementwise(2)
  grad reads y
  grad cost elementwise(2)
  onnx Sqrt 6..
  doc The square root (NaN below -0).
  grad doc dy / (2 y), from sqrt's output y.

op reciprocal : unary_elementwise
  cost elementwise
  grad reads y
  grad cost elementwise(2)
  onnx Reciprocal 6..
  doc 1 / x.
  grad doc -dy * y^2, from reciprocal's output y.

op erf : unary_elementwise
  cost elementwise(8)
  grad reads x
  grad cost elementwise(4)
  onnx Erf 9..
  doc The error function.
  grad doc 2/sqrt(pi) exp(-x^2) dy, from erf's input x.

op abs : unary_elementwise
  cost elementwise
  grad reads x
  grad cost elementwise
  onnx Abs 6..
  doc |x|.
  grad doc dy * sign(x) (0 at 0 and at NaN, as PyTorch's sgn), from abs's input x.

op sign : unary_elementwise
  cost elementwise
  grad reads x
  grad cost elementwise
  onnx Sign 9..
  doc -1, 0 or 1 by the sign of x; 0 for -0 and for NaN (PyTorch's torch.sign).
  grad doc 0 (a step), from sign's input x.

op floor : unary_elementwise
  cost elementwise
  grad reads x
  grad cost elementwise
  onnx Floor 6..
  doc The largest integer not above x.
  grad doc 0 (a step), from floor's input x.

op ceil : unary_elementwise
  cost elementwise
  grad reads x
  grad cost elementwise
  onnx Ceil 6..
  doc The smallest integer not below x.
  grad doc 0 (a step), from ceil's input x.

op clip
  operands x: float
  results y: float
  attr min: float
  attr max: float
  cost elementwise(2)
  doc min(max(x, min), max) (torch.clamp with both bounds; ONNX's Clip with bounds known at
  doc import): NaN stays NaN; min above max gives max everywhere, as both do.

op dropout
  operands x: float, step: i32
  results y: float
  attr p: float in [0, 1)
  attr mask_id: int in [0, 4294967296)
  attr sample_offset: int = 0 >= 0
  traits sample_indexed
  cost elementwise(27)
  doc Inverted dropout (nn.Dropout in training): y = x / (1 - p) where kept, else x * 0
  doc (PyTorch's x * noise: NaN for a NaN or inf x). Whether
  doc element e of row r is kept is a pure function of (the run's seed, step, mask_id,
  doc sample_offset + r, e): Philox4x32-10 (backend/dropout_mask.h), so every split of the
  doc batch over devices draws the rows one device would. step is the i32[1] variable @step
  doc (role fed: the update's index in the run, written by the runtime); mask_id tells the
  doc model's dropouts apart. Its gradient is dropout of dy with the same counters. x f32
  doc or bf16 (y alike); the builder leaves it out of the eval graph (identity).

op max_pool2d
  operands x: float
  results y: float
  attr kernel: hw >= 1
  attr stride: hw >= 1
  attr pad: hw >= 0
  attr ceil_mode: bool = false
  cost elementwise
  doc Max pooling (padding never wins). With ceil_mode the output extent rounds up, as in
  doc PyTorch: a last, partial window is kept where it starts inside the image or its
  doc leading padding.

op avg_pool2d
  operands x: float
  results y: float
  attr kernel: hw >= 1
  attr stride: hw >= 1
  attr pad: hw >= 0
  attr ceil_mode: bool = false
  attr relu: bool = false
  cost elementwise
  doc Average pooling (padding counts as zeros): each window's sum over the part of it
  doc inside the padded image, divided by that part's size (kernel h*w but for the partial
  doc windows ceil_mode adds, as in PyTorch). With relu=true it pools relu(x) (written by
  doc fuse-relu-pool in place of relu -> avg_pool2d: one pass, and relu's output is not kept).

op global_avg_pool
  operands x: float
  results y: float
  cost elementwise
  doc Mean over H and W: [N,C,H,W] -> [N,C,1,1].

op cast
  operands x: float|i64
  results y: float|i32
  attr dtype: CastType
  cost elementwise
  doc Converts x to another dtype (to bf16: rounded to nearest, ties to even). Written by
  doc mixed-precision; its gradient is the cast back. i64 casts to i32 only, and only i64
  doc does: a model's i64 input (NumPy's int64 ids and labels) is cast at the graph's start
  doc for the ops that take indices; the runtime has checked that its values fit in i32
  doc as the batch was handed over, so the cast never wraps (no gradient: integers).

op flatten
  operands x
  results y
  traits view
  cost elementwise
  doc [N, ...] -> [N, product of the rest].

op linear
  operands x: float, w: float, b?: float
  results y: float
  traits low_precision
  cost gemm(w, y)
  doc x[N,I] * w[O,I]^T (+ b[O]) -> [N,O] in x's dtype (w and b may be f32 under bf16 x).

op matmul
  operands a: float, b: float
  results c: float
  attr trans_a: bool = false
  attr trans_b: bool = false
  traits low_precision
  cost contraction(a, c)
  doc Batched matrix product c[..., M, N] = op(a)[..., M, K] * op(b)[..., K, N], op(x) = x^T (its last two axes) when trans_x. The leading (batch) axes of a and b agree, or one operand is a plain matrix shared by the whole batch (a weight). bf16 when either operand is (an f32 one beside it is a master weight, converted as it is read).

op reshape
  operands x
  results y
  attr shape: ints
  traits view
  cost elementwise(0)
  doc The same elements, row-major, in another shape of the same element count; one size
  doc may be -1, inferred (as in PyTorch: write the batch axis so, and replicate's slices
  doc reshape alike).

op transpose
  operands x
  results y
  attr perm: ints
  cost elementwise(0)
  doc Permutes the axes: y.shape[i] = x.shape[perm[i]] (PyTorch's permute).

op scale
  operands x: float
  results y: float
  attr factor: float
  cost elementwise
  doc factor * x (attention's 1/sqrt(d)), in x's dtype (computed in float, a bf16 result
  doc rounded once). Its gradient is scale by the same factor.

op add
  operands a, b
  results y
  traits fusible
  cost elementwise
  doc Elementwise sum of two tensors of one type.

# Broadcasting is an op of its own rather than a wider `add`: add is fusible, and
# fuse-conv-bn-relu's residual join, the CPU nChw16c and CUDA NHWC layout rules and their
# kernels all take its operands to have the result's shape; a broadcast operand reaching
# any of them would be read past its end. Same-shape add keeps its rules and kernels as
# they were.
op add_bcast
  operands a: float, b: float
  results y: float
  cost elementwise
  doc a + b under numpy's broadcasting rules: shapes are aligned from the last axis, and an
  doc axis that is 1 (or missing) in one operand repeats along the other's (a learned
  doc position embedding [1,T,D] added to [N,T,D]). bf16 when either operand is (an f32
  doc one beside it is a master weight, read as it is). The gradient of a broadcast operand
  doc sums over the axes it was repeated along. Same-shape sums of one type are `add`.

op mul_bcast
  operands a: float, b: float
  results y: float
  cost elementwise
  doc a * b under numpy's broadcasting rules (as add_bcast; same shapes included).

# Comparisons, selection and remainders of values computed at run time (ONNX's Equal,
# Less, Not, Where, Mod of activations; values known at import the importer computes
# itself). Booleans are held as the numbers 1 and 0 in a float tensor (Tandem computes in
# float): exact, and a mask that multiplies or selects needs no cast.
op compare
  operands a: float, b: float
  results y: float
  attr kind: Comparison
  cost elementwise
  doc 1 where `a KIND b` holds and 0 where it does not (eq, ne, lt, le, gt, ge), under
  doc numpy's broadcasting (as add_bcast), in f32 (bf16 when either operand is): a NaN is
  doc unequal to everything, itself too (ne holds, the others not), as in IEEE and
  doc PyTorch. No gradient flows through a comparison.

op where
  operands cond: float, a: float, b: float
  results y: float
  cost elementwise
  doc a where cond is nonzero (a NaN too), else b, the three under numpy's broadcasting
  doc (torch.where, ONNX's Where). The gradient goes to a where cond holds and to b where
  doc not, each summed over the axes it was repeated along; cond gets none.

op mod
  operands a: float, b: float
  results y: float
  attr fmod: bool = false
  cost elementwise(2)
  doc The remainder of a / b under numpy's broadcasting: with the sign of b (fmod=false:
  doc Python's %, torch.remainder, ONNX's Mod) or of a (fmod=true: C's fmod, torch.fmod),
  doc computed in f32 as fmod(a, b) then, for the first, plus b when the signs differ; b = 0
  doc gives NaN. Its gradient is dy for a and -dy * (a / b rounded down, or toward zero
  doc with fmod) for b, as PyTorch's.

op mod_backward
  operands dy: float, a: float, b: float
  results db: float
  attr fmod: bool = false
  traits backward
  cost elementwise(3)
  doc -dy * q, q the quotient a / b rounded down (or toward zero with fmod), under
  doc numpy's broadcasting of the three: mod's gradient for b before it is summed over the
  doc axes b was repeated along.

op reduce_sum
  operands x: float
  results y: float
  attr axis: int
  attr keepdim: bool = false
  cost reduction(x)
  doc Sum over `axis` (negative counts from the end), accumulated in f32 and stored in x's
  doc dtype. keepdim=false (PyTorch's default) drops the axis; keepdim=true keeps it with
  doc size 1, so that the result broadcasts back against x.

op reduce_mean
  operands x: float
  results y: float
  attr axis: int
  attr keepdim: bool = false
  cost reduction(x)
  doc Mean over `axis`, as reduce_sum. Over the batch axis of a replicated step it is each
  doc device's mean of its share, as unsynchronized batch norm's statistics are.

op concat_axis
  operands xs...: float
  results y: float
  attr axis: int
  cost elementwise(0)
  doc Joins tensors of one rank along `axis` within one device (torch.cat; the collective
  doc `concat` joins devices' slices). On every other axis they agree, or a size 1
  doc repeats (numpy broadcasting: a class token [1,1,D] prepended to patch tokens
  doc [N,T,D] gives [N,T+1,D]). bf16 when any operand is (f32 ones are master weights).

op slice_axis
  operands x: float
  results y: float
  attr axis: int
  attr start: int >= 0
  attr end: int >= 1
  cost elementwise(0)
  doc x[start:end] along `axis` (end exclusive, start < end <= the axis' size; the
  doc class token taken back out for the head).

op pad
  operands x: float
  results y: float
  attr pads: ints
  attr mode: PadMode
  attr value: float = 0
  cost elementwise(0)
  doc x with pads[a] elements before and pads[rank + a] after it along each axis a (ONNX's
  doc order; every pad >= 0): `value` there (constant), the mirror image of x without its
  doc edge (reflect: each pad below the axis' extent), or the edge repeated (edge; PyTorch's
  doc replicate).

op embedding
  operands ids: i32, table: f32
  results y: f32
  cost elementwise(0)
  doc The rows of `table` f32[V,D] that the i32 ids (any shape) pick: y f32[ids..., D]
  doc (nn.Embedding). An id outside [0, V) is an error naming the node: the runtime checks
  doc a graph input's ids as each batch is handed over (as labels), the CPU kernel every
  doc id it reads, and the CUDA kernel writes NaN rows rather than read past the table.
  doc f32 under mixed precision too, as PyTorch's autocast leaves embedding in the table's
  doc dtype: the first low-precision reader casts it down.

op attention
  operands q: f32, k: f32, v: f32, step?: i32
  results y: f32, lse: f32
  attr heads: int >= 1
  attr scale: float > 0
  attr causal: bool = false
  attr p: float = 0 in [0, 1)
  attr mask_id: int = 0 in [0, 4294967296)
  attr sample_offset: int = 0 >= 0
  traits sample_indexed full_precision
  cost attention(q, k)
  doc Fused scaled-dot-product attention (F.scaled_dot_product_attention), per batch row n
  doc and head h: y = softmax(scale q k^T [+ causal mask]) v, with q [N, Tq, H*d], k [N,
  doc Tk, H*d], v [N, Tk, H*dv] and y [N, Tq, H*dv] (head h reads columns h*d .. h*d+d-1:
  doc heads as strides, no transposes); causal: query i sees keys 0..i. lse f32[N, H, Tq]
  doc is each row's log-sum-exp, from which the backward recomputes the probabilities
  doc (memory linear in the sequence length, FlashAttention's scheme). With p > 0 the
  doc probabilities pass through dropout whose mask is a pure function of (the run's seed,
  doc step, mask_id, sample_offset + n, (h*Tq + i)*Tk + j), as dropout's, so every split of
  doc the batch draws the same masks; step (@step) is there exactly when p > 0. f32 only:
  doc under mixed precision q, k and v are cast up (the kernels' arithmetic is f32).

op kv_write
  operands cache: f32, x: f32, position: i32
  results y: f32
  traits stateful
  cost elementwise(0)
  doc A decoder's key or value cache, one token on (generation with a KV cache): writes x
  doc [N, 1, W] into row position[0] of the variable `cache` [N, T, W] reads, in place, and
  doc returns the cache so written (what attention_cached reads, so that it runs after the
  doc write). position i32[N] holds the same position for every row; outside [0, T) is an
  doc error of the kernel naming the node.

op attention_cached
  operands q: f32, k: f32, v: f32, position: i32
  results y: f32
  attr heads: int >= 1
  attr scale: float > 0
  cost attention(q, k)
  doc attention of one new token over a cache: q [N, 1, H*d] at position p = position[0]
  doc sees the keys and values 0..p of k [N, T, H*d] and v [N, T, H*dv] (kv_write's results),
  doc so the cost of a token grows with its position only in this product. Inference only
  doc (no gradient, no dropout).

op softmax_cross_entropy
  operands logits: f32, labels: i32, weight?: f32, total?: f32
  results loss: f32
  attr reduction: Reduction
  attr divisor: int >= 1
  attr label_smoothing: float = 0 in [0, 1)
  attr axis: int = 1 >= 1
  attr ignore_index: int = -100
  attr weighted: bool = false
  present weight when=weighted
  traits loss full_precision
  cost elementwise
  doc Cross entropy of softmax(logits) over the class `axis` (1: [N, C]; a sequence's [B,
  doc T, V] takes 2) against integer labels of the logits' shape less that axis; mean
  doc divides the sum by `divisor` (the global batch, so that per-device losses add up
  doc exactly), or by `total` when given (target_weight_sum's global sum of the counted
  doc targets' weights; divisor 1). Targets whose label is negative (padding of a last
  doc partial batch) or `ignore_index` count for nothing. With label_smoothing eps the
  doc target is (1 - eps) onehot + eps / classes (nn.CrossEntropyLoss(label_smoothing=eps)):
  doc a target's loss is (1 - eps) nll + eps mean over the classes of -log softmax. With
  doc weighted=true the class weights `weight` f32[classes] scale it as
  doc nn.CrossEntropyLoss(weight=...) does: (1 - eps) w[y] nll + eps / classes sum_c w[c]
  doc (-log softmax_c).

op target_weight_sum
  operands labels: i32, weight?: f32
  results total: f32
  attr ignore_index: int = -100
  traits device_sum full_precision
  cost reduction(labels)
  doc The sum over the counted targets (label >= 0 and not ignore_index) of weight[label],
  doc or their number without weights: f32[]. Summed over the devices before it is read
  doc (device_sum), it is what softmax_cross_entropy's `total` divides by, so that a mean
  doc with a data-dependent count is the global batch's on any split.

class pointwise_loss: a loss over same-shaped f32 x and target summed over the elements (reduction=sum) or divided by `divisor`, the global element count (mean: the per-device losses add up to the global mean); the target gets no gradient
  operands x: f32, target: f32
  results loss: f32
  attr reduction: Reduction
  attr divisor: int >= 1
  traits loss full_precision
  cost reduction(x)

op mse_loss : pointwise_loss
  doc (x - target)^2 per element (nn.MSELoss).

op l1_loss : pointwise_loss
  doc |x - target| per element (nn.L1Loss).

op smooth_l1_loss : pointwise_loss
  attr beta: float = 1 >= 0
  doc 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta, d = x - target
  doc (nn.SmoothL1Loss(beta); beta = 0 is the L1 loss).

op bce_with_logits : pointwise_loss
  operands x: f32, target: f32, pos_weight?: f32
  doc Binary cross-entropy of sigmoid(x) against target in [0, 1], in the stable form
  doc (1 - t) x + (1 + (p - 1) t) (log(1 + exp(-|x|)) + max(-x, 0)), p = pos_weight
  doc (nn.BCEWithLogitsLoss; pos_weight, 1 when absent, broadcasts over x's leading axes:
  doc its shape is x's trailing ones).

op accuracy
  operands logits: f32, labels: i32
  results correct: i32
  traits full_precision
  cost elementwise
  doc Number of rows whose arg-max equals the label (i32 scalar); negative labels never match.

# --- backward ops (emitted by autodiff from the gradient rules) -------------------------
op clip_backward
  operands dy: float, x: float
  results dx: float
  attr min: float
  attr max: float
  traits backward
  cost elementwise
  doc dy where min <= x <= max, else 0 (a NaN x too: PyTorch's clamp_backward).

op pad_backward
  operands dy: float, x: float
  results dx: float
  attr pads: ints
  attr mode: PadMode
  attr value: float = 0
  traits backward
  cost elementwise
  doc Gradient of pad: each element of x gets dy of every output that reads it, added in
  doc the outputs' order (x gives the shape).

op conv2d_backward_data
  operands dy: float, w: float, x: float
  results dx: float
  attr stride: hw >= 1
  attr pad: hw >= 0
  attr groups: int = 1 >= 1
  traits backward
  cost gemm(w, dy)
  doc Gradient of conv2d with respect to its input (x gives the shape).

op conv2d_backward_filter
  operands dy: float, x: float, w: float
  results dw: float, db?: float
  attr stride: hw >= 1
  attr pad: hw >= 0
  attr groups: int = 1 >= 1
  attr bias: bool
  traits backward
  cost gemm(w, dy)
  doc Gradient of conv2d with respect to its filter (and bias when bias=true).

op batch_norm_backward
  operands dy: float, x: float, gamma: f32, save_mean: f32, save_invstd: f32
  results dx: float, dgamma: f32, dbeta: f32
  attr eps: float > 0
  traits backward
  cost elementwise
  doc Gradients of training-mode batch_norm: dx, dgamma, dbeta.

op layer_norm_backward
  operands dy: float, x: float, mean: f32, var: f32, gamma: f32
  results dx: float, dgamma: f32, dbeta: f32
  attr eps: float > 0
  traits backward
  cost elementwise(10)
  doc Gradients of layer_norm from its saved statistics: dx, and dgamma, dbeta summed over
  doc the rows (f32).

op softmax_backward
  operands dy: float, y: float
  results dx: float
  attr axis: int
  traits backward
  cost elementwise(4)
  doc y (dy - sum(dy y)) over `axis`, from softmax's output y.

op log_softmax_backward
  operands dy: float, y: float
  results dx: float
  attr axis: int
  traits backward
  cost elementwise(4)
  doc dy - exp(y) sum(dy) over `axis`, from log_softmax's output y.

op reduce_sum_backward
  operands dy: float, x: float
  results dx: float
  attr axis: int
  attr keepdim: bool = false
  traits backward
  cost elementwise
  doc dy repeated along reduce_sum's `axis` of x (x gives the shape, so that each device's
  doc share of the batch gets its own).

op reduce_mean_backward
  operands dy: float, x: float
  results dx: float
  attr axis: int
  attr keepdim: bool = false
  traits backward
  cost elementwise
  doc dy / (the axis' size) repeated along reduce_mean's `axis` of x.

op slice_axis_backward
  operands dy: float, x: float
  results dx: float
  attr axis: int
  attr start: int >= 0
  traits backward
  cost elementwise(0)
  doc Zeros of x's shape with dy written at [start, start + dy's size) along `axis`.

op max_pool2d_backward
  operands dy: float, x: float
  results dx: float
  attr kernel: hw >= 1
  attr stride: hw >= 1
  attr pad: hw >= 0
  attr ceil_mode: bool = false
  traits backward
  cost elementwise
  doc Routes dy to the arg-max of each window.

op avg_pool2d_backward
  operands dy: float, x: float
  results dx: float
  attr kernel: hw >= 1
  attr stride: hw >= 1
  attr pad: hw >= 0
  attr ceil_mode: bool = false
  attr relu: bool = false
  traits backward
  cost elementwise
  doc Spreads dy evenly over each window; with relu=true (avg_pool2d{relu}'s gradient) only
  doc onto the inputs x > 0, as relu_backward would (a NaN input passes its share).

op global_avg_pool_backward
  operands dy: float, x: float
  results dx: float
  traits backward
  cost elementwise
  doc Spreads dy[N,C,1,1] evenly over H and W.

op flatten_backward
  operands dy, x
  results dx
  traits backward view
  cost elementwise
  doc Reshapes dy to x's shape.

op linear_backward_data
  operands dy: float, w: float
  results dx: float
  traits backward
  cost gemm(w, dy)
  doc dy * w -> dx[N,I].

op linear_backward_weight
  operands dy: float, x: float
  results dw: float, db?: float
  attr bias: bool
  traits backward
  cost matmul(dy, x)
  doc dy^T * x -> dw[O,I] (and the bias gradient, the column sums of dy, when bias=true).

op embedding_backward
  operands dy: float, ids: i32
  results dtable: f32
  attr vocab: int >= 1
  traits backward
  cost reduction(dy)
  doc The table's gradient f32[vocab, D]: zeros, then row i of dy (f32 or bf16) added to
  doc row ids[i] for i = 0, 1, ... in order, so every backend, device count and run adds
  doc each element's terms in the same order (a scatter-add with atomics would not).

op attention_backward
  operands dy: f32, q: f32, k: f32, v: f32, y: f32, lse: f32, step?: i32
  results dq: f32, dk: f32, dv: f32
  attr heads: int >= 1
  attr scale: float > 0
  attr causal: bool = false
  attr p: float = 0 in [0, 1)
  attr mask_id: int = 0 in [0, 4294967296)
  attr sample_offset: int = 0 >= 0
  traits backward sample_indexed
  cost attention_backward(q, k)
  doc Gradients of attention (the forward's attributes) from its output y and log-sum-exp:
  doc the probabilities and the dropout mask are recomputed, not stored.

op softmax_cross_entropy_backward
  operands logits: f32, labels: i32, dloss: f32, weight?: f32, total?: f32
  results dlogits: f32
  attr reduction: Reduction
  attr divisor: int >= 1
  attr label_smoothing: float = 0 in [0, 1)
  attr axis: int = 1 >= 1
  attr ignore_index: int = -100
  attr weighted: bool = false
  present weight when=weighted
  traits backward
  cost elementwise
  doc (softmax(logits) - ((1 - eps) onehot(labels) + eps / classes)) * dloss / divisor (or
  doc / total), eps = label_smoothing, along `axis`; with weights the target's terms are
  doc scaled as the loss's; zero for targets that do not count.

class pointwise_loss_backward: the gradient of a pointwise_loss op with respect to x, dloss / divisor (mean) times the per-element derivative
  operands x: f32, target: f32, dloss: f32
  results dx: f32
  attr reduction: Reduction
  attr divisor: int >= 1
  traits backward
  cost elementwise(4)

op mse_loss_backward : pointwise_loss_backward
  doc 2 (x - target) dloss / divisor.

op l1_loss_backward : pointwise_loss_backward
  doc sign(x - target) dloss / divisor (0 where x = target or the difference is NaN, as
  doc PyTorch's).

op smooth_l1_loss_backward : pointwise_loss_backward
  attr beta: float = 1 >= 0
  doc -1 where d <= -beta, 1 where d >= beta, else d / beta (PyTorch's branches: with beta
  doc = 0 a zero d takes -1), times dloss / divisor.

op bce_with_logits_backward : pointwise_loss_backward
  operands x: f32, target: f32, dloss: f32, pos_weight?: f32
  doc ((1 + (p - 1) t) sigmoid(x) - p t) dloss / divisor.

# --- fused conv / batch norm / relu (written by fuse-conv-bn-relu) -----------------------
# Training batch norm in two phases, statistics then normalization, so that sync batch
# norm can all_reduce the statistics (and the backward sums) between them.
op conv2d_stats
  operands x: float, w: float, b?: float
  results y: float, stats: f64
  attr stride: hw >= 1
  attr pad: hw >= 0
  attr groups: int = 1 >= 1
  cost gemm(w, y)
  doc conv2d that also returns its output's per-channel statistics stats: f64[3,C] of the
  doc count, the sum and the sum of squares, which all_reduce adds across devices for sync
  doc batch norm.

op batch_norm_apply
  operands y: float, stats: f64, gamma: f32, beta: f32, running_mean: f32, running_var: f32, residual?: float
  results out: float, save_mean: f32, save_invstd: f32
  attr momentum: float in [0, 1]
  attr eps: float > 0
  attr relu: bool
  traits stateful
  cost elementwise
  doc Training batch norm from given statistics in one pass over y: normalize, scale, shift,
  doc add the residual if given, relu if asked. Returns the output, save_mean and
  doc save_invstd, and updates the running statistics in place.

op batch_norm_backward_reduce
  operands dout: float, y: float, save_mean: f32, save_invstd: f32, out?: float
  results sums: f64, dbeta: f32, dgamma: f32
  traits backward
  cost elementwise
  doc The sums batch norm's backward needs, with dz = dout (where out > 0, when relu's output
  doc is given): sums = f64[2,C] of sum dz and sum dz * (y - mean); and dbeta and dgamma,
  doc the parameters' gradients on this device.

op batch_norm_backward_apply
  operands dout: float, y: float, gamma: f32, save_mean: f32, save_invstd: f32, sums: f64, stats: f64, out?: float
  results dy: float, dresidual?: float
  attr residual: bool
  traits backward
  cost elementwise
  doc dy of batch_norm_apply from sums and statistics (all-reduced under sync batch norm);
  doc with residual=true also dz, the residual's gradient.

op batch_norm_recompute
  operands y: float, stats: f64, gamma: f32, beta: f32
  results out: float
  attr eps: float > 0
  attr relu: bool
  cost elementwise
  doc batch_norm_apply's output computed again from the same y and statistics, bit for bit,
  doc without touching the running statistics: backward reads it (written by
  doc recompute-bn-relu) instead of keeping the forward output alive across the step.

op fold_batch_norm
  operands w: f32, b?: f32, gamma: f32, beta: f32, running_mean: f32, running_var: f32
  results w_folded: f32, b_folded: f32
  attr eps: float > 0
  cost elementwise
  doc Inference batch norm folded into the convolution before it: w' = w * gamma /
  doc sqrt(var + eps) per output channel, b' = (b - mean) * gamma / sqrt(var + eps) + beta.

op conv2d_bias_act
  operands x: float, w: float, b: float, residual?: float
  results y: float
  attr stride: hw >= 1
  attr pad: hw >= 0
  attr groups: int = 1 >= 1
  attr relu: bool
  cost gemm(w, y)
  doc conv2d with bias, then + residual if given, then relu if asked, as one kernel.

op conv2d_relu_avg_pool
  operands x: f32, w: f32, b?: f32
  results y: f32, mask: i32
  attr stride: hw >= 1
  attr pad: hw >= 0
  attr groups: int = 1 >= 1
  cost conv_pool(w, y)
  doc conv2d (+ b), relu, then 2x2 average pooling of stride 2 (no padding, floor), in one
  doc pass over x: the convolution's output is never written (written by
  doc fuse-conv-relu-pool in place of conv2d -> avg_pool2d{relu} where x needs no gradient,
  doc a network's first convolution). mask keeps relu's gradient mask, a row of the
  doc convolution's output an i32 [N, O, H']: bit j of mask[n, o, i] is set where output
  doc (n, o, i, j) is > 0 or NaN (relu_backward passes the gradient there), so the
  doc convolution's rows are at most 32 wide. conv2d_relu_avg_pool_backward_filter reads it.

op conv2d_relu_avg_pool_backward_filter
  operands dy: f32, x: f32, w: f32, mask: i32
  results dw: f32, db?: f32
  attr stride: hw >= 1
  attr pad: hw >= 0
  attr groups: int = 1 >= 1
  attr bias: bool
  traits backward
  cost conv_pool(w, dy)
  doc The gradients of conv2d_relu_avg_pool's filter and bias (when bias=true) from the
  doc pooled output's gradient dy: dy * 0.25 spread over each 2x2 window where mask's bit
  doc is set, and the filter's sums of that with x, a row at a time in registers (the
  doc conv2d_backward_filter of avg_pool2d_backward{relu} without the convolution's output
  doc or its gradient in memory). w gives dw's shape.

# --- optimizer ---------------------------------------------------------------------------
op sgd_update
  operands w: f32, g: float, m?: f32, lr_scale?: f32
  attr lr: float >= 0 preset 0.1
  attr momentum: float in [0, 1) preset 0
  attr weight_decay: float in [0, 1] preset 0
  traits stateful optimizer
  optimizer param=w grad=g grouped=sgd_update_group sharded=sgd_update_shard lr_scale=lr_scale
  state m init=zeros var=momentum when=momentum>0
  cost elementwise
  doc In-place SGD step on the variables that w (and the momentum buffer m) read:
  doc d = g + weight_decay*w; m = momentum*m + d; w -= lr*(momentum > 0 ? m : d). With
  doc lr_scale (an f32[1], the learning-rate schedule's factor fed every step), lr is
  doc lr*lr_scale.

op sgd_update_group
  operands xs...: float
  attr lr: float >= 0 preset 0.1
  attr momentum: float in [0, 1) preset 0
  attr weight_decay: float in [0, 1] preset 0
  traits stateful optimizer
  optimizer grouped_of=sgd_update
  cost elementwise
  doc sgd_update of k parameters of one device as one node (one multi-tensor launch):
  doc operands are k weights, their k gradients and, when momentum > 0, their k momentum
  doc buffers, then the lr_scale of sgd_update if its updates have one. Made by
  doc group-updates.

op adamw_update
  operands w: f32, g: float, m: f32, v: f32, step: f32, lr_scale?: f32
  attr lr: float >= 0 preset 0.001
  attr beta1: float in [0, 1) preset 0.9
  attr beta2: float in [0, 1) preset 0.999
  attr eps: float >= 0 preset 1e-8
  attr weight_decay: float in [0, 1] preset 0.01
  traits stateful optimizer
  optimizer param=w grad=g grouped=adamw_update_group sharded=adamw_update_shard lr_scale=lr_scale
  state m init=zeros var=exp_avg
  state v init=zeros var=exp_avg_sq
  state step init=zeros var=step shape=scalar
  cost elementwise
  doc In-place AdamW step (PyTorch 1.13's torch.optim.AdamW, amsgrad off) on the variables
  doc that w, m, v and step read: step += 1; w *= 1 - lr*weight_decay; m = beta1*m +
  doc (1-beta1)*g; v = beta2*v + (1-beta2)*g*g; w -= lr/(1-beta1^step) * m /
  doc (sqrt(v)/sqrt(1-beta2^step) + eps). step is the parameter's update count, an f32[1]
  doc as PyTorch keeps state['step'], so a checkpoint carries it with the moments. With
  doc lr_scale (an f32[1], the schedule's factor fed every step), lr is lr*lr_scale.

op adamw_update_group
  operands xs...: float
  attr lr: float >= 0 preset 0.001
  attr beta1: float in [0, 1) preset 0.9
  attr beta2: float in [0, 1) preset 0.999
  attr eps: float >= 0 preset 1e-8
  attr weight_decay: float in [0, 1] preset 0.01
  traits stateful optimizer
  optimizer grouped_of=adamw_update
  cost elementwise
  doc adamw_update of k parameters of one device as one node (one multi-tensor launch):
  doc operands are k weights, their k gradients, k first moments m, k second moments v
  doc and k update counts, then the lr_scale of adamw_update if its updates have one.
  doc Each parameter keeps its own count, so grouping changes no number. Made by
  doc group-updates.

op sgd_update_shard
  operands w: f32, g: float, m?: f32, lr_scale?: f32
  results y: f32
  attr lr: float >= 0 preset 0.1
  attr momentum: float in [0, 1) preset 0
  attr weight_decay: float in [0, 1] preset 0
  traits stateful optimizer
  optimizer sharded_of=sgd_update
  cost elementwise
  doc sgd_update over one device's flat shard of a gradient bucket (shard-weight-update):
  doc w is the shard of the bucket's packed weights (a value, not a variable), g its
  doc reduce_scatter shard, m the shard of the packed momentum buffers (a sharded
  doc optimizer variable, stepped in place); y is w after the step, which the all_gather
  doc brings to every device. Element for element sgd_update's arithmetic, so the same bits.

op adamw_update_shard
  operands w: f32, g: float, m: f32, v: f32, step: f32, lr_scale?: f32
  results y: f32
  attr lr: float >= 0 preset 0.001
  attr beta1: float in [0, 1) preset 0.9
  attr beta2: float in [0, 1) preset 0.999
  attr eps: float >= 0 preset 1e-8
  attr weight_decay: float in [0, 1] preset 0.01
  traits stateful optimizer
  optimizer sharded_of=adamw_update
  cost elementwise
  doc adamw_update over one device's flat shard of a gradient bucket (shard-weight-update):
  doc w the shard of the packed weights (a value), g its reduce_scatter shard, m and v the
  doc shards of the packed moments (sharded optimizer variables) and step the bucket's
  doc update count (every parameter of a bucket counts alike), stepped in place; y is w
  doc after the step. Element for element adamw_update's arithmetic, so the same bits.

op clip_grad_norm
  operands gs...: float
  results ys...: float
  attr max_norm: float > 0
  cost elementwise(3)
  doc Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_ (2-norm): with
  doc n the 2-norm of all k gradients together, y_i = g_i * min(1, max_norm / (n + 1e-6)),
  doc each y_i of g_i's type. clip-grad-norm makes one per device after the gradients'
  doc all_reduce, so that every device clips by the same factor.

# --- collectives (the only ops whose operands and results span devices) ----------------
op split
  operands x
  results xs...
  attr axis: int
  attr sizes: ints
  attr devices: devices
  traits collective runtime
  collective kind=scatter reads=host writes=per_device call=copy_from_host
  cost none
  doc Cuts a host tensor along `axis` into one slice per device.

op concat
  operands xs...
  results y
  attr axis: int
  attr devices: devices
  traits collective runtime
  collective kind=gather reads=module_devices writes=first_device call=copy_to_peer
  cost none
  doc Joins one slice per device along `axis` onto the single device listed.

op broadcast
  operands xs...
  results ys...
  attr devices: devices
  attr groups: int = 1
  traits collective runtime
  collective kind=broadcast reads=group_source writes=per_device call=broadcast
  cost none
  doc Copies k tensors from a source device to every listed device. With groups=G the
  doc devices split into G consecutive groups, each with its own source: operands are
  doc grouped by group (k each, on a device of that group), results by device.

op all_reduce
  operands xs...
  results ys...
  attr op: ReduceOp
  attr bucket: int >= 0
  attr devices: devices
  attr groups: int = 1
  traits collective runtime
  collective kind=reduce reads=per_device writes=per_device call=all_reduce
  cost none
  doc Reduces k tensors across devices. Operands and results are grouped by device
  doc (k per device, in `devices` order); each device gets the reduced k tensors. With
  doc groups=G the devices split into G consecutive groups that reduce on their own.

op reduce_scatter
  operands xs...
  results ys...
  attr op: ReduceOp
  attr bucket: int >= 0
  attr sizes: ints
  attr devices: devices
  attr groups: int = 1
  traits collective runtime
  collective kind=reduce_scatter reads=per_device writes=per_device call=reduce_scatter
  cost none
  doc Reduces a flat buffer across devices and leaves each device one shard of the result:
  doc one operand per device (in `devices` order), the same 1-D type on every device; the
  doc result of the device of rank r in its group is elements [s_0 + ... + s_(r-1), + s_r)
  doc of the reduction, where `sizes` = [s_0, ...] has one entry >= 1 per rank of a group
  doc (uneven where the buffer does not divide) adding up to the buffer's length. With
  doc groups=G the devices split into G consecutive groups that reduce on their own, each
  doc cut by the same `sizes`. A shard is the same bits as that slice of the all_reduce
  doc (the same order of additions).

op all_gather
  operands xs...
  results ys...
  attr bucket: int >= 0
  attr devices: devices
  attr groups: int = 1
  traits collective runtime
  collective kind=all_gather reads=per_device writes=per_device call=all_gather
  cost none
  doc The inverse of reduce_scatter: every device of a group gets its ranks' 1-D shards
  doc concatenated in rank order. One operand per device (in `devices` order), whose
  doc lengths are the shard sizes (uneven allowed; rank r of every group the same); one
  doc result per device of their sum. With groups=G the devices split into G consecutive
  doc groups that gather on their own.
