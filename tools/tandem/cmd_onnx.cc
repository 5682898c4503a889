// `tandem import` and `tandem run`: ONNX models in, through the importer
// (frontend/onnx/importer.h); inference on ONNX TensorProto files, outputs written the
// way ONNX's test data names them (output_K.pb), so ONNX's own tools can check them.

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/status_macros.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/onnx_model.h"

#ifdef TANDEM_HAVE_ONNX
#include "frontend/onnx/importer.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/target.h"
#include "ir/verifier.h"
#include "runtime/executor.h"
#include "tools/tandem/output_file.h"
#include "tools/tandem/path_claims.h"
#include "train/compile.h"
#endif

namespace tandem::tools {

#ifndef TANDEM_HAVE_ONNX

absl::Status runImport(const ImportFlags&) {
  return builtWithoutOnnx("import");
}
absl::Status runInference(const RunFlags&) {
  return builtWithoutOnnx("run");
}

#else

namespace {

using onnx_import::OnnxTensor;

/// MODEL.weights.onnx beside MODEL.tir: the values of an imported module's variables.
std::string weightsPathFor(const std::string& tir) {
  std::string stem = absl::EndsWith(tir, ".tir") ? tir.substr(0, tir.size() - 4) : tir;
  return stem + ".weights.onnx";
}

/// Writes each file's bytes (path, flag, bytes) and puts them all in place together
/// (OutputFile::closeAll): a failure leaves every path as it was.
absl::Status writeTogether(
    const std::vector<std::tuple<std::string, std::string, std::string> >& files) {
  std::vector<OutputFile> opened;
  for (const auto& [path, flag, bytes] : files) {
    ASSIGN_OR_RETURN(OutputFile out, OutputFile::openReplacing(path, flag));
    opened.push_back(std::move(out));
  }
  for (size_t i = 0; i < files.size(); ++i) RETURN_IF_ERROR(opened[i].write(std::get<2>(files[i])));
  return OutputFile::closeAll(opened);
}

/// The variables' values as an ONNX file of initializers (onnx.load reads it; each
/// initializer named as its variable).
absl::StatusOr<std::string> weightsFile(const std::string& path, const ir::Module& m,
                                        const onnx_import::VarValues& values) {
  onnx::ModelProto proto;
  proto.set_ir_version(onnx::IR_VERSION);
  proto.set_producer_name("tandem");
  proto.add_opset_import()->set_version(17);
  onnx::GraphProto* g = proto.mutable_graph();
  g->set_name(absl::StrCat(m.name(), "_weights"));
  for (const auto& [name, data] : values) {
    const ir::Var* v = m.findVar(name);
    if (v == nullptr) continue;
    *g->add_initializer() = onnx_import::encodeF32(name, v->type.shape, data.data());
  }
  std::string bytes;
  if (!proto.SerializeToString(&bytes))
    return absl::ResourceExhaustedError(
        absl::StrCat("-o: the weights of '", path, "' are too large for one ONNX file"));
  return bytes;
}

/// The weights file `run` reads for a .tir module.
std::string weightsOf(const RunFlags& f) { return f.weights.value_or(weightsPathFor(f.model)); }

/// An imported module's variable values from its weights file.
absl::StatusOr<onnx_import::VarValues> readWeights(const std::string& path, const ir::Module& m) {
  ASSIGN_OR_RETURN(auto model, onnx_import::readOnnxModel(path));
  onnx_import::VarValues values;
  for (const auto& t : model->proto.graph().initializer()) {
    ASSIGN_OR_RETURN(OnnxTensor v,
                     onnx_import::decodeTensor(
                         t, absl::StrCat("weights '", path, "': initializer '", t.name(), "'")));
    const ir::Var* var = m.findVar(t.name());
    if (var == nullptr)
      return absl::InvalidArgumentError(absl::StrCat("weights '", path, "': initializer '",
                                                     t.name(), "' is no variable of module @",
                                                     m.name()));
    if (v.elem_type != onnx::TensorProto::FLOAT || v.shape != var->type.shape)
      return absl::InvalidArgumentError(
          absl::StrCat("weights '", path, "': initializer '", t.name(), "' is ",
                       onnx_import::elemTypeName(v.elem_type), " [", absl::StrJoin(v.shape, ","),
                       "], variable @", t.name(), " is ", ir::toString(var->type)));
    values[t.name()] = std::move(v.floats);
  }
  for (const ir::Var& var : m.vars())
    if (var.role != ir::VarRole::kFed && !values.contains(var.name))
      return absl::InvalidArgumentError(
          absl::StrCat("weights '", path, "' has no value for variable @", var.name));
  return values;
}

struct NamedInput {
  std::string name, path;
  /// The file's tensor, or why it could not be read: said only once the model is known to
  /// be one Tandem runs (a model with a string input is unsupported, not a bad file).
  absl::StatusOr<OnnxTensor> value;
};

absl::StatusOr<std::vector<NamedInput> > readInputs(const std::vector<std::string>& flags) {
  std::vector<NamedInput> out;
  std::set<std::string> seen;
  for (const std::string& f : flags) {
    const size_t eq = f.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == f.size())
      return absl::InvalidArgumentError(
          absl::StrCat("--input '", f, "': expected NAME=FILE.pb (the model's input name)"));
    const std::string name = f.substr(0, eq), path = f.substr(eq + 1);
    if (!seen.insert(name).second)
      return absl::InvalidArgumentError(absl::StrCat("--input: '", name, "' is given twice"));
    out.push_back(NamedInput{name, path, onnx_import::readTensorFile(path)});
  }
  return out;
}

/// OK when every --input names one of `takes` or of `known` (inputs taken as constants at
/// import); else the first that does not, with what the model takes.
absl::Status checkInputNames(const std::vector<NamedInput>& inputs,
                             const std::vector<std::string>& takes,
                             const std::set<std::string>& known, const std::string& model) {
  for (const NamedInput& in : inputs)
    if (std::find(takes.begin(), takes.end(), in.name) == takes.end() && !known.contains(in.name))
      return absl::InvalidArgumentError(absl::StrCat("--input ", in.name, ": model '", model,
                                                     "' has no such input (it takes ",
                                                     absl::StrJoin(takes, ", "), ")"));
  return absl::OkStatus();
}

/// What runs: a module with @init and @infer, the values of its variables, the names its
/// inputs are given by (--input NAME) and their variables, and its outputs' names.
struct Runnable {
  std::unique_ptr<ir::Module> module;
  onnx_import::VarValues values;
  std::vector<std::string> input_names, input_vars, output_names;
  /// Inputs taken as constants when the model was imported (ImportOptions::known_inputs).
  std::set<std::string> known_inputs;
  /// Outputs known at import, by position among all (ImportedModel::known_outputs).
  std::map<size_t, OnnxTensor> known_outputs;
  /// Each output's ONNX element type where the model says it (a .tir module: none, f32).
  std::vector<int32_t> output_types;
};

absl::StatusOr<Runnable> fromOnnx(const RunFlags& f, const std::vector<NamedInput>& inputs) {
  ASSIGN_OR_RETURN(auto model, onnx_import::readOnnxModel(f.model));
  // An --input the model does not have is said first: the import would otherwise blame
  // the input left without a file (its open dimension) instead of the misnamed one.
  std::vector<std::string> names;
  for (const onnx_import::ModelInput& in : onnx_import::modelInputs(*model))
    names.push_back(in.name);
  RETURN_IF_ERROR(checkInputNames(inputs, names, {}, f.model));
  onnx_import::ImportOptions options;
  options.open_dimension_remedy = "give the input (its file's shape sets it)";
  for (const NamedInput& in : inputs) {
    if (!in.value.ok()) continue;
    options.input_shapes[in.name] = in.value->shape;
    // Integer and boolean inputs (shapes, axes, indices) are known now: constants.
    if (!in.value->isFloat()) options.known_inputs[in.name] = *in.value;
  }
  absl::StatusOr<onnx_import::ImportedModel> imported = onnx_import::importModel(*model, options);
  if (!imported.ok() && !absl::IsUnimplemented(imported.status()))
    for (const NamedInput& in : inputs)  // a file that could not be read explains it better
      if (!in.value.ok())
        return absl::Status(in.value.status().code(),
                            absl::StrCat("--input ", in.name, ": ", in.value.status().message()));
  if (!imported.ok()) return imported.status();
  Runnable r{std::move(imported->module),
             std::move(imported->values),
             std::move(imported->inputs),
             {},
             std::move(imported->outputs)};
  for (const std::string& name : r.input_names)
    r.input_vars.push_back(onnx_import::identifierFor(name));
  for (const auto& [name, value] : options.known_inputs) r.known_inputs.insert(name);
  r.known_outputs = std::move(imported->known_outputs);
  r.output_types = std::move(imported->output_types);
  return r;
}

absl::StatusOr<Runnable> fromTir(const RunFlags& f) {
  ASSIGN_OR_RETURN(auto m, ir::parseModuleFile(f.model));
  if (absl::Status s = ir::verifyModule(*m); !s.ok())
    return absl::Status(s.code(), absl::StrCat(f.model, ": verifier: ", s.message()));
  const ir::Graph* infer = m->graph(onnx_import::kInferGraph);
  if (infer == nullptr || m->graph(ir::kInitGraph) == nullptr || m->isReplicated())
    return absl::InvalidArgumentError(
        absl::StrCat(f.model, ": not a module from tandem import (it needs graphs @init and @",
                     onnx_import::kInferGraph, ", not yet compiled)"));
  Runnable r;
  for (const ir::Var& v : m->vars())  // the inputs: fed variables (importer.h)
    if (v.role == ir::VarRole::kFed) r.input_names.push_back(v.name);
  r.input_vars = r.input_names;
  for (const ir::Value* out : infer->outputs()) r.output_names.push_back(out->name());
  ASSIGN_OR_RETURN(r.values, readWeights(weightsOf(f), *m));
  r.module = std::move(m);
  return r;
}

}  // namespace

absl::Status runImport(const ImportFlags& f) {
  if (f.model.empty()) return absl::InvalidArgumentError("import: missing the ONNX model argument");
  if (f.output.empty()) return absl::InvalidArgumentError("import: -o MODEL.tir is required");
  if (!absl::EndsWith(f.output, ".tir"))
    return absl::InvalidArgumentError(absl::StrCat(
        "-o '", f.output, "': the module's file must end in .tir (its weights go beside it)"));
  const std::string weights = weightsPathFor(f.output);
  // The files written, claimed against the one read before anything is (path_claims.h):
  // `import M.weights.onnx -o M.tir` would write the weights over the model.
  PathClaims claims;
  RETURN_IF_ERROR(claims.claim("tandem import", f.model, PathClaims::Use::kReads));
  RETURN_IF_ERROR(claims.claim("-o", f.output, PathClaims::Use::kWrites));
  RETURN_IF_ERROR(claims.claim("-o (the weights beside it)", weights, PathClaims::Use::kWrites));
  ASSIGN_OR_RETURN(auto model, onnx_import::readOnnxModel(f.model));
  onnx_import::ImportOptions options;
  options.open_dimension_remedy = "give --batch N";
  // --batch sets dimension 0 where an input leaves it open, and nothing else: refused
  // where no input does (a flag that does not apply), as is a model open elsewhere.
  bool batch_applies = false;
  std::vector<std::string> shapes;
  for (const onnx_import::ModelInput& in : onnx_import::modelInputs(*model)) {
    shapes.push_back(absl::StrCat(in.name, " [", absl::StrJoin(in.shape, ","), "]"));
    if (in.elem_type != onnx::TensorProto::FLOAT) continue;
    for (size_t d = 1; d < in.shape.size(); ++d)
      if (in.shape[d] < 0)
        return absl::InvalidArgumentError(absl::StrCat(
            "ONNX model '", f.model, "': input '", in.name, "' leaves dimension ", d,
            " open; tandem import sets dimension 0 only (--batch), tandem run takes every "
            "dimension from the input's file"));
    if (in.shape.empty() || in.shape[0] >= 0) continue;
    batch_applies = true;
    if (f.batch) {
      ir::Shape s = in.shape;
      s[0] = *f.batch;
      options.input_shapes[in.name] = s;
    }
  }
  if (f.batch && !batch_applies)
    return absl::InvalidArgumentError(absl::StrCat("--batch: ONNX model '", f.model,
                                                   "' leaves no input's dimension 0 open (",
                                                   absl::StrJoin(shapes, ", "), "); drop --batch"));
  ASSIGN_OR_RETURN(onnx_import::ImportedModel imported, onnx_import::importModel(*model, options));
  if (!imported.known_outputs.empty())
    return absl::UnimplementedError(
        absl::StrCat("ONNX model '", f.model, "': Tandem does not support its output '",
                     imported.known_outputs.begin()->second.name, "' in a .tir module: it is ",
                     onnx_import::elemTypeName(imported.known_outputs.begin()->second.elem_type),
                     " and known at import (tandem run MODEL.onnx writes it)"));
  RETURN_IF_ERROR(ir::verifyModule(*imported.module));
  ASSIGN_OR_RETURN(std::string weight_bytes,
                   weightsFile(weights, *imported.module, imported.values));
  // Both files or neither: a failed import leaves what was there.
  return writeTogether({{f.output, "-o", ir::printModule(*imported.module)},
                        {weights, "-o", std::move(weight_bytes)}});
}

absl::Status runInference(const RunFlags& f) {
  if (f.model.empty()) return absl::InvalidArgumentError("run: missing the model argument");
  if (f.output_dir.empty()) return absl::InvalidArgumentError("run: --output-dir is required");
  absl::StatusOr<std::vector<ir::Device> > devices = ir::parseTargetDevices(f.device);
  if (!devices.ok())
    return absl::Status(devices.status().code(),
                        absl::StrCat("--device: ", devices.status().message()));
  if (devices->size() != 1)
    return absl::InvalidArgumentError(absl::StrCat("--device '", f.device, "': name one device"));
  // A device this build or machine cannot run on is said now, naming the flag (as train's
  // --devices), not when the module loads.
  if (absl::Status here = training::checkDevicesRunHere(*devices); !here.ok())
    return absl::Status(here.code(), absl::StrCat("--device: ", here.message()));
  ASSIGN_OR_RETURN(std::vector<NamedInput> inputs, readInputs(f.inputs));
  const bool tir = absl::EndsWith(f.model, ".tir");
  if (f.weights && !tir)
    return absl::InvalidArgumentError(
        "--weights: only a .tir module takes them (an ONNX model holds its own)");
  ASSIGN_OR_RETURN(Runnable r, tir ? fromTir(f) : fromOnnx(f, inputs));
  // DIR/output_K.pb for each output K, claimed against every file read before anything
  // runs (path_claims.h): an input or the model there would be written over.
  auto outputPath = [&](size_t k) { return absl::StrCat(f.output_dir, "/output_", k, ".pb"); };
  const size_t output_count = r.output_names.size();
  {
    PathClaims claims;
    using Use = PathClaims::Use;
    RETURN_IF_ERROR(claims.claim("tandem run", f.model, Use::kReads));
    if (tir)
      RETURN_IF_ERROR(
          claims.claim(f.weights ? "--weights" : "tandem run", weightsOf(f), Use::kReads));
    for (const NamedInput& in : inputs)
      RETURN_IF_ERROR(claims.claim(absl::StrCat("--input ", in.name), in.path, Use::kReads));
    for (size_t k = 0; k < output_count; ++k)
      RETURN_IF_ERROR(claims.claim("--output-dir", outputPath(k), Use::kWrites));
  }

  // Every input once, by name, as a float tensor of its variable's shape.
  std::vector<const NamedInput*> ordered;
  for (size_t k = 0; k < r.input_names.size(); ++k) {
    const std::string& name = r.input_names[k];
    auto it = std::find_if(inputs.begin(), inputs.end(),
                           [&](const NamedInput& in) { return in.name == name; });
    if (it == inputs.end())
      return absl::InvalidArgumentError(
          absl::StrCat("--input ", name, "=FILE.pb is missing (model '", f.model, "' takes ",
                       absl::StrJoin(r.input_names, ", "), ")"));
    const ir::Var* var = r.module->findVar(r.input_vars[k]);
    if (var == nullptr) return absl::InternalError(absl::StrCat("no variable @", r.input_vars[k]));
    if (!it->value.ok())
      return absl::Status(it->value.status().code(),
                          absl::StrCat("--input ", name, ": ", it->value.status().message()));
    if (!it->value->isFloat())  // float, or double narrowed to it (decodeTensor)
      return absl::InvalidArgumentError(
          absl::StrCat("--input ", name, ": tensor file '", it->path, "' holds ",
                       onnx_import::elemTypeName(it->value->elem_type), " values; the model takes ",
                       ir::toString(var->type)));
    if (it->value->shape != var->type.shape)
      return absl::InvalidArgumentError(absl::StrCat(
          "--input ", name, ": tensor file '", it->path, "' is [",
          absl::StrJoin(it->value->shape, ","), "], the model takes ", ir::toString(var->type)));
    ordered.push_back(&*it);
  }
  RETURN_IF_ERROR(checkInputNames(inputs, r.input_names, r.known_inputs, f.model));
  std::error_code ec;
  std::filesystem::create_directories(f.output_dir, ec);
  if (ec)
    return absl::InvalidArgumentError(
        absl::StrCat("--output-dir '", f.output_dir, "': cannot create it: ", ec.message()));

  // The imported values replace the variables' initial ones after @init runs: their
  // initializers' random draws (kaiming) would be thrown away, and were 42% of a resnet50
  // `tandem run` (perf). Zeros are a memset, and need no broadcast between devices.
  for (const auto& [name, data] : r.values)
    if (r.module->findVar(name) != nullptr)
      RETURN_IF_ERROR(r.module->setInitializer(name, ir::Initializer{}));
  RETURN_IF_ERROR(training::compileInference(*r.module, *devices));
  runtime::ExecutorOptions options;
  options.backend_options.set("threads_per_device", f.threads_per_device);
  ASSIGN_OR_RETURN(auto exec, runtime::Executor::create(std::move(r.module), options));
  RETURN_IF_ERROR(exec->run(ir::kInitGraph, {}).status());
  RETURN_IF_ERROR(writeImportedValues(*exec, r.values));
  for (size_t k = 0; k < ordered.size(); ++k) {
    runtime::HostTensor t(exec->module().findVar(r.input_vars[k])->type);
    std::memcpy(t.buffer.data(), ordered[k]->value->floats.data(), size_t(t.type.bytes()));
    RETURN_IF_ERROR(exec->writeVariable(r.input_vars[k], 0, t));
  }
  ASSIGN_OR_RETURN(std::vector<runtime::HostTensor> outs, exec->run(onnx_import::kInferGraph, {}));
  // The outputs in the model's order: computed ones, and those known at import between them.
  const size_t count = outs.size() + r.known_outputs.size();
  if (count != output_count)
    return absl::InternalError(
        absl::StrCat("model '", f.model, "' gave ", count, " outputs for its ", output_count));
  std::vector<std::tuple<std::string, std::string, std::string> > files;
  for (size_t k = 0, computed = 0; k < count; ++k) {
    auto known = r.known_outputs.find(k);
    onnx::TensorProto t;
    if (known != r.known_outputs.end()) {
      t = onnx_import::encodeTensor(known->second);
    } else {
      const runtime::HostTensor& out = outs[computed++];
      const std::string name = k < r.output_names.size() ? r.output_names[k] : "";
      if (k < r.output_types.size() && r.output_types[k] != onnx::TensorProto::FLOAT &&
          r.output_types[k] != 0) {
        // Computed in f32; written as the double, boolean or integer the model declares.
        t = onnx_import::encodeTensor(
            onnx_import::fromF32(name, r.output_types[k], out.type.shape, out.f32()));
      } else {
        t = onnx_import::encodeF32(name, out.type.shape, out.f32());
      }
    }
    std::string bytes;
    t.SerializeToString(&bytes);
    files.emplace_back(outputPath(k), "--output-dir", std::move(bytes));
  }
  // Every output or none: a failure leaves the directory as it was.
  return writeTogether(files);
}

#endif  // TANDEM_HAVE_ONNX

}  // namespace tandem::tools
