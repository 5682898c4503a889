#include "runtime/data/numpy_source.h"

#include <algorithm>
#include <limits>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/data/zip_archive.h"

namespace tandem::runtime::data {

struct NumpySource::Column {
  std::string what;  // for messages: "array 'x'" (an .npz entry), "npy file 'x.npy'"
  std::string name;  // the array's own name: "x", or the .npy file's path
  NpyHeader header;
  const char* data = nullptr;  // the array's first byte (any alignment), mapped or inflated
  int64_t count = 0;
  int64_t example_elements = 0;
  std::shared_ptr<const MappedFile> mapped;     // set when `data` lies in a mapping: examples
                                                // are read from the file with pread
  int64_t file_offset = 0;                      // of `data` in the mapped file
  std::shared_ptr<const std::string> inflated;  // set when `data` was inflated
};

NumpySource::~NumpySource() = default;

namespace {

absl::Status numpyError(const std::string& prefix, const std::string& what,
                        absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(prefix, what.empty() ? "" : what + ": ", message));
}

// The column of an array whose .npy bytes are `bytes` (kept alive by the column).
absl::StatusOr<NumpySource::Column> columnOf(absl::string_view bytes, std::string what,
                                             std::string name, const std::string& prefix) {
  absl::StatusOr<NpyHeader> header = parseNpyHeader(bytes);
  if (!header.ok()) return numpyError(prefix, what, header.status().message());
  if (header->shape.empty())
    return numpyError(prefix, what, "a scalar, not examples along a first axis");
  NumpySource::Column c;
  c.what = std::move(what);
  c.name = std::move(name);
  c.header = *header;
  c.data = bytes.data() + header->data_offset;
  c.count = header->shape[0];
  c.example_elements = 1;
  for (size_t i = 1; i < header->shape.size(); ++i) c.example_elements *= header->shape[i];
  return c;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NumpySource>> NumpySource::openNpz(
    const std::string& path, std::vector<ArrayBinding> bindings, const NumpyOptions& options) {
  const std::string prefix = absl::StrCat("npz file '", path, "': ");
  absl::StatusOr<std::shared_ptr<MappedFile>> file =
      MappedFile::open(path, {absl::StrCat("npz file '", path, "'"), "an .npz file"});
  if (!file.ok()) return file.status();
  const absl::string_view zip((*file)->data(), static_cast<size_t>((*file)->size()));
  absl::StatusOr<std::vector<ZipEntry>> entries = readZipEntries(zip);
  if (!entries.ok()) return numpyError(prefix, "", entries.status().message());
  std::vector<std::string> names;  // the arrays, in the archive's order
  for (const ZipEntry& e : *entries)
    if (absl::EndsWith(e.name, ".npy")) names.push_back(e.name.substr(0, e.name.size() - 4));
  if (names.empty()) return numpyError(prefix, "", "holds no .npy arrays");
  if (bindings.empty()) {
    const bool classifier = std::count(names.begin(), names.end(), "x") == 1 &&
                            std::count(names.begin(), names.end(), "y") == 1;
    if (classifier)
      bindings = {{"x", "x"}, {"y", "y"}};
    else
      for (const std::string& n : names) bindings.push_back({n, n});
  }
  std::unique_ptr<NumpySource> source(new NumpySource());
  source->where_ = absl::StrCat("npz:", path);
  for (const ArrayBinding& b : bindings) {
    const ZipEntry* entry = nullptr;
    for (const ZipEntry& e : *entries)
      if (e.name == b.array + ".npy") entry = &e;
    if (entry == nullptr)
      return numpyError(
          prefix, "",
          absl::StrCat("no array '", b.array, "' (it holds ", absl::StrJoin(names, ", "), ")"));
    const std::string what = absl::StrCat("array '", b.array, "'");
    std::shared_ptr<const std::string> inflated;
    absl::string_view bytes = zip.substr(entry->data_offset, entry->compressed_size);
    if (entry->method == 8) {
      // Deflated (numpy.savez_compressed): no way to map it; inflated into memory once.
      absl::StatusOr<std::string> text = inflateZipEntry(zip, *entry);
      if (!text.ok()) return numpyError(prefix, what, text.status().message());
      inflated = std::make_shared<const std::string>(*std::move(text));
      bytes = *inflated;
    }
    absl::StatusOr<Column> c = columnOf(bytes, what, b.array, prefix);
    if (!c.ok()) return c.status();
    c->inflated = std::move(inflated);
    if (!c->inflated) {
      c->mapped = *file;
      c->file_offset = c->data - (*file)->data();
    }
    source->columns_.push_back(*std::move(c));
    source->fields_.push_back(Field{b.field, source->columns_.back().header.dtype.irType(), {}});
  }
  if (absl::Status s = source->finish(prefix, options); !s.ok()) return s;
  return source;
}

absl::StatusOr<std::unique_ptr<NumpySource>> NumpySource::openNpy(
    std::vector<ArrayBinding> bindings, const NumpyOptions& options) {
  if (bindings.empty()) return absl::InvalidArgumentError("npy: no files");
  std::unique_ptr<NumpySource> source(new NumpySource());
  std::vector<std::string> parts;
  for (const ArrayBinding& b : bindings) {
    const std::string what = absl::StrCat("npy file '", b.array, "'");
    absl::StatusOr<std::shared_ptr<MappedFile>> file =
        MappedFile::open(b.array, {what, "an .npy file"});
    if (!file.ok()) return file.status();
    absl::StatusOr<Column> c =
        columnOf(absl::string_view((*file)->data(), static_cast<size_t>((*file)->size())), what,
                 b.array, "");
    if (!c.ok()) return c.status();
    c->mapped = *file;
    c->file_offset = c->data - (*file)->data();
    source->columns_.push_back(*std::move(c));
    source->fields_.push_back(Field{b.field, source->columns_.back().header.dtype.irType(), {}});
    parts.push_back(absl::StrCat(b.field, "=", b.array));
  }
  source->where_ = absl::StrCat("npy:", absl::StrJoin(parts, ","));
  if (absl::Status s = source->finish("", options); !s.ok()) return s;
  return source;
}

// Shapes, lengths, names and labels, once the columns are there.
absl::Status NumpySource::finish(const std::string& prefix, const NumpyOptions& options) {
  prefix_ = prefix;
  std::set<std::string> names;
  for (size_t f = 0; f < columns_.size(); ++f) {
    const Column& c = columns_[f];
    if (!names.insert(fields_[f].name).second)
      return numpyError(prefix, "", absl::StrCat("two arrays feed field '", fields_[f].name, "'"));
    const Column& first = columns_[0];
    if (c.count != first.count) {
      const bool npz = !prefix.empty();
      return numpyError(
          prefix, "",
          npz ? absl::StrCat("arrays '", first.name, "' and '", c.name,
                             "' disagree in length: ", first.count, " and ", c.count, " examples")
              : absl::StrCat("npy files '", first.name, "' and '", c.name,
                             "' disagree in length: ", first.count, " and ", c.count, " examples"));
    }
    fields_[f].shape.assign(c.header.shape.begin() + 1, c.header.shape.end());
  }
  count_ = columns_[0].count;
  if (count_ == 0) return numpyError(prefix, columns_[0].what, "holds no examples");
  for (size_t f = 0; f < columns_.size(); ++f) {
    const Column& c = columns_[f];
    if (fields_[f].name != "y" || c.header.dtype.kind == 'f' || c.example_elements != 1) continue;
    // Labels of shape [count, 1] (as Keras and scikit-learn often keep them) are one label
    // per example all the same.
    fields_[f].shape.clear();
    // A classifier's labels: one pass over them now, so that a bad one stops the run
    // before it starts, naming its example.
    int64_t largest = -1;
    for (int64_t i = 0; i < count_; ++i) {
      const int64_t v = npyElementAsInt64(c.header.dtype, c.data + i * c.header.dtype.bytes);
      if (v < 0 || v > std::numeric_limits<int32_t>::max() ||
          (options.classes > 0 && v >= options.classes))
        return numpyError(
            prefix, c.what,
            absl::StrCat("label ", v, " of example ", i, " is out of range ",
                         options.classes > 0 ? absl::StrCat("[0, ", options.classes, ")")
                                             : std::string("(class ids are 0 to 2^31-1)")));
      largest = std::max(largest, v);
    }
    if (c.mapped) c.mapped->release();
    class_labels_ = {"y", options.classes > 0 ? options.classes : largest + 1};
  }
  return absl::OkStatus();
}

absl::Status NumpySource::read(int64_t index, const ExampleKey&,
                               absl::Span<void* const> out) const {
  if (index < 0 || index >= count_)
    return absl::OutOfRangeError(
        absl::StrCat(where_, ": example ", index, " is beyond its ", count_, " examples"));
  // The raw bytes of a mapped array's example, when they need converting.
  thread_local std::vector<char> raw;
  for (size_t f = 0; f < columns_.size(); ++f) {
    const Column& c = columns_[f];
    const int64_t bytes = c.example_elements * c.header.dtype.bytes;
    const char* src = c.data + index * bytes;
    if (c.mapped) {
      // f4 and i4 are the IR's own f32 and i32: straight into `out`.
      const bool same = c.header.dtype.bytes == 4 && c.header.dtype.kind != 'u';
      if (!same) raw.resize(static_cast<size_t>(bytes));
      void* dst = same ? out[f] : raw.data();
      if (absl::Status s = c.mapped->readAt(c.file_offset + index * bytes, bytes, dst); !s.ok())
        return numpyError(prefix_, c.what,
                          absl::StrCat("cannot read example ", index, ": ", s.message()));
      if (same) continue;
      src = raw.data();
    }
    const NpyRangeError bad = convertNpyElements(c.header.dtype, src, c.example_elements, out[f]);
    if (bad.element >= 0)
      return numpyError(prefix_, c.what,
                        absl::StrCat("example ", index, ": value ", bad.value, " does not fit ",
                                     ir::dtypeName(fields_[f].dtype), " (element ", bad.element,
                                     " of the example)"));
  }
  return absl::OkStatus();
}

}  // namespace tandem::runtime::data
