// Backends by name and by capability: the registry (backend/registry.cc) registers each
// backend under its kind's name with its target facts (ir/target.h), which the compiler
// asks instead of testing kinds.

#include <string>

#include "absl/strings/match.h"
#include "backend/backend.h"
#include "backend/backends.h"
#include "backend/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "ir/target.h"
#include "tests/device_kinds.h"

namespace tandem::testing {
namespace {

TEST(TargetRegistry, EveryKindOfTheBuildHasItsFacts) {
  backend::registerBackends();
  const ir::TargetInfo* cpu = ir::findTarget(kind("cpu"));
  const ir::TargetInfo* cuda = ir::findTarget(kind("cuda"));  // also without the CUDA backend
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(cuda, nullptr);
  EXPECT_EQ(cpu->alignment, 64);
  EXPECT_EQ(cuda->alignment, 256);
  EXPECT_FALSE(cpu->multi_tensor_update);
  EXPECT_TRUE(cuda->multi_tensor_update);
  EXPECT_EQ(cpu->preferred_layout, ir::ActivationLayout::kChannelBlocked);
  EXPECT_EQ(cuda->preferred_layout, ir::ActivationLayout::kChannelsLast);
  EXPECT_TRUE(cuda->step_recording);
  EXPECT_FALSE(cpu->shares_devices);
  EXPECT_EQ(ir::findTarget(kind("tpu")), nullptr);
  ASSERT_GE(ir::registeredTargets().size(), 2u);
  EXPECT_EQ(ir::registeredTargets()[0]->kind, kind("cpu"));
}

TEST(TargetRegistry, DevicesAreCheckedByTheirKindsFacts) {
  backend::registerBackends();
  auto shared = ir::parseTargetDevices("cuda:0,cuda:0");
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_EQ(ir::toString(*shared), "[cuda:0, cuda:0.1]");
  EXPECT_EQ(ir::parseTargetDevices("cpu:0,cpu:0").status().message(),
            "device cpu:0 is listed twice in 'cpu:0,cpu:0'");
  EXPECT_EQ(ir::parseTargetDevices("cpu:0.1").status().message(),
            "unknown device 'cpu:0.1': only CUDA devices share a GPU (cuda:0.1); CPU devices are "
            "separate already (cpu:0, cpu:1)");
  EXPECT_EQ(ir::parseTargetDevices("cpu:0,tpu:1").status().message(),
            "unknown device 'tpu:1': the device kind must be cpu or cuda");
  auto alignment = ir::targetAlignment(*ir::parseTargetDevices("cpu:0,cuda:0"));
  ASSERT_TRUE(alignment.ok());
  EXPECT_EQ(*alignment, 256);
}

TEST(BackendRegistry, BackendsAnswerByName) {
  auto cpu = backend::backendFor(kind("cpu"));
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(*cpu, &backend::cpu::cpuBackend());
  EXPECT_EQ((*cpu)->alignment(), 64);
  EXPECT_EQ(&(*cpu)->target(), &backend::cpu::cpuBackend().target());
  auto tpu = backend::backendFor(kind("tpu"));
  ASSERT_FALSE(tpu.ok());
  EXPECT_TRUE(absl::StartsWith(tpu.status().message(), "no backend for device kind 'tpu'"))
      << tpu.status();
  EXPECT_TRUE(absl::StartsWith(backend::describeBackends(), "cpu: "))
      << backend::describeBackends();
  EXPECT_TRUE(absl::StrContains(backend::describeBackends(), "\ncuda: "));
  EXPECT_TRUE(absl::StartsWith(backend::backendVersions(), "cpu backend: oneDNN "));
  EXPECT_TRUE(absl::StrContains(backend::backendVersions(), "\ncuda backend: "));
}

// A backend reads its own settings when it makes a device, checked; another backend's are
// not its business.
TEST(BackendRegistry, OwnOptionsAreTheBackendsOwn) {
  const backend::Settings bad{{"threads_per_device", 0}};
  auto d = backend::cpu::cpuBackend().createDevice(ir::Device{}, {.settings = &bad});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(),
            "cpu:0: backend setting 'threads_per_device': 0 is out of range [1, 1024]");
  const backend::Settings foreign{{"allow_tf32", false}};
  EXPECT_TRUE(backend::cpu::cpuBackend().createDevice(ir::Device{}, {.settings = &foreign}).ok());
}

}  // namespace
}  // namespace tandem::testing
