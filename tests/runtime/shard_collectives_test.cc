// reduce_scatter and all_gather as the executor runs them: a module written in text,
// planned by the pipeline's last passes, run on CPU devices. Each device's shard is the
// same bits as its slice of an all_reduce of the same buffers, and the all_gather of the
// shards is the all_reduce's result, on 2 and 3 devices with uneven shards, twice (the
// second step reuses every buffer).

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "ir/parser.h"
#include "runtime/executor.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

// `devices` CPU devices, each all-reducing and reduce-scattering its row of x (n wide),
// then gathering the shards; every result is returned.
std::string moduleText(int devices, int64_t n, const std::vector<int64_t>& sizes) {
  std::vector<std::string> list, rows, flat, again, sums, shards, gathered, shard_types;
  for (int d = 0; d < devices; ++d) {
    list.push_back(absl::StrCat("cpu:", d));
    rows.push_back(absl::StrCat("%x.", d));
    flat.push_back(absl::StrCat("%f.", d));
    again.push_back(absl::StrCat("%e.", d));
    sums.push_back(absl::StrCat("%a.", d));
    shards.push_back(absl::StrCat("%s.", d));
    gathered.push_back(absl::StrCat("%g.", d));
    shard_types.push_back(absl::StrCat("f32[", sizes[static_cast<size_t>(d)], "]"));
  }
  const std::string devs = absl::StrCat("[", absl::StrJoin(list, ", "), "]");
  auto repeat = [&](const std::string& type) {
    return absl::StrJoin(std::vector<std::string>(static_cast<size_t>(devices), type), ", ");
  };
  const std::string row = absl::StrCat("f32[1,", n, "]"), whole = absl::StrCat("f32[", n, "]");
  std::string text = absl::StrCat("module @shards devices=", devs, " {\ngraph @step(%x: f32[",
                                  devices, ",", n, "]) {\n");
  absl::StrAppend(&text, "  ", absl::StrJoin(rows, ", "), " = split(%x) {axis=0, sizes=[",
                  repeat("1"), "], devices=", devs, "} : ", repeat(row), "\n");
  for (int d = 0; d < devices; ++d) {
    // Two copies of the row: a value feeds one reduction.
    absl::StrAppend(&text, "  %f.", d, " = reshape(%x.", d, ") {shape=[", n, "]} @cpu:", d, " : ",
                    whole, "\n");
    absl::StrAppend(&text, "  %e.", d, " = reshape(%x.", d, ") {shape=[", n, "]} @cpu:", d, " : ",
                    whole, "\n");
  }
  absl::StrAppend(&text, "  ", absl::StrJoin(sums, ", "), " = all_reduce(",
                  absl::StrJoin(flat, ", "), ") {op=sum, bucket=0, devices=", devs,
                  "} : ", repeat(whole), "\n");
  absl::StrAppend(&text, "  ", absl::StrJoin(shards, ", "), " = reduce_scatter(",
                  absl::StrJoin(again, ", "), ") {op=sum, bucket=1, sizes=[",
                  absl::StrJoin(sizes, ", "), "], devices=", devs,
                  "} : ", absl::StrJoin(shard_types, ", "), "\n");
  absl::StrAppend(&text, "  ", absl::StrJoin(gathered, ", "), " = all_gather(",
                  absl::StrJoin(shards, ", "), ") {bucket=1, devices=", devs, "} : ", repeat(whole),
                  "\n");
  absl::StrAppend(&text, "  return %a.0, ", absl::StrJoin(shards, ", "), ", ",
                  absl::StrJoin(gathered, ", "), "\n}\n}\n");
  return text;
}

TEST(ShardCollectives, ExecutorRunsThemOnCpuDevicesBitForBit) {
  struct Case {
    int devices;
    int64_t n;
    std::vector<int64_t> sizes;
  };
  for (const Case& c :
       {Case{2, 1029, {515, 514}}, Case{3, 1030, {344, 343, 343}}, Case{3, 7, {1, 5, 1}}}) {
    SCOPED_TRACE(absl::StrCat(c.devices, " devices, shards ", absl::StrJoin(c.sizes, ",")));
    const std::string text = moduleText(c.devices, c.n, c.sizes);
    auto m = ir::parseModule(text, "shards.tir");
    ASSERT_TRUE(m.ok()) << m.status() << "\n" << text;
    ASSERT_TRUE(runPipeline(**m, "schedule,assign-streams,plan-events,plan-memory").ok());
    auto ex = runtime::Executor::create(*std::move(m));
    ASSERT_TRUE(ex.ok()) << ex.status();
    std::vector<float> x(static_cast<size_t>(c.devices * c.n));
    for (size_t i = 0; i < x.size(); ++i)  // magnitudes far apart: the order of sums shows
      x[i] = static_cast<float>((i * 7919 % 1000) - 500) * (i % 3 == 0 ? 1e-3f : 1e3f);
    for (int step = 0; step < 2; ++step) {
      backend::TensorView in[1] = {{x.data(), {ir::DType::kF32, {c.devices, c.n}}}};
      auto out = (*ex)->run("step", in);
      ASSERT_TRUE(out.ok()) << out.status();
      const runtime::HostTensor& sum = (*out)[0];
      int64_t at = 0;
      for (int d = 0; d < c.devices; ++d) {
        const runtime::HostTensor& shard = (*out)[1 + static_cast<size_t>(d)];
        ASSERT_EQ(shard.type.shape[0], c.sizes[static_cast<size_t>(d)]);
        EXPECT_EQ(std::memcmp(shard.f32(), sum.f32() + at, static_cast<size_t>(shard.type.bytes())),
                  0)
            << "step " << step << ", device " << d << "'s shard";
        at += c.sizes[static_cast<size_t>(d)];
        const runtime::HostTensor& gathered =
            (*out)[1 + static_cast<size_t>(c.devices) + static_cast<size_t>(d)];
        EXPECT_EQ(std::memcmp(gathered.f32(), sum.f32(), static_cast<size_t>(sum.type.bytes())), 0)
            << "step " << step << ", device " << d << "'s gathered buffer";
      }
      x[0] += 1;  // a new input: the second step cannot pass on the first one's outputs
    }
  }
}

}  // namespace
}  // namespace tandem::testing
