#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "backend/conv_algorithm.h"
#include "ir/ir.h"
#include "train/model_settings.h"
#include "train/settings_text.h"

// The subcommands of `tandem`: their flags as plain structs (filled by flags.cc, the one
// file that knows CLI11) and what each runs.

namespace tandem::tools {

/// The whole command line: parses argv, runs the subcommand, prints an error as one line,
/// and returns the exit code (main.cc's main is this call).
int runCommandLine(int argc, char** argv);

/// Exit codes besides 0 (README's table, main.cc): a run stopped by a signal exits 128 +
/// the signal, like a shell's report of a killed program; a rank that stops every rank
/// of a multi-process run exits backend::kExitCollectiveTimeout (4).
constexpr int kExitUsage = 2;      // bad input: a flag, a model, a device, a file
constexpr int kExitNonFinite = 3;  // the loss turned NaN or infinite
/// The machine refused what the run needs (memory, a thread), or an unexpected failure.
constexpr int kExitResources = 5;

/// How a command prints its module; shared by dump and opt.
struct OutputFlags {
  std::optional<std::string> format;  // unset: text
  std::string graph;
  std::string output;
  bool canonical = false;
  bool timing = false;
  bool no_verify = false;
  /// --format dot only: scope components per box (unset: 1; 0 draws every node), and a
  /// scope drawn node by node (ir/dot_views.h).
  std::optional<int> collapse;
  std::optional<std::string> focus;
};

/// What to compile: the model, where it runs and the training settings written into the
/// step. dump and train share them, so both compile the same module from the same flags;
/// the settings are the training library's (train/model_settings.h), which the public API
/// fills too, so that both compile and check alike.
struct ModelFlags : training::ModelSettings {
  std::string model;
  /// The flags of settings the library types (devices, the optimizer and its values, the
  /// split, the dtypes), as written: modelSettingsOfFlags (model_flags.h) parses them into
  /// the settings, naming the flag; until then those fields hold their defaults.
  training::WrittenSettings written;
  /// train --onnx MODEL.onnx in place of --model: the model's graph and weights; --input
  /// names the input the images go to, --logits the output the loss is attached to (unset:
  /// the only one); --reinit starts from Tandem's initializers instead of the model's values.
  std::optional<std::string> onnx, onnx_input, onnx_logits;
  bool reinit = false;
  /// --model gpt's size (zoo::GptShape; unset: its defaults): --context (also the text
  /// data's window), --gpt-layers, --gpt-heads, --gpt-width.
  std::optional<int64_t> context, gpt_layers, gpt_heads, gpt_width;
};

/// Flags of `tandem dump`.
struct DumpFlags {
  ModelFlags model;
  std::string after;
  bool memory = false;  // --memory: the same as --format memory
  OutputFlags out;
};

/// Flags of `tandem explore` (cmd_explore.cc): dump's model, device, pass and plan flags,
/// or a compiled --module file; a training run's --trace and --metrics; the page to write.
struct ExploreFlags {
  ModelFlags model;
  std::string after;
  std::optional<std::string> module, trace, metrics;
  std::string graph = "train_step";
  std::string output;
};

/// Flags of `tandem opt`.
struct OptFlags {
  std::string file;
  std::string passes;
  std::vector<std::string> print_after;
  OutputFlags out;
};

/// Flags of `tandem train`.
struct TrainFlags {
  ModelFlags model;
  int epochs = 10;
  /// --steps N [--eval-every K]: train by steps on token data (TrainConfig::steps).
  std::optional<int64_t> steps, eval_every;
  uint64_t seed = 0;
  std::optional<int64_t> limit_train, limit_test;
  /// --data SPEC (runtime/data/open_source.h; a directory: Fashion-MNIST's files in it),
  /// --test-data SPEC or --val-fraction F, --augment LIST, --image-size HxW.
  std::string data = "fashion-mnist:/usr/share/datasets/fashion-mnist";
  std::optional<std::string> test_data;
  std::optional<double> val_fraction;
  std::string augment;
  int64_t image_height = 0, image_width = 0;
  std::optional<std::string> metrics;
  int threads_per_device = 1;
  backend::ConvAlgorithm conv_algorithm = backend::ConvAlgorithm::kAuto;
  bool no_tf32 = false;
  bool no_cuda_graphs = false;
  bool profile = false;
  bool allow_nonfinite = false;
  /// --plot: an .svg or .png of the learning curves, redrawn after every epoch.
  std::optional<std::string> plot;
  /// --trace: a Chrome trace (Perfetto) of --trace-steps steps after the warm-up step.
  std::optional<std::string> trace;
  std::optional<int64_t> trace_steps;  // unset: TraceFile::kDefaultSteps
  /// --checkpoint: the directory a checkpoint is written to after every epoch (and every
  /// --checkpoint-every steps); --resume: the one a run continues from (and writes to,
  /// unless --checkpoint names another).
  std::optional<std::string> checkpoint, resume;
  std::optional<int64_t> checkpoint_every;
  /// --collective-timeout: seconds a rank of a multi-process run waits in one collective
  /// before it says where and stops every rank (a rank that died or stalls); unset: 60.
  std::optional<double> collective_timeout;
  /// --module: train this compiled module (textual IR with its execution plan) instead of
  /// the one the model flags compile to; it must be that module's kind (module_file.h).
  std::optional<std::string> module;
};

/// Flags of `tandem plot`.
struct PlotFlags {
  std::vector<std::string> metrics;  // CSVs of train --metrics ("-": standard input)
  std::vector<std::string> labels;   // --label, one a CSV, when there are several
  std::string output;                // -o: FILE.svg or FILE.png
  std::optional<std::string> title;
};

/// Flags of `tandem simulate` (cmd_simulate.cc). `model` carries the compile settings
/// (--model, buckets, precision, fusion); its --devices and --batch are not used.
struct SimulateFlags {
  ModelFlags model;
  /// --devices: device counts to predict, such as 8,64,512,1024 (unset: 1,8,64,512,1024;
  /// with --gpu cpu 1,2).
  std::optional<std::string> devices;
  int64_t batch_per_device = 32;
  std::string gpu = "h100";       // a GpuSpec name, or cpu: measured here
  std::optional<std::string> link;  // intra-node[,inter-node]; unset: nvlink,ib
  int64_t gpus_per_node = 8;
  /// --step-ms: scale the compute costs so that one device's step computes this long.
  std::optional<double> step_ms;
  /// --sweep: "bucket-mb=1,5,25,100": the best bucket cap per device count.
  std::optional<std::string> sweep;
  std::optional<int> measure_steps;  // --gpu cpu: steps measured after the warm-up (10)
};

/// Flags of `tandem import` (cmd_onnx.cc).
struct ImportFlags {
  std::string model;   // MODEL.onnx
  std::string output;  // -o MODEL.tir; its weights go to MODEL.weights.onnx beside it
  /// --batch: the size of an input dimension 0 the model leaves open.
  std::optional<int64_t> batch;
};

/// Flags of `tandem run` (cmd_onnx.cc).
struct RunFlags {
  std::string model;                // MODEL.onnx or MODEL.tir
  std::vector<std::string> inputs;  // --input NAME=FILE.pb, repeated
  std::string output_dir;           // DIR/output_K.pb
  std::string device = "cpu:0";
  /// --weights: a .tir module's values (unset: MODEL.weights.onnx beside it).
  std::optional<std::string> weights;
  int threads_per_device = 1;  // --threads-per-device
};

/// Flags of `tandem export` (cmd_export.cc).
struct ExportFlags {
  std::string checkpoint;  // --checkpoint DIR: a run's DIR/checkpoint
  std::string output;      // -o MODEL.onnx
  /// --model: the zoo model the checkpoint holds (unset: the one it names).
  std::optional<std::string> model;
  /// --batch: the exported graph's batch size (unset: symbolic, N).
  std::optional<int64_t> batch;
};

/// Flags of `tandem generate` (cmd_generate.cc): nanoGPT's sample.py's, and its defaults.
struct GenerateFlags {
  std::string checkpoint;     // --checkpoint DIR: a language model's run's DIR/checkpoint
  std::string prompt = "\n";  // --prompt TEXT: what the text starts from
  int64_t tokens = 500;       // --tokens N: how many to draw
  double temperature = 0.8;
  int64_t top_k = 200;  // 0: every token
  uint64_t seed = 1337;
  std::string device = "cpu:0";
};

/// Flags of `tandem predict` (cmd_predict.cc).
struct PredictFlags {
  std::string checkpoint;  // --checkpoint DIR: a run's DIR/checkpoint
  /// --model: the zoo model the checkpoint holds (unset: the one it names).
  std::optional<std::string> model;
  /// --data SPEC (runtime/data/open_source.h; fashion-mnist reads its test half), or
  /// --input NAME=FILE.npy per input of the prediction.
  std::optional<std::string> data;
  std::vector<std::string> inputs;
  std::optional<int64_t> limit;  // --limit: only the first N examples
  std::string output;            // --output FILE.npy
  std::string devices = "cpu:0";
  int64_t batch = 256;
  int threads_per_device = 1;
};

absl::Status runDump(const DumpFlags& flags);
/// `tandem explore`: the step as one self-contained HTML page (graph, plan, memory, trace).
absl::Status runExplore(const ExploreFlags& flags);
/// `tandem export`: a checkpoint's model as an ONNX inference graph.
absl::Status runExport(const ExportFlags& flags);
/// `tandem generate`: text from a language model's checkpoint, printed as it is drawn.
absl::Status runGenerate(const GenerateFlags& flags);
/// `tandem predict`: a checkpoint's model's outputs over data, as a .npy file.
absl::Status runPredict(const PredictFlags& flags);
/// `tandem import`: an ONNX model as a module in textual IR, and its weights.
absl::Status runImport(const ImportFlags& flags);
/// `tandem run`: inference of an ONNX model or an imported module on ONNX tensor files.
absl::Status runInference(const RunFlags& flags);
/// `tandem simulate`: predicted step time, exposed communication and scaling efficiency.
absl::Status runSimulate(const SimulateFlags& flags);
absl::Status runOpt(const OptFlags& flags);
/// Trains. Returns the exit code of a run that ended (0; kExitNonFinite when the loss
/// turned non-finite; 128 + signal when stopped by SIGINT or SIGTERM), each after saying
/// so; an error for bad input.
absl::StatusOr<int> runTrain(const TrainFlags& flags);
/// `tandem devices`: what this build can run on.
absl::Status runDevices();
/// `tandem plot`: the learning curves of a --metrics CSV as a picture (plot.h). Returns
/// 0, or 128 + the signal when SIGINT or SIGTERM stopped gnuplot; an error for bad input.
absl::StatusOr<int> runPlot(const PlotFlags& flags);
/// `tandem --version`.
std::string versionText();

/// "a", "a or b", "a, b or c": choices in a message.
inline std::string listWithOr(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  return out;
}

/// Renders a module as `f.format` (text, dot, summary, streams or memory), optionally one
/// graph only, and writes it to `f.output` (stdout when empty). Flags that do not apply to
/// the format are refused rather than ignored.
absl::Status writeModule(const ir::Module& m, const OutputFlags& f);
/// OK when the output flags make sense together; checked before any work. `prints_ir` says
/// whether the command prints IR besides the output (opt's --print-after), which
/// --canonical also shapes.
absl::Status checkOutputFlags(const OutputFlags& f, bool prints_ir = false);

}  // namespace tandem::tools
