// How fast the image-folder source decodes: Fashion-MNIST's first 10,000 training images as
// a PNG folder (written by tests/runtime/write_image_folder.py, PIL writing the files)
// against the same examples from the IDX files (DatasetSource, in memory), on 1 and 2
// threads, as the loader's threads read them (each thread its share, in a shuffled order).
// Issue 42's bar: the loader alone decodes at least 10x the images/s a step consumes.
// Under threads:2, Google Benchmark's items_per_second is each thread's rate: the two
// threads together read twice that (10,000 images / the Time column).
//
//   build/bench/image_folder_bench                  # writes the folder under /tmp first
//   build/bench/image_folder_bench --folder=DIR     # a folder written before (DIR/train)

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "runtime/data/dataset_source.h"
#include "runtime/data/image_folder_source.h"

namespace {

// Stops the benchmark with a message when `ok` is false (no absl logging in Debian 12's
// Abseil).
void require(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "image_folder_bench: %s\n", what.c_str());
  std::exit(1);
}

using tandem::runtime::data::ExampleSource;

constexpr int64_t kImages = 10000;
constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";
std::string g_folder;  // holds train/ and test/

std::vector<int64_t> shuffledOrder(int64_t n) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  return order;
}

void readAll(benchmark::State& state, const ExampleSource& source) {
  static const std::vector<int64_t> order = shuffledOrder(kImages);
  std::vector<float> x(static_cast<size_t>(source.fields()[0].elements()));
  int32_t y = 0;
  std::vector<void*> out = {x.data(), &y};
  int64_t done = 0;
  for (auto _ : state) {
    for (int64_t i = state.thread_index(); i < kImages; i += state.threads()) {
      absl::Status s = source.read(order[static_cast<size_t>(i)], {}, out);
      if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
      benchmark::DoNotOptimize(x.data());
      ++done;
    }
  }
  state.SetItemsProcessed(done);
}

const ExampleSource& idxSource() {
  static const std::unique_ptr<ExampleSource> s = [] {
    auto r = tandem::runtime::data::DatasetSource::openFashionMnist(
        kFashionMnist, tandem::runtime::data::Split::kTrain, kImages);
    require(r.ok(), r.status().ToString());
    return std::unique_ptr<ExampleSource>(*std::move(r));
  }();
  return *s;
}

// The folder with no decoded pixels kept (each iteration decodes every image again), its
// files read when an example is (`whole` false) or whole when it opens.
std::unique_ptr<ExampleSource> pngSource(bool whole) {
  auto r = tandem::runtime::data::ImageFolderSource::open(
      g_folder + "/train",
      {.file_cache_bytes = whole ? int64_t{1} << 30 : 0, .decoded_cache_bytes = 0});
  require(r.ok(), r.status().ToString());
  require((*r)->size() == kImages, "the folder does not hold 10,000 images");
  return std::unique_ptr<ExampleSource>(*std::move(r));
}

void BM_IdxSource(benchmark::State& state) { readAll(state, idxSource()); }
// Each read: open, one pread, close, libpng's decode (what a folder of over 128 MB costs).
void BM_PngFolder(benchmark::State& state) {
  static const std::unique_ptr<ExampleSource> s = pngSource(false);
  readAll(state, *s);
}
// Each read: libpng's decode of the bytes read when the folder opened (a small folder's
// first epoch).
void BM_PngFolderReadWhole(benchmark::State& state) {
  static const std::unique_ptr<ExampleSource> s = pngSource(true);
  readAll(state, *s);
}

// Opening the folder: listing it and reading every file's header (range 0), or every
// whole file (range 1).
void BM_OpenPngFolder(benchmark::State& state) {
  for (auto _ : state) {
    auto r = tandem::runtime::data::ImageFolderSource::open(
        g_folder + "/train", {.file_cache_bytes = state.range(0) == 1 ? int64_t{1} << 30 : 0});
    require(r.ok(), r.status().ToString());
  }
  state.SetItemsProcessed(state.iterations() * kImages);
}

BENCHMARK(BM_IdxSource)->Threads(1)->Threads(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PngFolder)->Threads(1)->Threads(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PngFolderReadWhole)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OpenPngFolder)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--folder=", 9) == 0)
      g_folder = argv[i] + 9;
    else
      args.push_back(argv[i]);
  }
  std::string written;
  if (g_folder.empty()) {
    char tmpl[] = "/tmp/tandem_image_bench_XXXXXX";
    require(::mkdtemp(tmpl) != nullptr, "cannot make a folder under /tmp");
    written = g_folder = tmpl;
    const std::string command =
        "/usr/bin/python3 " TANDEM_SOURCE_DIR "/tests/runtime/write_image_folder.py " +
        std::string(kFashionMnist) + " " + g_folder + " " + std::to_string(kImages);
    require(std::system(command.c_str()) == 0, "failed: " + command);
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (!written.empty()) require(std::system(("rm -rf " + written).c_str()) == 0, "rm failed");
  return 0;
}
