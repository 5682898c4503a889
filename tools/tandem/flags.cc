// The shape of the `tandem` command line: subcommands, flags, their help and the range of
// every number. The one file that includes CLI11 (a heavy header), so the commands compile
// without it.

#include "tools/tandem/flags.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <type_traits>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "frontend/model.h"
#include "frontend/zoo/zoo.h"
#include "ir/f32_value.h"
#include "ir/types.h"
#include "passes/optimizer_options.h"
#include "passes/pipeline.h"
#include "passes/registry.h"
#include "tools/tandem/model_flags.h"

namespace tandem::tools {
namespace {

// ---- numbers ----------------------------------------------------------------------------
// Parsed here rather than by CLI11, which clamps an out-of-range integer to its type's
// limit, wraps "-1" into a huge unsigned seed and takes "nan" as a number, all silently.

template <typename T>
struct Range {
  T min, max;
  bool min_open = false, max_open = false;  // exclusive ends, for reals
  // Set for a real that the step computes with in f32 (an attribute's value): the
  // arithmetic it lands in. The value is then checked as f32 will hold it
  // (ir::f32RoundingProblem), as the optimizer's settings are.
  const char* f32 = nullptr;
  std::string describe() const {
    if constexpr (std::is_integral_v<T>) {
      if (max == std::numeric_limits<T>::max()) return absl::StrCat("must be >= ", min);
      return absl::StrCat("must be from ", min, " to ", max);
    } else {
      std::string lo = absl::StrCat(min_open ? "> " : ">= ", min);
      if (std::isinf(max)) return absl::StrCat("must be ", lo);
      return absl::StrCat("must be ", lo, " and ", max_open ? "< " : "<= ", max);
    }
  }
  bool contains(T v) const {
    return (min_open ? v > min : v >= min) && (max_open ? v < max : v <= max);
  }
};

template <typename T>
Range<T> atLeast(T min) {
  return {min, std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                    : std::numeric_limits<T>::max()};
}

// An optional sign and one or more digits.
bool isWholeNumber(const std::string& text) {
  const size_t digits = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  return text.size() > digits && text.find_first_not_of("0123456789", digits) == std::string::npos;
}

template <typename T>
T parseNumber(const std::string& flag, const std::string& text, const Range<T>& range) {
  T value{};
  bool ok;
  if constexpr (std::is_floating_point_v<T>) {
    ok = absl::SimpleAtod(text, &value) && std::isfinite(value);
  } else {
    ok = absl::SimpleAtoi(text, &value);
  }
  // Digits too many for the type are a number out of range, not "not an integer" (the
  // unsigned message states the range already).
  if (!ok && std::is_integral_v<T> && std::is_signed_v<T> && isWholeNumber(text))
    throw CLI::ValidationError(flag, absl::StrCat(text, " is out of range: ", range.describe()));
  if (!ok)
    throw CLI::ValidationError(
        flag, absl::StrCat("'", text, "' is not ",
                           std::is_floating_point_v<T> ? "a finite number"
                           : std::is_unsigned_v<T>
                               ? absl::StrCat("an integer from 0 to ", range.max)
                               : absl::StrCat("an integer (", range.describe(), ")")));
  if (!range.contains(value))
    throw CLI::ValidationError(flag, absl::StrCat(text, " is out of range: ", range.describe()));
  if constexpr (std::is_floating_point_v<T>) {
    if (range.f32 != nullptr) {
      const std::string problem = ir::f32RoundingProblem(
          value, [&range](double f) { return range.contains(f); }, range.describe(), range.f32);
      if (!problem.empty()) throw CLI::ValidationError(flag, absl::StrCat(text, " ", problem));
    }
  }
  return value;
}

// Adds a number flag whose value lands in `target` (a T, or a std::optional<T> that stays
// empty when the flag is not given).
template <typename Target, typename T>
CLI::Option* addNumber(CLI::App* cmd, const std::string& flag, Target& target, Range<T> range,
                       const std::string& help) {
  CLI::Option* o = cmd->add_option_function<std::string>(
      flag,
      [&target, flag, range](const std::string& text) {
        target = parseNumber<T>(flag, text, range);
      },
      help + " (" + range.describe() + ")");
  o->type_name(std::is_floating_point_v<T> ? "NUMBER" : "INT");
  if constexpr (std::is_same_v<Target, T>) o->default_str(absl::StrCat(target));
  return o;
}

// An optimizer hyper-parameter, attribute `attr` of the optimizer ops that have it: a finite
// number here; its range is the chosen optimizer's, checked by resolveModelFlags against
// ir/ops.td (passes/optimizer_options.h), so that train and opt take the same values.
CLI::Option* addOptimizerNumber(CLI::App* cmd, ModelFlags& f, const std::string& attr,
                                const std::string& help) {
  const std::string flag = "--" + passes::optionName(attr);
  CLI::Option* o = cmd->add_option_function<std::string>(
      flag,
      [&f, flag, attr](const std::string& text) {
        double value = 0;
        if (!absl::SimpleAtod(text, &value) || !std::isfinite(value))
          throw CLI::ValidationError(flag, absl::StrCat("'", text, "' is not a finite number"));
        f.written.hyper[attr] = {value, text};
      },
      absl::StrCat(help, " (", passes::optimizerRangeHelp(attr), ")"));
  o->type_name("NUMBER");
  return o;
}

// ---- flags shared by subcommands --------------------------------------------------------

void addModelFlags(CLI::App* cmd, ModelFlags& f, const std::vector<std::string>& models) {
  // Required, but checked by resolveModelFlags: CLI11 checks required flags before unknown
  // ones, so `tandem dump --modle x` would blame the missing --model, not the misspelling.
  cmd->add_option("--model", f.model, "Model (required): " + absl::StrJoin(models, ", "));
  cmd->add_option("--devices", f.written.devices,
                  absl::StrCat("Devices: a list such as cpu:0,cpu:1, or a count N meaning "
                               "cpu:0..cpu:N-1 (at most ",
                               ir::kMaxDevices, ")"))
      ->capture_default_str();
  addNumber(cmd, "--context", f.context, Range<int64_t>{1, int64_t{1} << 20},
            "--model gpt: tokens per sequence, the text data's window length (default 128)");
  addNumber(cmd, "--gpt-layers", f.gpt_layers, Range<int64_t>{1, 1024},
            "--model gpt: transformer blocks (default 4)");
  addNumber(cmd, "--gpt-heads", f.gpt_heads, Range<int64_t>{1, 1024},
            "--model gpt: attention heads, which divide the width (default 4)");
  addNumber(cmd, "--gpt-width", f.gpt_width, Range<int64_t>{1, int64_t{1} << 20},
            "--model gpt: the embedding width (default 128)");
  addNumber(cmd, "--batch", f.batch, Range<int64_t>{1, kMaxBatch},
            "Global batch size, split across the devices (default: 256; train: halved down "
            "to 32 while an epoch would take fewer than 16 steps; dump: at least one example "
            "per device)");
  cmd->add_option("--optimizer", f.written.optimizer,
                  absl::StrCat("Optimizer: ", passes::optimizerNames(),
                               " (PyTorch's torch.optim.AdamW: decoupled weight decay, bias "
                               "correction; its state is checkpointed; default: the model's, "
                               "sgd for the CNNs, adamw for vit and mlp)"));
  addOptimizerNumber(cmd, f, "lr", "Learning rate (default: the model's for sgd, 0.001 for adamw)");
  addOptimizerNumber(cmd, f, "momentum", "SGD momentum (default: the model's)");
  addOptimizerNumber(cmd, f, "weight_decay",
                     "Weight decay (default: the model's for sgd, 0.01 for adamw, decoupled)");
  addOptimizerNumber(cmd, f, "beta1", "AdamW's first-moment decay (default: 0.9)");
  addOptimizerNumber(cmd, f, "beta2", "AdamW's second-moment decay (default: 0.999)");
  addOptimizerNumber(cmd, f, "eps",
                     "AdamW's epsilon, added outside the square root (default: 1e-08)");
  cmd->add_option("--schedule", f.schedule,
                  "Learning-rate schedule: constant, step:EPOCHS:GAMMA (lr times GAMMA every "
                  "EPOCHS epochs) or cosine (to 0 at the end of --epochs); the factor is fed "
                  "to the step each iteration (default: the model's, constant for the CNNs, "
                  "cosine for vit and mlp)");
  addNumber(cmd, "--warmup", f.warmup, Range<int64_t>{0, int64_t{1} << 40},
            "Steps of linear learning-rate warmup before the schedule (default: the model's, "
            "none for the CNNs, one epoch for vit and mlp)");
  addNumber(cmd, "--clip-grad-norm", f.clip_grad_norm,
            Range<double>{0, 1e9, true, false, "the clipping's arithmetic"},
            "Clip the gradients to this global 2-norm after their all_reduce, as "
            "torch.nn.utils.clip_grad_norm_ (default: no clipping)");
  addNumber(cmd, "--label-smoothing", f.label_smoothing,
            Range<double>{0, 1, false, true, "the loss's arithmetic"},
            "Label smoothing of the training loss, as nn.CrossEntropyLoss(label_smoothing): "
            "the target is (1 - X) on the label plus X spread over the classes (default: the "
            "model's, 0; the test loss stays the plain cross-entropy)");
  cmd->add_option("--init", f.init,
                  "Initializer of conv and linear weights: kaiming or normal:STD (default: the "
                  "model's; the lessons use normal:0.01)");
  addNumber(cmd, "--bucket-mb", f.bucket_mb, Range<double>{0, 1e9, true},
            "Gradient all_reduce bucket cap in MiB");
  addNumber(cmd, "--first-bucket-mb", f.first_bucket_mb, Range<double>{0, 1e9, true},
            "Cap of the first (earliest) gradient bucket in MiB");
  addNumber(cmd, "--allreduce-groups", f.allreduce_groups,
            Range<int64_t>{1, static_cast<int64_t>(ir::kMaxDevices)},
            "Reduce gradients hierarchically over this many groups of consecutive devices: "
            "within each group, across the groups' first devices, back within each group "
            "(1: one flat all_reduce)");
  cmd->add_flag("--shard-updates", f.shard_updates,
                "Shard the weight update across the devices (shard-weight-update pass, as "
                "ZeRO-1/2 and XLA's sharded update): per gradient bucket a reduce_scatter, each "
                "device steps only its shard with its shard of the optimizer state, an "
                "all_gather of the stepped weights; the same numbers, 1/devices of the state");
  cmd->add_flag("--sync-bn", f.sync_bn,
                "Sync batch norm: every device normalizes with the statistics of the whole "
                "global batch (one all_reduce per layer and direction)");
  cmd->add_option("--precision", f.written.precision,
                  "f32, or bf16: mixed precision (the mixed-precision pass): convolutions, "
                  "linear layers and the activations between them in bf16; parameters, "
                  "batch-norm statistics, the loss, the gradient all_reduce and the update in f32")
      ->capture_default_str();
  cmd->add_option("--allreduce-dtype", f.written.allreduce_dtype,
                  "Dtype the gradients are all-reduced in: f32, or bf16 for half the bytes (the "
                  "update reads the bf16 sums)")
      ->capture_default_str();
  cmd->add_flag("--no-fuse", f.no_fuse,
                "Leave conv2d, batch_norm, add, relu and avg_pool2d unfused (no fuse-conv-bn-relu, "
                "fuse-relu-pool or fuse-conv-relu-pool pass)");
  cmd->add_flag("--plain-layout", f.plain_layout,
                "Keep every tensor in plain NCHW between kernels (no assign-layouts pass; by "
                "default a CPU device with AVX-512 keeps activations between convolutions and "
                "fused batch norm in oneDNN's nChw16c, which saves the convolutions' reorders, "
                "and a GPU keeps them NHWC; same numbers)");
  cmd->add_flag("--no-recompute", f.no_recompute,
                "Keep every fused conv -> bn -> relu output from forward to backward instead of "
                "recomputing it in backward (no recompute-bn-relu pass: more memory, one "
                "elementwise pass less per layer)");
  cmd->add_option("--group-updates", f.written.group_updates,
                  "One grouped optimizer update (sgd_update_group, adamw_update_group) per "
                  "device and gradient bucket (group-updates pass): auto (on for CUDA devices, "
                  "where it is one multi-tensor launch instead of one per parameter), on or off")
      ->capture_default_str();
  cmd->add_option("--split", f.written.split,
                  "How the batch splits across the devices: even, weights such as 3,1, or "
                  "(train) auto: re-planned from each device's measured speed")
      ->capture_default_str();
}

void addOutputFlags(CLI::App* cmd, OutputFlags& f) {
  cmd->add_option("--format", f.format,
                  "Output: text (the IR, parses back; the default), dot (Graphviz, one box per "
                  "scope: see --collapse, --focus), summary, "
                  "streams (per device and stream the issue order and the events waited for) "
                  "or memory (each graph's arena per device)");
  cmd->add_option("--graph", f.graph,
                  "Print only this graph (init, train_step, eval_step); dot and streams default "
                  "to train_step");
  cmd->add_option_function<std::string>(
      "-o,--output",
      [&f](const std::string& path) {
        // Given empty, it names no file: refused as every output flag's empty name is,
        // rather than read as "not given" (standard output).
        if (path.empty())
          throw CLI::ValidationError(
              "--output", "the file name is empty (leave out -o to write to standard output)");
        f.output = path;
      },
      "Write to this file instead of standard output");
  cmd->add_flag("--canonical", f.canonical,
                "Omit source locations (the golden-file form of --format text)");
  addNumber(cmd, "--collapse", f.collapse, Range<int>{0, 64},
            "--format dot: one box per name scope of this many components and phase per "
            "device (1: stage2, 2: stage2.block0; default 1), collectives drawn apart; 0 "
            "draws every node (slow to lay out for big models)");
  cmd->add_option("--focus", f.focus,
                  "--format dot: draw this scope (e.g. stage2.block0) node by node, the rest "
                  "collapsed");
  cmd->add_flag("--timing", f.timing, "Print the time of each pass to standard error");
  cmd->add_flag("--no-verify", f.no_verify, "Skip the verifier (on input and between passes)");
}

// ---- subcommands ------------------------------------------------------------------------

void addDump(CLI::App& app, DumpFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "dump", "Build a zoo model, run the default pipeline and print the parallel graph.");
  addModelFlags(cmd, f.model, zoo::modelNames());
  cmd->add_option("--after", f.after,
                  "Stop after this pass of the default pipeline (" +
                      absl::StrJoin(passes::defaultPassNames(), ", ") +
                      "), or 'none' for the model as built");
  addOutputFlags(cmd, f.out);
  cmd->add_flag("--memory", f.memory, "The same as --format memory");
  addNumber(cmd, "--ranks", f.model.ranks, Range<int>{1, static_cast<int>(ir::kMaxDevices)},
            "Processes (mpirun -np) that each drive --devices: the module spans every rank's "
            "devices, printed as cpu:0@1 for rank 1's cpu:0");
}

void addExplore(CLI::App& app, ExploreFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "explore",
      "Write one self-contained HTML page to inspect the parallel step in a browser: the graph "
      "by scope with a lane per device, each node's plan, the memory plan, and with --trace "
      "and --metrics the measured timeline and the learning curves.");
  addModelFlags(cmd, f.model, zoo::modelNames());
  cmd->add_option("--after", f.after,
                  "Stop after this pass of the default pipeline (" +
                      absl::StrJoin(passes::defaultPassNames(), ", ") +
                      "), or 'none' for the model as built");
  addNumber(cmd, "--ranks", f.model.ranks, Range<int>{1, static_cast<int>(ir::kMaxDevices)},
            "Processes (mpirun -np) that each drive --devices, as tandem dump --ranks");
  cmd->add_option("--module", f.module,
                  "Explore the compiled module in this IR file (tandem dump's text, with its "
                  "execution plan) instead of compiling --model")
      ->type_name("FILE.tir");
  cmd->add_option("--graph", f.graph, "The graph to show (init, train_step, eval_step)")
      ->capture_default_str();
  cmd->add_option("--trace", f.trace,
                  "A Chrome trace of this module's training steps (tandem train --trace): the "
                  "measured streams per device, linked to the graph, with the exposed "
                  "communication marked")
      ->type_name("FILE.json");
  cmd->add_option("--metrics", f.metrics,
                  "The per-epoch CSV of a training run (tandem train --metrics): the learning "
                  "curves")
      ->type_name("FILE.csv");
  cmd->add_option("-o,--output", f.output,
                  "The HTML page to write (required; it needs no network when opened)");
}

void addOpt(CLI::App& app, OptFlags& f) {
  std::vector<std::string> names;
  for (const auto& p : passes::registeredPasses())
    names.push_back(
        absl::StrCat(p.name, p.options.empty() ? "" : absl::StrCat("{", p.options, "}")));
  CLI::App* cmd = app.add_subcommand("opt", "Run a pipeline of passes over a textual IR file.");
  cmd->add_option("file", f.file, "IR file to read, required ('-' for standard input)");
  cmd->add_option("--passes", f.passes,
                  "Comma-separated pipeline, e.g. replicate{devices=2},insert-collectives. "
                  "Passes: " +
                      absl::StrJoin(names, "; ") + ". Empty: just parse, verify and print");
  addOutputFlags(cmd, f.out);
  cmd->add_option("--print-after", f.print_after,
                  "Print the IR to standard error after this pass of --passes (repeatable; '*' "
                  "for all)");
}

void addImport(CLI::App& app, ImportFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "import", "Import an ONNX model: its graph as textual IR, its weights beside it.");
  cmd->add_option("model", f.model, "The ONNX model (MODEL.onnx), required");
  cmd->add_option("-o,--output", f.output,
                  "The module's IR file (MODEL.tir); its weights go to MODEL.weights.onnx "
                  "beside it (an ONNX file of initializers), required");
  addNumber(cmd, "--batch", f.batch, Range<int64_t>{1, kMaxBatch},
            "The size of an input's first dimension where the model leaves it open");
}

void addRun(CLI::App& app, RunFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "run", "Run inference of an ONNX model (or an imported .tir module) on ONNX tensor files.");
  cmd->add_option("model", f.model, "MODEL.onnx, or MODEL.tir from tandem import, required");
  cmd->add_option("--input", f.inputs,
                  "NAME=FILE.pb: an ONNX TensorProto file for the model's input NAME (repeat "
                  "for each input)");
  cmd->add_option("--output-dir", f.output_dir,
                  "Where the outputs go, as output_0.pb, output_1.pb, ... in the model's "
                  "output order (created if missing), required");
  cmd->add_option("--device", f.device, "The device to run on (cpu:0, cuda:0)")
      ->capture_default_str();
  cmd->add_option("--weights", f.weights,
                  "A .tir module's weights (default: MODEL.weights.onnx beside it)");
  addNumber(cmd, "--threads-per-device", f.threads_per_device, Range<int>{1, 1024},
            "CPU threads the device's kernels use");
}

void addExport(CLI::App& app, ExportFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "export", "Export a trained checkpoint's model as an ONNX inference graph (opset 17).");
  cmd->add_option("--checkpoint", f.checkpoint,
                  "The directory of train --checkpoint (its DIR/checkpoint), required");
  cmd->add_option("-o,--output", f.output, "The ONNX model to write (MODEL.onnx), required");
  cmd->add_option("--model", f.model,
                  "The zoo model the checkpoint holds (default: the one it names)");
  addNumber(cmd, "--batch", f.batch, Range<int64_t>{1, kMaxBatch},
            "A fixed batch size for the exported graph (default: symbolic, N)");
}

void addGenerate(CLI::App& app, GenerateFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Generate text with a trained language model's checkpoint (--model gpt), printing it as "
      "it is drawn: one token a step over a KV cache.");
  cmd->add_option("--checkpoint", f.checkpoint,
                  "The directory of train --checkpoint (its DIR/checkpoint), required");
  cmd->add_option("--prompt", f.prompt, "The text to go on from (default: a newline)");
  addNumber(cmd, "--tokens", f.tokens, Range<int64_t>{1, int64_t{1} << 30},
            "Tokens (characters) to draw");
  addNumber(cmd, "--temperature", f.temperature, Range<double>{0, 1e6, true},
            "Divides the logits: below 1 surer, above 1 more varied");
  addNumber(cmd, "--top-k", f.top_k, Range<int64_t>{0, int64_t{1} << 30},
            "Draw only from the K most likely tokens (0: all of them)");
  addNumber(cmd, "--seed", f.seed, atLeast<uint64_t>(0),
            "Seed of the draws: the same seed prints the same text");
  cmd->add_option("--device", f.device, "The device to run on (cpu:0, cuda:0)")
      ->capture_default_str();
}

void addPredict(CLI::App& app, PredictFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "predict",
      "Predict with a trained checkpoint's model: its outputs (a classifier's logits) over "
      "data, batched over the devices, into a .npy file.");
  cmd->add_option("--checkpoint", f.checkpoint,
                  "The directory of train --checkpoint (its DIR/checkpoint), required");
  cmd->add_option("--model", f.model,
                  "The zoo model the checkpoint holds (default: the one it names)");
  cmd->add_option("--data", f.data,
                  "The examples: fashion-mnist[:DIR] (its test half), npz:FILE[:FIELD=ARRAY,...], "
                  "npy:FIELD=FILE,..., images:DIR[:size=S] (docs/DATA.md)");
  cmd->add_option("--input", f.inputs,
                  "NAME=FILE.npy: the examples of the model's input NAME ([count, ...]; repeat "
                  "per input), in place of --data");
  addNumber(cmd, "--limit", f.limit, atLeast<int64_t>(1), "Only the first N examples");
  cmd->add_option("-o,--output", f.output,
                  "The .npy file the outputs go to ([count, ...], float32), required");
  cmd->add_option("--devices", f.devices, "Devices to split each batch across (cpu:0,cpu:1)")
      ->capture_default_str();
  addNumber(cmd, "--batch", f.batch, Range<int64_t>{1, kMaxBatch},
            "Examples per step, split across the devices");
  addNumber(cmd, "--threads-per-device", f.threads_per_device, Range<int>{1, 1024},
            "CPU threads each CPU device's kernels use");
}

void addTrain(CLI::App& app, TrainFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a zoo model on Fashion-MNIST or data of your own (--data), data parallel over the "
      "given devices.");
  addModelFlags(cmd, f.model, zoo::modelNames());
  cmd->add_option("--onnx", f.model.onnx,
                  "Train this ONNX model (its graph, and its initializers' values) instead of "
                  "--model");
  cmd->add_option("--input", f.model.onnx_input,
                  "--onnx: the model's input the images go to (default: its only one)");
  cmd->add_option("--logits", f.model.onnx_logits,
                  "--onnx: the model's output the loss is attached to (default: its only one)");
  cmd->add_flag("--reinit", f.model.reinit,
                "--onnx: start from Tandem's initializers (--init) rather than the model's values");
  addNumber(cmd, "--epochs", f.epochs, Range<int>{1, 100000}, "Passes over the training data");
  addNumber(cmd, "--steps", f.steps, Range<int64_t>{1, int64_t{1} << 40},
            "Train for N steps instead of --epochs (token data: tokens:, text:), evaluating "
            "on the validation windows every --eval-every steps");
  addNumber(cmd, "--eval-every", f.eval_every, Range<int64_t>{1, int64_t{1} << 40},
            "With --steps: steps between evaluations, dividing --steps (default 250, or "
            "--steps when fewer); each is a row of the table and a checkpoint");
  addNumber(cmd, "--seed", f.seed, atLeast<uint64_t>(0), "Seed of initialization and shuffling");
  addNumber(cmd, "--limit-train", f.limit_train, atLeast<int64_t>(1),
            "Use only the first N training examples (default: all)");
  addNumber(cmd, "--limit-test", f.limit_test, atLeast<int64_t>(1),
            "Use only the first N test examples (default: all)");
  cmd->add_option(
         "--data", f.data,
         "The training data: fashion-mnist[:DIR] (or just DIR), npz:FILE[:FIELD=ARRAY,...], "
         "npy:FILE or npy:FIELD=FILE,..., images:DIR[:size=HxW][:by-name] (a folder per "
         "class, PNG or JPEG), tokens:FILE[:u16|:u32][:length=N], "
         "text:FILE[:chars|:bytes][:length=N] (docs/DATA.md)")
      ->capture_default_str();
  cmd->add_option("--test-data", f.test_data,
                  "The data evaluated after every epoch, a spec as --data's (default: "
                  "Fashion-MNIST's test half; other data needs this or --val-fraction)");
  addNumber(cmd, "--val-fraction", f.val_fraction, Range<double>{0, 1, true, true},
            "Evaluate on this fraction of the training data, split off by the seed, and train "
            "on the rest");
  cmd->add_option("--augment", f.augment,
                  "Transforms of the images x, comma-separated: crop:N (random crop after N "
                  "pixels of zero padding), flip (random horizontal flip), "
                  "normalize:MEAN/STD, resize:HxW; the random ones apply to the training "
                  "examples only, each a function of (seed, epoch, example)");
  cmd->add_option_function<std::string>(
         "--image-size",
         [&f](const std::string& text) {
           const std::vector<std::string> hw = absl::StrSplit(text, 'x');
           const Range<int64_t> size{1, 65535};
           if (hw.size() > 2)
             throw CLI::ValidationError("--image-size",
                                        absl::StrCat("'", text, "' is not S or HxW"));
           f.image_height = parseNumber("--image-size", hw[0], size);
           f.image_width = parseNumber("--image-size", hw.back(), size);
         },
         "Resize the images of an images: folder to this, S or HxW (default: they must all "
         "be of one size)")
      ->type_name("HxW");
  cmd->add_option("--metrics", f.metrics,
                  "Also write the per-epoch figures to this CSV file ('-': standard output), a "
                  "row as each epoch ends");
  addNumber(cmd, "--threads-per-device", f.threads_per_device, Range<int>{1, 1024},
            "CPU threads each device's kernels use");
  cmd->add_option_function<std::string>(
         "--conv-algorithm",
         [&f](const std::string& text) {
           if (text == "auto") {
             f.conv_algorithm = backend::ConvAlgorithm::kAuto;
           } else if (text == "direct") {
             f.conv_algorithm = backend::ConvAlgorithm::kDirect;
           } else if (text == "measure") {
             f.conv_algorithm = backend::ConvAlgorithm::kMeasure;
           } else {
             throw CLI::ValidationError(
                 "--conv-algorithm",
                 absl::StrCat("unknown algorithm '", text, "' (expected auto, direct, measure)"));
           }
         },
         "Convolution algorithms: auto (the fastest measured: Winograd for many 3x3 "
         "convolutions on AVX-512, errors up to ~3e-6 of the largest value; on a GPU cuDNN's "
         "heuristic choice), direct (no Winograd) or measure (on a GPU every cuDNN algorithm "
         "timed once per shape, cudnnFind, as torch.backends.cudnn.benchmark; on a CPU as auto)")
      ->type_name("auto|direct|measure")
      ->default_str("auto");
  cmd->add_flag("--no-tf32", f.no_tf32,
                "On GPUs, keep f32 convolutions and matrix products in full f32 (by default "
                "tensor cores may round their inputs to TF32, relative error ~1e-3)");
  cmd->add_option("--module", f.module,
                  "Train the compiled module in this IR file (tandem dump's text, its execution "
                  "plan included, possibly edited or run through tandem opt) instead of "
                  "compiling --model; it must have the devices and batch the flags give")
      ->type_name("FILE.tir");
  cmd->add_flag("--no-cuda-graphs", f.no_cuda_graphs,
                "On GPUs, enqueue every step kernel by kernel (by default each graph's step is "
                "recorded as a CUDA graph after two steps and replayed with one launch)");
  cmd->add_flag("--profile", f.profile,
                "Time every node and print, per op, where the training steps spent their time");
  cmd->add_flag("--allow-nonfinite", f.allow_nonfinite,
                "Keep training when the loss turns NaN or infinite (default: stop, exit 3)");
  cmd->add_option("--plot", f.plot,
                  "Draw train loss, train accuracy and test accuracy per epoch to this .svg or "
                  ".png (with gnuplot), redrawn as each epoch ends");
  cmd->add_option("--trace", f.trace,
                  "Write a timeline of a few training steps to this JSON file (Chrome trace "
                  "format: open it in ui.perfetto.dev or chrome://tracing): per device and "
                  "stream every node with its op, scope, bytes and time, and the waits "
                  "between streams as arrows");
  addNumber(cmd, "--trace-steps", f.trace_steps, atLeast<int64_t>(1),
            "Steps --trace records, after skipping 1 warm-up step (default 3)");
  cmd->add_option("--checkpoint", f.checkpoint,
                  "Write a checkpoint (parameters, optimizer and batch-norm state, data "
                  "position, figures so far) to DIR/checkpoint after every epoch, atomically: "
                  "a run killed at any moment leaves the last complete one")
      ->type_name("DIR");
  addNumber(cmd, "--checkpoint-every", f.checkpoint_every, atLeast<int64_t>(1),
            "Also write the checkpoint every N steps within an epoch");
  addNumber(cmd, "--collective-timeout", f.collective_timeout, Range<double>{0, 86400, true},
            "Under mpirun: seconds a rank waits in one collective before it names the rank "
            "that did not arrive and stops every rank (default 60)");
  cmd->add_option("--resume", f.resume,
                  "Continue the run whose checkpoint is in DIR (same model, batch, seed and "
                  "training settings) so that it ends as if never stopped; checkpoints go on "
                  "being written there unless --checkpoint names another directory")
      ->type_name("DIR");
}

void addPlot(CLI::App& app, PlotFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "plot",
      "Draw the learning curves of tandem train --metrics CSVs as an SVG or PNG: one run, or "
      "several in one picture to compare them.");
  cmd->add_option("metrics", f.metrics,
                  "CSVs written by tandem train --metrics ('-': standard input), or any with "
                  "columns step, train_loss and val_loss; at least one");
  cmd->add_option("--label", f.labels,
                  "The legend's name of each CSV's run, in their order (repeat once a CSV; "
                  "default: the file names when there are several)")
      ->allow_extra_args(false);
  cmd->add_option("-o,--output", f.output, "Picture to write: FILE.svg or FILE.png (required)");
  cmd->add_option("--title", f.title, "Title on the chart (default: the CSV's file name)");
}

void addSimulate(CLI::App& app, SimulateFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Predict the step time, exposed communication and scaling efficiency of a zoo model's "
      "compiled data-parallel step on N GPUs (cost models and an event replay of its streams).");
  addModelFlags(cmd, f.model, zoo::modelNames());
  // Counts of simulated GPUs and a per-device batch replace the device list and global
  // batch; the split and the optimizer's numbers change nothing a simulation sees (the
  // optimizer and momentum stay: they decide the state, which --shard-updates cuts).
  for (const char* name : {"--devices", "--batch", "--split", "--allreduce-groups", "--lr",
                           "--weight-decay", "--beta1", "--beta2", "--eps", "--schedule",
                           "--warmup", "--clip-grad-norm", "--label-smoothing", "--init"})
    cmd->remove_option(cmd->get_option(name));
  cmd->add_option("--devices", f.devices,
                  "Device counts to predict, comma separated, each from 1 to 65536 (default: "
                  "1,8,64,512,1024; --gpu cpu: 1,2)");
  // The global batch is compiled for up to 64 devices (--gpu cpu).
  addNumber(cmd, "--batch-per-device", f.batch_per_device, Range<int64_t>{1, kMaxBatch / 64},
            "Examples per device per step (weak scaling: the global batch grows with the "
            "devices)");
  cmd->add_option("--gpu", f.gpu,
                  "Device to model: a100, h100, h200, p100, v100 (roofline of the datasheet's "
                  "peak FLOP/s and memory bandwidth), or cpu: per-node times measured on this "
                  "machine's CPU backend")
      ->capture_default_str();
  cmd->add_option("--link", f.link,
                  "Links within a node and between nodes: nvlink, pcie, ib, ib-hdr or roce-25g "
                  "(one name: both; default nvlink,ib)");
  addNumber(cmd, "--gpus-per-node", f.gpus_per_node, Range<int64_t>{1, 1024},
            "Devices that share the intra-node link");
  // Bounded: a figure beyond 1000 s is a typo, and prints numbers of hundreds of digits.
  addNumber(cmd, "--step-ms", f.step_ms, Range<double>{0, 1e6, true},
            "Scale the compute costs so that one device's step computes this many ms (a "
            "published single-GPU step time)");
  cmd->add_option("--sweep", f.sweep,
                  "Try values of a setting and print the best per device count: "
                  "bucket-mb=1,5,25,100 or first-bucket-mb=...");
  addNumber(cmd, "--measure-steps", f.measure_steps, Range<int>{1, 1000},
            "--gpu cpu: steps timed after 2 warm-up steps (medians are used; default 10)");
}

// How often `flag` (--lr, or --lr=X) is on the command line.
// How often the option `flag` names was given, by any of its names in subcommand argv[1]
// (-o for --output).
int givenCount(const CLI::App& app, int argc, char** argv, const std::string& flag) {
  std::vector<std::string> names{flag};
  const CLI::App& const_app = app;
  for (const CLI::App* sub : const_app.get_subcommands(std::function<bool(const CLI::App*)>()))
    if (argc > 1 && sub->get_name() == argv[1])
      if (const CLI::Option* o = sub->get_option_no_throw(flag); o != nullptr)
        for (const std::string& s : o->get_snames()) names.push_back("-" + s);
  int n = 0;
  for (int i = 1; i < argc; ++i)
    for (const std::string& name : names)
      if (argv[i] == name || absl::StartsWith(argv[i], name + "=")) ++n;
  return n;
}

// Levenshtein distance, for "did you mean": a few dozen flags of a few letters each, so
// the plain quadratic table (CLI11 has no suggestion of its own).
size_t editDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The long names (--model) of a subcommand's flags.
std::vector<std::string> flagNames(const CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd.get_options())
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
  return names;
}

// The line for arguments CLI11 did not expect ("The following arguments were not
// expected: --modle x"): the first flag among them, with the nearest flag of the
// subcommand when one is close, or the subcommand that has it.
std::string unexpectedArguments(const CLI::App& app, const std::string& what, int argc,
                                char** argv) {
  const CLI::App* cmd = nullptr;
  for (const CLI::App* sub : app.get_subcommands())
    if (sub->parsed()) cmd = sub;
  std::string extra;
  for (int i = 1; i < argc && extra.empty(); ++i) {
    const std::string arg = argv[i];
    if (absl::StrContains(what, arg) && arg.rfind("-", 0) == 0 && arg != "-") extra = arg;
  }
  if (cmd == nullptr || extra.empty()) return what;
  const std::string name = absl::StrCat("tandem ", cmd->get_name());
  const std::string flag = extra.substr(0, extra.find('='));
  std::string best;
  size_t best_distance = std::max<size_t>(2, flag.size() / 3) + 1;
  for (const std::string& candidate : flagNames(*cmd))
    if (const size_t d = editDistance(flag, candidate); d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  if (!best.empty())
    return absl::StrCat(flag, ": not a flag of ", name, "; did you mean ", best, "?");
  for (const CLI::App* other : app.get_subcommands(std::function<bool(const CLI::App*)>()))
    if (other != cmd) {
      const std::vector<std::string> names = flagNames(*other);
      if (std::find(names.begin(), names.end(), flag) != names.end())
        return absl::StrCat(flag, ": not a flag of ", name, " (tandem ", other->get_name(),
                            " takes it; see ", name, " --help)");
    }
  return absl::StrCat(flag, ": not a flag of ", name, " (see ", name, " --help)");
}

}  // namespace

ParseOutcome parseCommandLine(int argc, char** argv) {
  ParseOutcome result;
  auto line = std::make_unique<CommandLine>();
  CLI::App app{"Tandem: compile a network into a data-parallel training step and inspect it."};
  app.require_subcommand(0, 1);
  app.add_flag("--version", line->version, "Print the version and what this build supports");
  addDump(app, line->dump);
  addExplore(app, line->explore);
  addOpt(app, line->opt);
  addTrain(app, line->train);
  addPlot(app, line->plot);
  addSimulate(app, line->simulate);
  addImport(app, line->import);
  addRun(app, line->run);
  addExport(app, line->export_model);
  addGenerate(app, line->generate);
  addPredict(app, line->predict);
  app.add_subcommand("devices", "List the devices this build can run on, with threads and memory");

  std::vector<std::string> subs;
  bool known = false;
  const CLI::App& const_app = app;  // the const overload lists every subcommand
  for (const CLI::App* sub : const_app.get_subcommands(std::function<bool(const CLI::App*)>())) {
    subs.push_back(sub->get_name());
    known = known || (argc > 1 && sub->get_name() == argv[1]);
  }
  // CLI11 would call a misspelt subcommand an unexpected argument; name it plainly.
  if (argc > 1 && argv[1][0] != '-' && !known) {
    result.exit_code = kExitUsage;
    result.error =
        absl::StrCat("unknown subcommand '", argv[1], "' (expected ", listWithOr(subs), ")");
    return result;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    result.exit_code = app.exit(e);
    return result;
  } catch (const CLI::CallForAllHelp& e) {
    result.exit_code = app.exit(e);
    return result;
  } catch (const CLI::ArgumentMismatch& e) {
    // CLI11 says "--model: 1 required TEXT missing" for a flag given without its value,
    // and "--lr: At Most 1 required but received 2" for one given twice.
    std::string what = e.what();
    result.exit_code = kExitUsage;
    const std::string flag = what.substr(0, what.find(':'));
    if (what.rfind("--", 0) != 0 || what.find(':') == std::string::npos)
      result.error = what;
    else if (absl::StrContains(what, "At Most"))
      result.error = absl::StrCat(flag, ": given ", givenCount(app, argc, argv, flag),
                                  " times; give it once (no value silently wins)");
    else
      result.error = absl::StrCat(flag, ": needs a value");
    return result;
  } catch (const CLI::ExtrasError& e) {
    result.exit_code = kExitUsage;
    result.error = unexpectedArguments(app, e.what(), argc, argv);
    return result;
  } catch (const CLI::ParseError& e) {
    result.exit_code = kExitUsage;
    result.error = e.what();
    return result;
  }
  if (!app.get_subcommands().empty()) {
    line->subcommand = app.get_subcommands().front()->get_name();
  } else if (!line->version) {
    result.exit_code = kExitUsage;
    result.error =
        absl::StrCat("missing subcommand (", listWithOr(subs), "); see tandem --help");
    return result;
  }
  result.line = std::move(line);
  return result;
}

}  // namespace tandem::tools
