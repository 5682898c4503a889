// Backend settings by name (backend/settings.h): what each backend registers, and the
// errors that name a setting a front end got wrong.

#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/backends.h"
#include "backend/cpu/cpu_options.h"
#include "backend/cuda/cuda_options.h"
#include "backend/settings.h"
#include "gtest/gtest.h"

namespace tandem::testing {
namespace {

using backend::Settings;

const backend::RegisteredSetting* registered(const std::string& name) {
  static const std::vector<backend::RegisteredSetting> all = [] {
    backend::registerBackends();
    return backend::registeredSettings();
  }();
  for (const backend::RegisteredSetting& s : all)
    if (s.spec.name == name) return &s;
  return nullptr;
}

TEST(BackendSettings, EachBackendRegistersWhatItReads) {
  const backend::RegisteredSetting* threads = registered("threads_per_device");
  const backend::RegisteredSetting* conv = registered("conv_algorithm");
  const backend::RegisteredSetting* tf32 = registered("allow_tf32");
  ASSERT_NE(threads, nullptr);
  ASSERT_NE(conv, nullptr);
  ASSERT_NE(tf32, nullptr);  // also in a build without the CUDA backend
  EXPECT_EQ(threads->kinds, std::vector<std::string>{"cpu"});
  EXPECT_EQ(threads->spec.min, 1);
  EXPECT_EQ(threads->spec.max, 1024);
  EXPECT_EQ(conv->kinds, (std::vector<std::string>{"cpu", "cuda"}));
  EXPECT_EQ(conv->spec.words, (std::vector<std::string>{"auto", "direct", "measure"}));
  EXPECT_EQ(tf32->kinds, std::vector<std::string>{"cuda"});
  for (const auto* s : {threads, conv, tf32}) EXPECT_FALSE(s->spec.doc.empty()) << s->spec.name;
}

TEST(BackendSettings, GoodSettingsPass) {
  registered("");
  EXPECT_TRUE(backend::checkSettings({}).ok());
  const absl::Status s = backend::checkSettings(
      {{"threads_per_device", 1024}, {"conv_algorithm", "measure"}, {"allow_tf32", false}});
  EXPECT_TRUE(s.ok()) << s;
}

TEST(BackendSettings, AnUnknownNameIsNamedWithTheKnownOnes) {
  registered("");
  EXPECT_EQ(backend::checkSettings({{"threads_per_devise", 2}}).message(),
            "unknown backend setting 'threads_per_devise' (the backends read allow_tf32, "
            "conv_algorithm, threads_per_device)");
}

TEST(BackendSettings, AnIllTypedValueIsNamed) {
  registered("");
  EXPECT_EQ(backend::checkSettings({{"allow_tf32", 4}}).message(),
            "backend setting 'allow_tf32' takes true or false, not 4");
  EXPECT_EQ(backend::checkSettings({{"threads_per_device", "four"}}).message(),
            "backend setting 'threads_per_device' takes a whole number, not 'four'");
  EXPECT_EQ(backend::checkSettings({{"conv_algorithm", true}}).message(),
            "backend setting 'conv_algorithm' takes a word, not true");
}

TEST(BackendSettings, AValueOutOfRangeIsNamed) {
  registered("");
  EXPECT_EQ(backend::checkSettings({{"threads_per_device", 0}}).message(),
            "backend setting 'threads_per_device': 0 is out of range [1, 1024]");
  EXPECT_EQ(backend::checkSettings({{"threads_per_device", 1025}}).message(),
            "backend setting 'threads_per_device': 1025 is out of range [1, 1024]");
  EXPECT_EQ(backend::checkSettings({{"conv_algorithm", "fast"}}).message(),
            "backend setting 'conv_algorithm': unknown word 'fast' (expected auto, direct, "
            "measure)");
}

// Each backend reads its own fields, typed, and leaves the others' settings alone.
TEST(BackendSettings, EachBackendReadsItsOwnTypedOptions) {
  const Settings s{{"threads_per_device", 3}, {"conv_algorithm", "direct"}, {"allow_tf32", false}};
  auto cpu = backend::cpu::cpuOptions().read(&s);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->threads_per_device, 3);
  EXPECT_EQ(cpu->conv_algorithm, backend::ConvAlgorithm::kDirect);
  auto cuda = backend::cuda::cudaOptions().read(&s);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  EXPECT_FALSE(cuda->allow_tf32);
  EXPECT_EQ(cuda->conv_algorithm, backend::ConvAlgorithm::kDirect);
  auto defaults = backend::cuda::cudaOptions().read(nullptr);
  ASSERT_TRUE(defaults.ok());
  EXPECT_TRUE(defaults->allow_tf32);
  EXPECT_EQ(defaults->conv_algorithm, backend::ConvAlgorithm::kAuto);
  const Settings bad{{"allow_tf32", "no"}};
  EXPECT_EQ(backend::cuda::cudaOptions().read(&bad).status().message(),
            "backend setting 'allow_tf32' takes true or false, not 'no'");
  EXPECT_TRUE(backend::cpu::cpuOptions().read(&bad).ok());  // the CPU does not read it
}

// Two backends that read one name must agree on its values; the registry refuses a second
// meaning and keeps the first.
TEST(BackendSettings, ANameHasOneMeaning) {
  registered("");
  const absl::Status s =
      backend::registerSettings("tpu", {{.name = "conv_algorithm",
                                         .doc = "d",
                                         .type = backend::SettingSpec::Type::kNumber,
                                         .min = 0,
                                         .max = 3}});
  EXPECT_EQ(s.message(),
            "backend setting 'conv_algorithm' of tpu takes other values than cpu, cuda's setting "
            "of that name");
  for (const backend::RegisteredSetting& r : backend::registeredSettings()) {
    if (r.spec.name == "conv_algorithm") {
      EXPECT_EQ(r.kinds, (std::vector<std::string>{"cpu", "cuda"}));
    }
  }
  EXPECT_TRUE(backend::checkSettings({{"conv_algorithm", "direct"}}).ok());
}

}  // namespace
}  // namespace tandem::testing
