#include "frontend/onnx/onnx_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>

#include "absl/algorithm/container.h"
#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "frontend/onnx/window_attributes.h"
#include "ir/file_input.h"
#include "ir/status_macros.h"
#include "onnx/checker.h"
#include "onnx/shape_inference/implementation.h"

namespace tandem::onnx_import {
namespace {

// protobuf refuses messages of 2 GiB or more; a model's weights beyond that are external
// data, files beside the model (loadExternalData), which have no such bound.
constexpr int64_t kMaxModelBytes = (int64_t{1} << 31) - 1;
constexpr int64_t kMaxTensorFileBytes = kMaxModelBytes;
// Shapes past this many elements cannot be a real tensor here (and keep products exact).
constexpr int64_t kMaxElements = int64_t{1} << 40;

/// ONNX's messages span lines (the checker prints the node's proto); ours are one line.
std::string oneLine(absl::string_view s) {
  return absl::StrJoin(absl::StrSplit(s, absl::ByAnyChar("\n\t "), absl::SkipEmpty()), " ");
}

template <typename T>
void readRaw(const std::string& raw, std::vector<T>* out) {
  out->resize(raw.size() / sizeof(T));
  std::memcpy(out->data(), raw.data(), out->size() * sizeof(T));
}

/// Bytes per element of the types decodeTensor reads from raw_data; 0 for the others.
int rawElementBytes(int32_t t) {
  switch (t) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::UINT32:
      return 4;
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::INT64:
      return 8;
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16:
      return 2;
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL:
      return 1;
    default:
      return 0;
  }
}

/// Widens raw little-endian integers of type `t` into `out`.
void readRawInts(int32_t t, const std::string& raw, std::vector<int64_t>* out) {
  auto widen = [&](auto sample) {
    std::vector<decltype(sample)> v;
    readRaw(raw, &v);
    out->assign(v.begin(), v.end());
  };
  switch (t) {
    case onnx::TensorProto::INT64:
      widen(int64_t{});
      break;
    case onnx::TensorProto::INT32:
      widen(int32_t{});
      break;
    case onnx::TensorProto::UINT32:
      widen(uint32_t{});
      break;
    case onnx::TensorProto::INT16:
      widen(int16_t{});
      break;
    case onnx::TensorProto::UINT16:
      widen(uint16_t{});
      break;
    case onnx::TensorProto::INT8:
      widen(int8_t{});
      break;
    default:
      widen(uint8_t{});
      break;  // UINT8, BOOL
  }
}

/// Every value's shape that shape inference (or the file) states in full, and every
/// value's element type it states.
void collectShapes(const onnx::GraphProto& g, std::map<std::string, ir::Shape>* out,
                   std::map<std::string, int32_t>* types = nullptr) {
  auto add = [&](const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type()) return;
    if (types != nullptr && v.type().tensor_type().elem_type() != 0)
      (*types)[v.name()] = v.type().tensor_type().elem_type();
    if (!v.type().tensor_type().has_shape()) return;
    ir::Shape s;
    for (const auto& d : v.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value()) return;
      s.push_back(d.dim_value());
    }
    (*out)[v.name()] = std::move(s);
  };
  for (const auto& v : g.input()) add(v);
  for (const auto& v : g.value_info()) add(v);
  for (const auto& v : g.output()) add(v);
}

/// Reads into raw_data the initializers whose values the model keeps in files beside it
/// (data_location EXTERNAL; the entries `location`, `offset`, `length`), as onnx.load
/// does: `location` relative to the directory of `model_path` and inside it (ONNX's rule:
/// a model names no file elsewhere). Errors name the initializer and the file.
absl::Status loadExternalData(onnx::GraphProto* g, const std::string& model_path,
                              const std::string& what) {
  const size_t slash = model_path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : model_path.substr(0, slash);
  struct OpenFile {
    int fd;
    int64_t size;
  };
  std::map<std::string, OpenFile> open_files;  // torch writes one file a tensor, onnx one for all
  absl::Cleanup close_all = [&] {
    for (const auto& [name, f] : open_files) close(f.fd);
  };
  for (onnx::TensorProto& t : *g->mutable_initializer()) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) continue;
    const std::string tensor = absl::StrCat(what, ": initializer '", t.name(), "'");
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& entry : t.external_data()) {
      if (entry.key() == "location") {
        location = entry.value();
      } else if (entry.key() == "offset" || entry.key() == "length") {
        int64_t v = 0;
        if (!absl::SimpleAtoi(entry.value(), &v) || v < 0)
          return absl::InvalidArgumentError(absl::StrCat(tensor, ": external data ", entry.key(),
                                                         " '", entry.value(),
                                                         "' is not a byte count"));
        (entry.key() == "offset" ? offset : length) = v;
      }
    }
    if (location.empty())
      return absl::InvalidArgumentError(
          absl::StrCat(tensor,
                       ": its data is external (data_location EXTERNAL) but names no "
                       "file (no 'location' entry in external_data)"));
    const std::vector<std::string> parts = absl::StrSplit(location, '/');
    if (location.front() == '/' || absl::c_linear_search(parts, ".."))
      return absl::InvalidArgumentError(absl::StrCat(
          tensor, ": its external data file '", location,
          "' is outside the model's directory (ONNX names it relative to the model, inside)"));
    const std::string file = absl::StrCat(dir, "/", location);
    const ir::InputName name{absl::StrCat(tensor, ": external data file '", file, "'"),
                             "an external data file"};
    auto it = open_files.find(location);
    if (it == open_files.end()) {  // opened and measured once per file
      ASSIGN_OR_RETURN(int fd, ir::openRegularFile(file, name));
      struct stat st {};
      if (fstat(fd, &st) != 0) {
        const int error = errno;
        close(fd);
        return absl::InvalidArgumentError(
            absl::StrCat("cannot read ", name.what, ": ", std::strerror(error)));
      }
      it = open_files.emplace(location, OpenFile{fd, int64_t(st.st_size)}).first;
    }
    const int64_t size = it->second.size;
    if (length < 0) length = std::max<int64_t>(0, size - offset);
    if (offset > size || length > size - offset)
      return absl::InvalidArgumentError(absl::StrCat(name.what, " holds ", size,
                                                     " bytes; the data is ", length,
                                                     " bytes from offset ", offset));
    std::string bytes(size_t(length), '\0');
    for (int64_t done = 0; done < length;) {
      const ssize_t n =
          pread(it->second.fd, bytes.data() + done, size_t(length - done), offset + done);
      if (n <= 0)
        return absl::InvalidArgumentError(absl::StrCat(
            "cannot read ", name.what, ": ", n == 0 ? "it ended early" : std::strerror(errno)));
      done += n;
    }
    t.set_raw_data(std::move(bytes));
    t.clear_external_data();
    t.set_data_location(onnx::TensorProto::DEFAULT);
  }
  return absl::OkStatus();
}
}  // namespace

int64_t OnnxTensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string elemTypeName(int32_t t) {
  if (!onnx::TensorProto::DataType_IsValid(t)) return absl::StrCat("element type ", t);
  std::string name = onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

namespace {

/// Doubles as the floats Tandem computes them in; an error names the first finite value
/// beyond float's range (it would become infinite), which a float run cannot stand for.
absl::Status narrowDoubles(const double* d, size_t n, std::vector<float>* out,
                           const std::string& what) {
  out->resize(n);
  for (size_t i = 0; i < n; ++i) {
    (*out)[i] = static_cast<float>(d[i]);
    if (std::isinf((*out)[i]) && std::isfinite(d[i]))
      return absl::UnimplementedError(
          absl::StrCat(what, ": Tandem does not support its double value ", d[i], " (element ", i,
                       "), beyond float's range: Tandem computes doubles in float"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OnnxTensor> decodeTensor(const onnx::TensorProto& t, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
  };
  OnnxTensor out;
  out.name = t.name();
  out.elem_type = t.data_type();
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return bad(
        "its data is in an external file (data_location EXTERNAL), which Tandem reads for a "
        "model's initializers only");
  int64_t count = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) return bad(absl::StrCat("dims has a negative size ", d));
    if (d > 0 && count > kMaxElements / d)
      return bad(absl::StrCat("dims [", absl::StrJoin(t.dims(), ","), "] is too large"));
    count *= d;
    out.shape.push_back(d);
  }
  const int bytes = rawElementBytes(out.elem_type);
  if (bytes == 0)
    return bad(absl::StrCat("data_type ", elemTypeName(out.elem_type), " is not one Tandem reads"));
  int64_t found = 0;
  if (t.has_raw_data()) {
    if (t.raw_data().size() % size_t(bytes) != 0)
      return bad(absl::StrCat("raw_data holds ", t.raw_data().size(),
                              " bytes, not a whole number of ", elemTypeName(out.elem_type),
                              " elements"));
    found = int64_t(t.raw_data().size()) / bytes;
    if (found == count) {
      if (out.elem_type == onnx::TensorProto::FLOAT) {
        readRaw(t.raw_data(), &out.floats);
      } else if (out.elem_type == onnx::TensorProto::DOUBLE) {
        std::vector<double> d;
        readRaw(t.raw_data(), &d);
        if (absl::Status s = narrowDoubles(d.data(), d.size(), &out.floats, what); !s.ok())
          return s;
      } else {
        readRawInts(out.elem_type, t.raw_data(), &out.ints);
      }
    }
  } else {
    switch (out.elem_type) {
      case onnx::TensorProto::FLOAT:
        out.floats.assign(t.float_data().begin(), t.float_data().end());
        found = t.float_data_size();
        break;
      case onnx::TensorProto::DOUBLE:
        if (absl::Status s = narrowDoubles(t.double_data().data(), size_t(t.double_data_size()),
                                           &out.floats, what);
            !s.ok())
          return s;
        found = t.double_data_size();
        break;
      case onnx::TensorProto::INT64:
        out.ints.assign(t.int64_data().begin(), t.int64_data().end());
        found = t.int64_data_size();
        break;
      case onnx::TensorProto::UINT32:
        out.ints.assign(t.uint64_data().begin(), t.uint64_data().end());
        found = t.uint64_data_size();
        break;
      default:  // int32_data holds the narrower integer types and bool
        out.ints.assign(t.int32_data().begin(), t.int32_data().end());
        found = t.int32_data_size();
        break;
    }
  }
  if (found != count)
    return bad(absl::StrCat("holds ", found, " values for dims [", absl::StrJoin(out.shape, ","),
                            "] (", count, " elements)"));
  return out;
}

onnx::TensorProto encodeTensor(const OnnxTensor& v) {
  onnx::TensorProto t;
  t.set_name(v.name);
  t.set_data_type(v.elem_type);
  for (int64_t d : v.shape) t.add_dims(d);
  switch (v.elem_type) {
    case onnx::TensorProto::FLOAT:
      for (float x : v.floats) t.add_float_data(x);
      break;
    case onnx::TensorProto::DOUBLE:
      for (float x : v.floats) t.add_double_data(x);
      break;
    case onnx::TensorProto::INT64:
      for (int64_t x : v.ints) t.add_int64_data(x);
      break;
    case onnx::TensorProto::UINT32:
      for (int64_t x : v.ints) t.add_uint64_data(uint64_t(x));
      break;
    default:
      for (int64_t x : v.ints) t.add_int32_data(int32_t(x));
      break;
  }
  return t;
}

onnx::TensorProto encodeF32(const std::string& name, const ir::Shape& shape, const float* data) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : shape) {
    t.add_dims(d);
    n *= d;
  }
  t.set_raw_data(std::string(reinterpret_cast<const char*>(data), size_t(n) * sizeof(float)));
  return t;
}

OnnxTensor fromF32(const std::string& name, int32_t elem_type, const ir::Shape& shape,
                   const float* data) {
  OnnxTensor t{.name = name, .elem_type = elem_type, .shape = shape};
  const int64_t n = t.numElements();
  if (t.isFloat()) {
    t.floats.assign(data, data + n);
  } else {
    for (int64_t i = 0; i < n; ++i)
      t.ints.push_back(elem_type == onnx::TensorProto::BOOL ? int64_t(data[i] != 0)
                                                            : std::llround(data[i]));
  }
  return t;
}

absl::StatusOr<OnnxTensor> readTensorFile(const std::string& path) {
  const std::string what = absl::StrCat("tensor file '", path, "'");
  ASSIGN_OR_RETURN(std::string bytes,
                   ir::readInputFile(path, {what, "an ONNX tensor file"}, kMaxTensorFileBytes));
  onnx::TensorProto t;
  if (!t.ParseFromString(bytes))
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": not an ONNX TensorProto (protobuf could not parse it: truncated or corrupt)"));
  return decodeTensor(t, what);
}

absl::StatusOr<std::unique_ptr<OnnxModel>> parseOnnxModel(const std::string& bytes,
                                                          const std::string& path) {
  auto m = std::make_unique<OnnxModel>();
  m->path = path;
  const std::string what = absl::StrCat("ONNX model '", path, "'");
  if (!m->proto.ParseFromString(bytes))
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": not an ONNX ModelProto (protobuf could not parse it: truncated or corrupt)"));
  if (!m->proto.has_graph())
    return absl::InvalidArgumentError(absl::StrCat(what, ": field 'graph' is missing"));
  for (const auto& op : m->proto.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") m->opset = op.version();
  // A model of other domains only (ONNX's training ops) imports no default opset.
  for (const auto& n : m->proto.graph().node())
    if (m->opset == 0 && (n.domain().empty() || n.domain() == "ai.onnx"))
      return absl::InvalidArgumentError(absl::StrCat(
          what,
          ": field 'opset_import' names no version of the default (ai.onnx) domain, which node '",
          n.name().empty() ? n.op_type() : n.name(), "' is of"));
  // Weights in files beside the model (torch.onnx.export writes a model over protobuf's
  // 2 GB so): read in before the checker, which would look for the files elsewhere.
  RETURN_IF_ERROR(loadExternalData(m->proto.mutable_graph(), path, what));
  // ONNX's own checks (every node's op and attributes against its schema, names defined
  // before use, initializer types) and shape inference; both throw, with multi-line text.
  try {
    onnx::checker::check_model(m->proto);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": onnx.checker: ", oneLine(e.what())));
  }
  // What ONNX's shape inference divides by, before it runs (a zero stride kills it).
  RETURN_IF_ERROR(checkWindowAttributes(m->proto.graph(), what));
  try {
    onnx::shape_inference::InferShapes(m->proto);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ONNX shape inference: ", oneLine(e.what())));
  }
  collectShapes(m->proto.graph(), &m->inferred_shapes, &m->inferred_types);
  return m;
}

std::map<std::string, ir::Shape> inferShapesAt(const OnnxModel& model,
                                               const std::map<std::string, ir::Shape>& inputs) {
  // A copy without the float weights' values (a model over 2 GB would be copied whole):
  // inference reads their types and shapes, and the values of integer ones (Reshape's).
  onnx::ModelProto copy;
  *copy.mutable_opset_import() = model.proto.opset_import();
  copy.set_ir_version(model.proto.ir_version());
  *copy.mutable_functions() = model.proto.functions();
  const onnx::GraphProto& source = model.proto.graph();
  onnx::GraphProto* g = copy.mutable_graph();
  *g->mutable_node() = source.node();
  *g->mutable_input() = source.input();
  *g->mutable_output() = source.output();
  *g->mutable_sparse_initializer() = source.sparse_initializer();
  for (const onnx::TensorProto& t : source.initializer()) {
    onnx::TensorProto* c = g->add_initializer();
    if (t.data_type() != onnx::TensorProto::FLOAT && t.data_type() != onnx::TensorProto::DOUBLE) {
      *c = t;
      continue;
    }
    c->set_name(t.name());
    c->set_data_type(t.data_type());
    *c->mutable_dims() = t.dims();
  }
  // What the first inference gave is for the model's own shapes: inferred anew (the
  // copy has no value_info).
  for (auto& out : *g->mutable_output())
    if (out.type().has_tensor_type()) out.mutable_type()->mutable_tensor_type()->clear_shape();
  for (auto& in : *g->mutable_input()) {
    auto given = inputs.find(in.name());
    if (given == inputs.end() || !in.type().has_tensor_type()) continue;
    onnx::TensorShapeProto* shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->clear_dim();
    for (int64_t d : given->second) shape->add_dim()->set_dim_value(d);
  }
  std::map<std::string, ir::Shape> shapes;
  try {
    onnx::shape_inference::InferShapes(copy);
  } catch (const std::exception&) {
    return shapes;
  }
  collectShapes(copy.graph(), &shapes);
  return shapes;
}

absl::StatusOr<std::unique_ptr<OnnxModel>> readOnnxModel(const std::string& path) {
  ASSIGN_OR_RETURN(
      std::string bytes,
      ir::readInputFile(path, {absl::StrCat("ONNX model '", path, "'"), "an ONNX model"},
                        kMaxModelBytes));
  return parseOnnxModel(bytes, path);
}

}  // namespace tandem::onnx_import
