#include "hipformers/runtime/visible_devices.h"

#include <gtest/gtest.h>

#include "hipformers/core/error.h"

namespace hipformers {
namespace {

using Ids = std::vector<std::string>;

VisibleDevicesEnv env(std::optional<std::string> cuda, std::optional<std::string> hip = std::nullopt,
                      std::optional<std::string> rocr = std::nullopt) {
  return VisibleDevicesEnv{cuda, hip, rocr};
}

std::string error_of(GpuPlatform p, const VisibleDevicesEnv& e, int count) {
  try {
    resolve_visible_devices(p, e, count);
  } catch (const Error& err) {
    return err.what();
  }
  return "";
}

TEST(VisibleDevices, NoVariablesShowsAllInOrder) {
  auto m = resolve_visible_devices(GpuPlatform::kCuda, env(std::nullopt), 3);
  EXPECT_EQ(m.physical_ids, (Ids{"0", "1", "2"}));
  EXPECT_FALSE(m.restricted);
  auto r = resolve_visible_devices(GpuPlatform::kRocm, env(std::nullopt), 2);
  EXPECT_EQ(r.physical_ids, (Ids{"0", "1"}));
}

TEST(VisibleDevices, CudaListReordersAndFilters) {
  auto m = resolve_visible_devices(GpuPlatform::kCuda, env("2,0"), 4);
  EXPECT_EQ(m.physical_ids, (Ids{"2", "0"}));
  EXPECT_TRUE(m.restricted);
  EXPECT_EQ(m.description, "CUDA_VISIBLE_DEVICES=2,0");
}

TEST(VisibleDevices, CudaIgnoresHipAndRocrVariables) {
  auto m = resolve_visible_devices(GpuPlatform::kCuda, env(std::nullopt, "1", "1"), 2);
  EXPECT_EQ(m.physical_ids, (Ids{"0", "1"}));
}

TEST(VisibleDevices, EmptyOrMinusOneHidesEverything) {
  EXPECT_TRUE(resolve_visible_devices(GpuPlatform::kCuda, env(""), 4).physical_ids.empty());
  EXPECT_TRUE(resolve_visible_devices(GpuPlatform::kCuda, env("-1"), 4).physical_ids.empty());
  EXPECT_TRUE(resolve_visible_devices(GpuPlatform::kRocm, env(std::nullopt, ""), 4).physical_ids.empty());
}

TEST(VisibleDevices, HipIndexesInOrderGiven) {
  // The guide's example: HIP_VISIBLE_DEVICES=0,2 -> cuda:0 is physical 0, cuda:1 is physical 2.
  auto m = resolve_visible_devices(GpuPlatform::kRocm, env(std::nullopt, "0,2"), 4);
  EXPECT_EQ(m.physical_ids, (Ids{"0", "2"}));
  auto reversed = resolve_visible_devices(GpuPlatform::kRocm, env(std::nullopt, "3,1"), 4);
  EXPECT_EQ(reversed.physical_ids, (Ids{"3", "1"}));
}

TEST(VisibleDevices, RocrFiltersFirstThenHipIndexesIntoWhatIsLeft) {
  // ROCR leaves physical 1,2,3; HIP's 2,0 are indices into that list -> physical 3, 1.
  auto m = resolve_visible_devices(GpuPlatform::kRocm, env(std::nullopt, "2,0", "1,2,3"), 4);
  EXPECT_EQ(m.physical_ids, (Ids{"3", "1"}));
  EXPECT_EQ(m.description, "ROCR_VISIBLE_DEVICES=1,2,3 then HIP_VISIBLE_DEVICES=2,0");
}

TEST(VisibleDevices, RocmFallsBackToCudaVariableWhenHipUnset) {
  auto m = resolve_visible_devices(GpuPlatform::kRocm, env("1", std::nullopt, "2,3"), 4);
  EXPECT_EQ(m.physical_ids, (Ids{"3"}));
  // HIP_VISIBLE_DEVICES wins over CUDA_VISIBLE_DEVICES.
  auto both = resolve_visible_devices(GpuPlatform::kRocm, env("1", "0"), 4);
  EXPECT_EQ(both.physical_ids, (Ids{"0"}));
}

TEST(VisibleDevices, HipIndexBeyondRocrListIsOutOfRange) {
  std::string msg = error_of(GpuPlatform::kRocm, env(std::nullopt, "2", "0,1"), 4);
  EXPECT_NE(msg.find("HIP_VISIBLE_DEVICES='2'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
}

TEST(VisibleDevices, MalformedListsNameTheVariable) {
  for (const char* bad : {"0,,1", "a", "0,x", "1.5", ",0", "0,", "-2", "0;1"}) {
    std::string msg = error_of(GpuPlatform::kCuda, env(bad), 4);
    EXPECT_NE(msg.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << bad << " -> " << msg;
  }
  std::string rocr = error_of(GpuPlatform::kRocm, env(std::nullopt, std::nullopt, "0,zz"), 4);
  EXPECT_NE(rocr.find("ROCR_VISIBLE_DEVICES"), std::string::npos) << rocr;
}

TEST(VisibleDevices, DuplicatesAreRejected) {
  std::string msg = error_of(GpuPlatform::kCuda, env("1,0,1"), 4);
  EXPECT_NE(msg.find("listed twice"), std::string::npos) << msg;
  std::string same = error_of(GpuPlatform::kRocm, env(std::nullopt, "0,00"), 4);
  EXPECT_NE(same.find("HIP_VISIBLE_DEVICES"), std::string::npos) << same;
}

TEST(VisibleDevices, OutOfRangeWhenPhysicalCountKnown) {
  std::string msg = error_of(GpuPlatform::kCuda, env("0,4"), 4);
  EXPECT_NE(msg.find("device 4 is out of range"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CUDA_VISIBLE_DEVICES='0,4'"), std::string::npos) << msg;
}

TEST(VisibleDevices, UnknownPhysicalCountKeepsIndices) {
  auto m = resolve_visible_devices(GpuPlatform::kCuda, env("3,1"), -1);
  EXPECT_EQ(m.physical_ids, (Ids{"3", "1"}));
}

TEST(VisibleDevices, SpacesAndLeadingZerosAreTolerated) {
  auto m = resolve_visible_devices(GpuPlatform::kCuda, env(" 1 , 02 "), 4);
  EXPECT_EQ(m.physical_ids, (Ids{"1", "2"}));
}

TEST(VisibleDevices, UuidsMatchByPrefix) {
  std::vector<std::string> uuids = {"GPU-aaaa-1111", "GPU-bbbb-2222"};
  auto m = resolve_visible_devices(GpuPlatform::kCuda, env("GPU-bbbb"), 2, uuids);
  EXPECT_EQ(m.physical_ids, (Ids{"GPU-bbbb"}));
  EXPECT_THROW(resolve_visible_devices(GpuPlatform::kCuda, env("GPU-cccc"), 2, uuids), Error);
  EXPECT_THROW(resolve_visible_devices(GpuPlatform::kCuda, env("GPU-"), 2, uuids), Error);
}

}  // namespace
}  // namespace hipformers
