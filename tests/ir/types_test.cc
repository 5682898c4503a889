// ir/types: dtypes, tensor types, devices and device lists, initializers.

#include "ir/types.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "ir/target.h"
#include "tests/device_kinds.h"

namespace tandem::ir {
namespace {

// Devices as the CLI and passes take them: parsed, then checked against the kinds this
// build registered (ir/target.h). The IR itself names any kind.
std::string deviceError(const std::string& text) {
  auto d = parseDevice(text);
  if (d.ok()) {
    absl::Status s = checkTargetDevice(*d);
    EXPECT_FALSE(s.ok()) << text << " parsed as " << toString(*d);
    return std::string(s.message());
  }
  return std::string(d.status().message());
}

std::string deviceListError(const std::string& text) {
  auto ds = parseTargetDevices(text);
  EXPECT_FALSE(ds.ok()) << text << " parsed as " << (ds.ok() ? toString(*ds) : "");
  return std::string(ds.status().message());
}

TEST(Types, DTypeNamesRoundTrip) {
  for (DType t : kAllDTypes) {
    auto parsed = parseDType(dtypeName(t));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, t);
  }
  EXPECT_EQ(dtypeBytes(DType::kF32), 4);
  EXPECT_EQ(dtypeBytes(DType::kBF16), 2);
  EXPECT_EQ(dtypeBytes(DType::kI32), 4);
  EXPECT_EQ(dtypeBytes(DType::kF64), 8);
  EXPECT_EQ(dtypeBytes(DType::kI64), 8);
  EXPECT_EQ(dtypeName(DType::kI64), "i64");
  EXPECT_EQ(toString(TensorType{DType::kI64, {256}}), "i64[256]");
  EXPECT_EQ((TensorType{DType::kI64, {256}}).bytes(), 2048);
  EXPECT_EQ(parseDType("F32").status().message(),
            "unknown dtype 'F32' (expected f32, bf16, i32, f64 or i64)");
  EXPECT_EQ(parseDType("").status().message(),
            "unknown dtype '' (expected f32, bf16, i32, f64 or i64)");
}

TEST(Types, TensorTypeText) {
  EXPECT_EQ(toString(TensorType{DType::kF32, {256, 1, 28, 28}}), "f32[256,1,28,28]");
  EXPECT_EQ(toString(TensorType{DType::kI32, {}}), "i32[]");
  TensorType t{DType::kBF16, {2, 3, 4}};
  EXPECT_EQ(t.rank(), 3);
  EXPECT_EQ(t.numElements(), 24);
  EXPECT_EQ(t.bytes(), 48);
  EXPECT_EQ((TensorType{DType::kF32, {}}).numElements(), 1);  // a scalar holds one element
  EXPECT_NE((TensorType{DType::kF32, {2}}), (TensorType{DType::kI32, {2}}));
}

TEST(Types, ParseDevice) {
  auto cpu = parseDevice("cpu:0");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(*cpu, (Device{::tandem::testing::kind("cpu"), 0}));
  auto cuda = parseDevice("cuda:13");
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  EXPECT_EQ(*cuda, (Device{::tandem::testing::kind("cuda"), 13}));
  EXPECT_EQ(toString(*cuda), "cuda:13");
}

// The IR does not interpret kinds: any word names one; the registry says which exist.
TEST(Types, TheIrNamesAnyKind) {
  auto tpu = parseDevice("tpu:3");
  ASSERT_TRUE(tpu.ok()) << tpu.status();
  EXPECT_EQ(toString(*tpu), "tpu:3");
  EXPECT_EQ(tpu->kind, ::tandem::testing::kind("tpu"));
  EXPECT_NE(tpu->kind, ::tandem::testing::kind("cpu"));
  EXPECT_EQ(Device{}.kind.name(), "cpu");    // what a device count means
  EXPECT_TRUE(parseDevice("cpu:0.1").ok());  // whether cpu devices share is the target's say
  EXPECT_EQ(parseDevice("2cpu:0").status().message(),
            "unknown device '2cpu:0': the device kind must be a word such as cpu or cuda");
  EXPECT_EQ(checkTargetDevice(*tpu).message(),
            "unknown device 'tpu:3': the device kind must be cpu or cuda");
}

TEST(Types, ParseDeviceErrors) {
  EXPECT_EQ(deviceError("cpu:x"),
            "unknown device 'cpu:x': the index must be a non-negative integer");
  EXPECT_EQ(deviceError("tpu:0"), "unknown device 'tpu:0': the device kind must be cpu or cuda");
  EXPECT_EQ(deviceError("gpu:0"), "unknown device 'gpu:0': the device kind must be cpu or cuda");
  EXPECT_EQ(deviceError("CPU:0"), "unknown device 'CPU:0': the device kind must be cpu or cuda");
  EXPECT_EQ(deviceError("cpu"),
            "unknown device 'cpu': expected KIND:INDEX such as cpu:0 or cuda:1");
  EXPECT_EQ(deviceError(""), "unknown device '': expected KIND:INDEX such as cpu:0 or cuda:1");
  EXPECT_EQ(deviceError("cpu:"), "unknown device 'cpu:': the index must be a non-negative integer");
  EXPECT_EQ(deviceError("cpu:-1"),
            "unknown device 'cpu:-1': the index must be a non-negative integer");
  EXPECT_EQ(deviceError("cpu:1x"),
            "unknown device 'cpu:1x': the index must be a non-negative integer");
  EXPECT_EQ(deviceError("cpu:0:1"),
            "unknown device 'cpu:0:1': the index must be a non-negative integer");
  EXPECT_EQ(deviceError("cpu:99999999999"),
            "unknown device 'cpu:99999999999': the index must be at most 1023");
  // Issue 40: a module has at most 1024 devices, so no index, share or rank passes 1023
  // (cpu:1024 and cpu:99999 were accepted).
  EXPECT_TRUE(parseDevice("cpu:1023").ok());
  EXPECT_EQ(deviceError("cpu:1024"), "unknown device 'cpu:1024': the index must be at most 1023");
  EXPECT_EQ(deviceError("cpu:99999"), "unknown device 'cpu:99999': the index must be at most 1023");
  EXPECT_EQ(deviceError("cuda:0.1024"),
            "unknown device 'cuda:0.1024': the share after '.' must be at most 1023");
  EXPECT_EQ(deviceError("cpu:0@1024"),
            "unknown device 'cpu:0@1024': the rank after '@' must be at most 1023");
}

TEST(Types, DeviceCountTakesSpacesAsAListDoes) {
  // Issue 40: ' 2' and '2 ' were "unknown device '2'" although 'cpu:0 ,cpu:1' is taken.
  for (const char* text : {" 2", "2 ", "\t2\n", "  2  "}) {
    auto ds = parseDeviceList(text);
    ASSERT_TRUE(ds.ok()) << "'" << text << "': " << ds.status();
    EXPECT_EQ(ds->size(), 2u) << "'" << text << "'";
  }
  auto list = parseDeviceList(" cpu:0 , cpu:1 ");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->size(), 2u);
  EXPECT_EQ(parseDeviceList(" 0 ").status().message(),
            "device count 0 is out of range (1 to 1024)");
  EXPECT_EQ(parseDeviceList("   ").status().message(), "the device list is empty");
}

TEST(Types, DeviceRanks) {
  auto d = parseDevice("cpu:1@2");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, (Device{::tandem::testing::kind("cpu"), 1, 2}));
  EXPECT_EQ(toString(*d), "cpu:1@2");
  // Rank 0 is written without it: one-process text stays as it was.
  auto zero = parseDevice("cuda:3@0");
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(*zero, (Device{::tandem::testing::kind("cuda"), 3, 0}));
  EXPECT_EQ(toString(*zero), "cuda:3");
  EXPECT_NE((Device{::tandem::testing::kind("cpu"), 0, 1}),
            (Device{::tandem::testing::kind("cpu"), 0, 0}));
  const std::string rank_error =
      "the rank after '@' must be a non-negative integer (cpu:0@1: rank 1's cpu:0)";
  EXPECT_EQ(deviceError("cpu:0@"), "unknown device 'cpu:0@': " + rank_error);
  EXPECT_EQ(deviceError("cpu:0@x"), "unknown device 'cpu:0@x': " + rank_error);
  EXPECT_EQ(deviceError("cpu:0@-1"), "unknown device 'cpu:0@-1': " + rank_error);
  EXPECT_EQ(deviceError("cpu:0@1@2"), "unknown device 'cpu:0@1@2': " + rank_error);
  EXPECT_EQ(deviceError("cpu:@1"),
            "unknown device 'cpu:@1': the index must be a non-negative integer");
  auto list = parseTargetDevices("cpu:0,cpu:0@1");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(toString(*list), "[cpu:0, cpu:0@1]");
  EXPECT_EQ(deviceListError("cpu:0@1,cpu:0@1"), "device cpu:0@1 is listed twice in 'cpu:0@1,cpu:0@1'");
}

// Logical devices on one GPU: cuda:0.1 is GPU 0's second; a CUDA device written again
// without a share takes the GPU's next one, so `--devices cuda:0,cuda:0` is two devices.
TEST(Types, LogicalDevicesShareAGpu) {
  auto shared = parseDevice("cuda:0.1@2");
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_EQ(*shared,
            (Device{.kind = ::tandem::testing::kind("cuda"), .index = 0, .rank = 2, .share = 1}));
  EXPECT_EQ(toString(*shared), "cuda:0.1@2");
  EXPECT_EQ(toString(*parseDevice("cuda:3.0")), "cuda:3");
  EXPECT_NE((Device{.kind = ::tandem::testing::kind("cuda"), .share = 1}),
            (Device{.kind = ::tandem::testing::kind("cuda")}));
  auto list = parseTargetDevices("cuda:0,cuda:0,cuda:1,cuda:0");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(toString(*list), "[cuda:0, cuda:0.1, cuda:1, cuda:0.2]");
  auto reparsed = parseTargetDevices("cuda:0,cuda:0.1,cuda:1,cuda:0.2");
  ASSERT_TRUE(reparsed.ok());
  EXPECT_EQ(*reparsed, *list);
  EXPECT_EQ(toString(devicesAcrossRanks(*parseTargetDevices("cuda:0,cuda:0"), 2)),
            "[cuda:0, cuda:0.1, cuda:0@1, cuda:0.1@1]");
  EXPECT_EQ(deviceListError("cuda:0.1,cuda:0.1"),
            "device cuda:0.1 is listed twice in 'cuda:0.1,cuda:0.1'");
  EXPECT_EQ(deviceError("cpu:0.1"),
            "unknown device 'cpu:0.1': only CUDA devices share a GPU (cuda:0.1); CPU devices "
            "are separate already (cpu:0, cpu:1)");
  const std::string share_error =
      "the share after '.' must be a non-negative integer (cuda:0.1: GPU 0's second logical "
      "device)";
  EXPECT_EQ(deviceError("cuda:0."), "unknown device 'cuda:0.': " + share_error);
  EXPECT_EQ(deviceError("cuda:0.x"), "unknown device 'cuda:0.x': " + share_error);
  EXPECT_EQ(deviceError("cuda:0.-1"), "unknown device 'cuda:0.-1': " + share_error);
  EXPECT_EQ(deviceError("cuda:.1"),
            "unknown device 'cuda:.1': the index must be a non-negative integer");
}

TEST(Types, DevicesAcrossRanksAreRankMajor) {
  auto local = parseTargetDevices("cpu:0,cpu:1");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(toString(devicesAcrossRanks(*local, 3)),
            "[cpu:0, cpu:1, cpu:0@1, cpu:1@1, cpu:0@2, cpu:1@2]");
  EXPECT_EQ(devicesAcrossRanks(*local, 1), *local);
}

TEST(Types, ParseDeviceList) {
  auto list = parseTargetDevices("cpu:0,cuda:1,cpu:2");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(toString(*list), "[cpu:0, cuda:1, cpu:2]");
  auto one = parseTargetDevices("cuda:0");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(toString(*one), "[cuda:0]");
}

TEST(Types, ParseDeviceListCountMeansCpuDevices) {
  auto four = parseTargetDevices("4");
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(*four, (std::vector<Device>{{::tandem::testing::kind("cpu"), 0},
                                        {::tandem::testing::kind("cpu"), 1},
                                        {::tandem::testing::kind("cpu"), 2},
                                        {::tandem::testing::kind("cpu"), 3}}));
  auto max = parseTargetDevices("1024");
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_EQ(max->size(), 1024u);
  EXPECT_EQ(max->back(), (Device{::tandem::testing::kind("cpu"), 1023}));
}

TEST(Types, ParseDeviceListErrors) {
  EXPECT_EQ(deviceListError("cpu:0,cpu:0"), "device cpu:0 is listed twice in 'cpu:0,cpu:0'");
  EXPECT_EQ(deviceListError("cuda:1,cpu:1,cuda:1.1,cuda:1.1"),
            "device cuda:1.1 is listed twice in 'cuda:1,cpu:1,cuda:1.1,cuda:1.1'");
  EXPECT_EQ(deviceListError("0"), "device count 0 is out of range (1 to 1024)");
  EXPECT_EQ(deviceListError("1025"), "device count 1025 is out of range (1 to 1024)");
  EXPECT_EQ(deviceListError("-2"), "device count -2 is out of range (1 to 1024)");
  EXPECT_EQ(deviceListError("cpu:0,tpu:1"),
            "unknown device 'tpu:1': the device kind must be cpu or cuda");
  EXPECT_EQ(deviceListError("cpu:0,cpu:x"),
            "unknown device 'cpu:x': the index must be a non-negative integer");
  EXPECT_EQ(deviceListError("cpu:0,"),
            "unknown device '': expected KIND:INDEX such as cpu:0 or cuda:1");
  EXPECT_EQ(deviceListError(""), "the device list is empty");
  EXPECT_EQ(deviceListError("4,cpu:0"),
            "unknown device '4': expected KIND:INDEX such as cpu:0 or cuda:1");
}

// A count and a list have the same cap; the list's duplicate check is one hash lookup a
// device, so a list of the most devices parses as fast as the count.
TEST(Types, ParseDeviceListCapsLongListsToo) {
  std::vector<std::string> names;
  for (int i = 0; i < 1024; ++i) names.push_back(absl::StrCat(i % 2 ? "cuda:" : "cpu:", i / 2));
  auto most = parseTargetDevices(absl::StrJoin(names, ","));
  ASSERT_TRUE(most.ok()) << most.status();
  EXPECT_EQ(most->size(), kMaxDevices);
  EXPECT_EQ(most->back(), (Device{::tandem::testing::kind("cuda"), 511}));
  names.push_back("cpu:512");
  EXPECT_EQ(deviceListError(absl::StrJoin(names, ",")),
            "the device list has more than 1024 devices (cpu:512 is number 1025)");
  names.back() = "cpu:511";  // a duplicate is named as such, however long the list
  EXPECT_EQ(deviceListError(absl::StrJoin(names, ",")).substr(0, 32),
            "device cpu:511 is listed twice i");
}

TEST(Types, InitializerText) {
  EXPECT_EQ(toString(Initializer{Initializer::Kind::kZeros}), "zeros");
  EXPECT_EQ(toString(Initializer{Initializer::Kind::kOnes}), "ones");
  EXPECT_EQ(toString(Initializer{Initializer::Kind::kKaiming}), "kaiming");
  EXPECT_EQ(toString(Initializer{Initializer::Kind::kNormal, 0.01}), "normal(std=0.01)");
  EXPECT_TRUE((Initializer{Initializer::Kind::kOnes}).isDeterministic());
  EXPECT_FALSE((Initializer{Initializer::Kind::kNormal, 1}).isDeterministic());
  EXPECT_FALSE((Initializer{Initializer::Kind::kKaiming}).isDeterministic());
}

}  // namespace
}  // namespace tandem::ir
