// The resident set of reading a large .npy through NumpySource (issue 42's bar: a 2 GB
// .npy of float32 examples trains with a resident set under 600 MB). Writes the file (or
// reads the one given), reads one epoch of it in a shuffled order on loader threads, as the
// batch loader will, and prints the peak resident set (VmHWM) and the read rate.
//
//   npy_source_rss [FILE.npy [GIB [THREADS]]]   (default /tmp/tandem_rss.npy, 2 GiB, 2)
//
// The file is kept for the next run (delete it by hand). Examples are read with pread, so
// the page cache holds the file and the process only the examples being read
// (runtime/data/mapped_file.h says why not through the mapping).

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/data/batch_loader.h"
#include "runtime/data/numpy_source.h"

namespace {

int64_t statusKib(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::string(key).size()));
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  using tandem::runtime::data::NumpySource;
  const std::string path = argc > 1 ? argv[1] : "/tmp/tandem_rss.npy";
  const double gib = argc > 2 ? std::stod(argv[2]) : 2.0;
  const int threads = argc > 3 ? std::stoi(argv[3]) : 2;
  constexpr int64_t kExample = 3 * 32 * 32;  // CIFAR-sized f32 examples
  const int64_t count = static_cast<int64_t>(gib * double(int64_t{1} << 30)) / (kExample * 4);
  if (std::ifstream(path).good() == false) {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                         std::to_string(count) + ", 3, 32, 32), }";
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::ofstream f(path, std::ios::binary);
    f << "\x93NUMPY\x01" << '\0' << static_cast<char>(header.size() & 0xff)
      << static_cast<char>(header.size() >> 8) << header;
    std::vector<float> example(kExample);
    for (int64_t i = 0; i < count; ++i) {
      example[0] = static_cast<float>(i);
      f.write(reinterpret_cast<const char*>(example.data()), kExample * 4);
    }
    if (!f.good()) {
      std::fprintf(stderr, "npy_source_rss: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  const int64_t before = statusKib("VmRSS:");
  auto source = NumpySource::openNpy({{"x", path}});
  if (!source.ok()) {
    std::fprintf(stderr, "npy_source_rss: %s\n", std::string(source.status().message()).c_str());
    return 1;
  }
  const int64_t n = (*source)->size();
  const std::vector<int64_t> order = tandem::runtime::data::epochPermutation(n, 1, 0);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  std::vector<int64_t> wrong(static_cast<size_t>(threads), 0);
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::vector<float> x(kExample);
      void* out[] = {x.data()};
      for (int64_t p = t; p < n; p += threads) {
        const int64_t i = order[static_cast<size_t>(p)];
        if (!(*source)->read(i, {.position = p}, out).ok() || x[0] != static_cast<float>(i))
          ++wrong[static_cast<size_t>(t)];
      }
    });
  for (std::thread& t : pool) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int64_t bad = 0;
  for (int64_t w : wrong) bad += w;
  std::printf(
      "%s: %lld examples (%.2f GiB), %d threads: %.0f examples/s (%.0f MiB/s); resident before "
      "%lld MiB, peak %lld MiB; %lld wrong\n",
      path.c_str(), static_cast<long long>(n), double(n) * kExample * 4 / double(1 << 30), threads,
      double(n) / seconds, double(n) * kExample * 4 / double(1 << 20) / seconds,
      static_cast<long long>(before / 1024), static_cast<long long>(statusKib("VmHWM:") / 1024),
      static_cast<long long>(bad));
  return bad == 0 ? 0 : 1;
}
