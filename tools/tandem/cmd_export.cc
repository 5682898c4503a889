// `tandem export --checkpoint DIR -o MODEL.onnx`: a trained model as an ONNX inference
// graph. The model is built again with the DSL from the name the checkpoint records (or
// --model), its @eval_step exported (frontend/onnx/export.h) with the checkpoint's values
// of its variables as initializers: what `tandem run MODEL.onnx` and any ONNX runtime
// then compute is the eval step's logits.

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/status_macros.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/onnx_model.h"

#ifdef TANDEM_HAVE_ONNX
#include "frontend/build_module.h"
#include "frontend/onnx/export.h"
#include "frontend/zoo/zoo.h"
#include "runtime/checkpoint.h"
#include "tools/tandem/output_file.h"
#include "tools/tandem/path_claims.h"
#endif

namespace tandem::tools {

#ifndef TANDEM_HAVE_ONNX

absl::Status runExport(const ExportFlags&) {
  return builtWithoutOnnx("export", "ONNX");
}

#else

namespace {

/// The f32 values of every variable `m` holds, from replica 0 of the checkpoint (the
/// first device's: batch-norm statistics of other devices may differ without --sync-bn,
/// and the eval step on device 0 reads these). Errors name the checkpoint file and the
/// variable.
absl::StatusOr<onnx_export::VarValues> checkpointValues(const runtime::Checkpoint& c,
                                                        const ir::Module& m,
                                                        const std::string& path) {
  std::map<std::string, const runtime::CheckpointTensor*> first;
  for (const runtime::CheckpointTensor& t : c.tensors)
    if (t.replica == 0) first[t.name] = &t;
  onnx_export::VarValues values;
  for (const ir::Var& v : m.vars()) {
    if (v.role != ir::VarRole::kParam && v.role != ir::VarRole::kBuffer) continue;
    auto it = first.find(v.name);
    if (it == first.end())
      return absl::InvalidArgumentError(absl::StrCat(
          "--checkpoint: '", path, "' has no variable @", v.name, " of model ", m.name(),
          " (was it written by another model? its run names '", c.model, "')"));
    const runtime::CheckpointTensor& t = *it->second;
    if (t.type != v.type || v.type.dtype != ir::DType::kF32)
      return absl::InvalidArgumentError(absl::StrCat(
          "--checkpoint: '", path, "': variable @", v.name, " is ", ir::toString(t.type),
          " there, but model ", m.name(), " has ", ir::toString(v.type)));
    std::vector<float>& out = values[v.name];
    out.resize(size_t(v.type.numElements()));
    std::memcpy(out.data(), t.bytes.data(), out.size() * sizeof(float));
  }
  return values;
}

}  // namespace

absl::Status runExport(const ExportFlags& f) {
  if (f.checkpoint.empty())
    return absl::InvalidArgumentError(
        "export: --checkpoint DIR is required (train --checkpoint's)");
  if (f.output.empty()) return absl::InvalidArgumentError("export: -o MODEL.onnx is required");
  if (!absl::EndsWith(f.output, ".onnx"))
    return absl::InvalidArgumentError(
        absl::StrCat("-o '", f.output, "': an ONNX model's file ends in .onnx"));
  const std::string path = runtime::checkpointPath(f.checkpoint);
  // The file written, claimed against the one read before anything is (path_claims.h).
  PathClaims claims;
  RETURN_IF_ERROR(claims.claim("--checkpoint", path, PathClaims::Use::kReads));
  RETURN_IF_ERROR(claims.claim("-o", f.output, PathClaims::Use::kWrites));
  absl::StatusOr<runtime::Checkpoint> c = runtime::readCheckpointFile(f.checkpoint);
  if (!c.ok())
    return absl::Status(c.status().code(), absl::StrCat("--checkpoint: ", c.status().message()));

  // The model: the one the checkpoint names, which --model may only repeat for a zoo
  // model (its run knew it); a model not in the zoo (train --onnx) needs --model.
  const absl::StatusOr<ModelSpec> named = zoo::modelOfCheckpoint(c->model, c->settings);
  if (f.model && named.ok() && *f.model != c->model)
    return absl::InvalidArgumentError(absl::StrCat("--model ", *f.model, ": '", path,
                                                   "' was written by a run of model ", c->model));
  if (!f.model && !named.ok())
    return absl::InvalidArgumentError(absl::StrCat(
        "--checkpoint: '", path, "' was written for model '", c->model,
        "', which is not a zoo model (a train --onnx model is exported by its own .onnx file); "
        "name the zoo model with --model"));
  ASSIGN_OR_RETURN(ModelSpec spec, f.model ? zoo::modelOfCheckpoint(*f.model, c->settings) : named);
  // Without --batch the batch is symbolic: the model is built for two batch sizes, and
  // the axes whose sizes differ are the batch's (export.h).
  auto build = [&](int64_t batch) -> absl::StatusOr<std::unique_ptr<ir::Module> > {
    absl::StatusOr<std::unique_ptr<ir::Module> > built =
        buildModule(spec, BuildOptions{.batch = batch});
    if (!built.ok())
      return absl::Status(built.status().code(),
                          absl::StrCat("--model ", spec.name, ": ", built.status().message()));
    return built;
  };
  ASSIGN_OR_RETURN(std::unique_ptr<ir::Module> m, build(f.batch.value_or(2)));
  std::unique_ptr<ir::Module> other;
  if (!f.batch) {
    ASSIGN_OR_RETURN(other, build(3));
  }
  ASSIGN_OR_RETURN(onnx_export::VarValues values, checkpointValues(*c, *m, path));
  onnx_export::ExportReport report;
  absl::StatusOr<onnx::ModelProto> proto =
      onnx_export::exportClassifier(*m, values, &report, other.get());
  if (!proto.ok() && !f.batch)
    return absl::Status(proto.status().code(),
                        absl::StrCat(proto.status().message(), " (the batch was symbolic)"));
  if (!proto.ok()) return proto.status();
  std::string bytes;
  if (!proto->SerializeToString(&bytes))
    return absl::ResourceExhaustedError(absl::StrCat("-o '", f.output, "': model ", spec.name,
                                                     " is too large for one ONNX file (2 GiB)"));
  ASSIGN_OR_RETURN(OutputFile out, OutputFile::openReplacing(f.output, "-o"));
  RETURN_IF_ERROR(out.write(bytes));
  RETURN_IF_ERROR(out.close());
  // What was written, and each batch norm kept unfolded with the reason.
  OutputFile std_out = OutputFile::standardOutput();
  std::string text = absl::StrCat(
      f.output, ": model ", spec.name, " from '", path, "' (",
      c->progress.steps == 0 ? absl::StrCat("after epoch ", c->epoch - 1)
                             : absl::StrCat("epoch ", c->epoch, ", step ", c->progress.steps),
      "), input x [", f.batch ? "" : "N,",
      absl::StrJoin(absl::MakeConstSpan(m->graph(ir::kEvalGraph)->findValue("x")->type().shape)
                        .subspan(f.batch ? 0 : 1),
                    ","),
      "], output logits, ONNX opset ", onnx_export::kExportOpset, ", ", proto->graph().node_size(),
      " nodes, ", proto->graph().initializer_size(), " initializers",
      // A model without batch norm (a transformer) has nothing to say about folding.
      report.folded_batch_norms.empty() && report.kept_batch_norms.empty()
          ? std::string()
          : absl::StrCat("; batch norm folded into ", report.folded_batch_norms.size(),
                         " convolutions, ", report.kept_batch_norms.size(), " kept"),
      "\n");
  for (const std::string& kept : report.kept_batch_norms)
    absl::StrAppend(&text, "  batch norm kept: ", kept, "\n");
  RETURN_IF_ERROR(std_out.write(text));
  return absl::OkStatus();
}

#endif  // TANDEM_HAVE_ONNX

}  // namespace tandem::tools
