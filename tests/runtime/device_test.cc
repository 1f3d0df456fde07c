#include "hipformers/runtime/device.h"

#include <gtest/gtest.h>

#include "hipformers/core/error.h"

namespace hipformers {
namespace {

TEST(DeviceString, ParsesAcceptedForms) {
  EXPECT_EQ(parse_device_string("cpu").kind, DeviceRequest::Kind::kCpu);
  EXPECT_EQ(parse_device_string("auto").kind, DeviceRequest::Kind::kAuto);
  auto cuda = parse_device_string("cuda");
  EXPECT_EQ(cuda.kind, DeviceRequest::Kind::kGpu);
  EXPECT_FALSE(cuda.index.has_value());
  EXPECT_EQ(parse_device_string("cuda:1").index, 1);
  EXPECT_EQ(parse_device_string("3").index, 3);
}

TEST(DeviceString, RejectsMalformed) {
  for (const char* bad : {"", "cuda:", "cuda:-1", "cuda:x", "CUDA", "rocm:0", "cuda:1:2", "-1", "gpu0", "cpu:0"}) {
    EXPECT_THROW(parse_device_string(bad), Error) << bad;
  }
  try {
    parse_device_string("tpu");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'cuda:N'"), std::string::npos) << e.what();
  }
}

TEST(DeviceResolve, AutoPicksGpuWhenPresent) {
  auto autoreq = parse_device_string("auto");
  EXPECT_EQ(resolve_device(autoreq, 2, true), Device::gpu(0));
  EXPECT_EQ(resolve_device(autoreq, 0, true), Device::cpu());
  EXPECT_EQ(resolve_device(autoreq, 0, false), Device::cpu());
}

TEST(DeviceResolve, CudaAndCudaN) {
  EXPECT_EQ(resolve_device(parse_device_string("cuda"), 2, true), Device::gpu(0));
  EXPECT_EQ(resolve_device(parse_device_string("cuda:1"), 2, true), Device::gpu(1));
  EXPECT_EQ(Device::gpu(1).str(), "cuda:1");
  EXPECT_EQ(Device::cpu().str(), "cpu");
}

TEST(DeviceResolve, OutOfRangeAndNoBackendAreClearErrors) {
  try {
    resolve_device(parse_device_string("cuda:2"), 2, true);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of range: 2 GPU(s) visible"), std::string::npos) << e.what();
  }
  try {
    resolve_device(parse_device_string("cuda"), 0, false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("without a GPU backend"), std::string::npos) << e.what();
  }
  EXPECT_THROW(resolve_device(parse_device_string("cuda:0"), 0, true), Error);
}

TEST(GpuStack, CpuBuildReportsNoGpu) {
  if (built_with_gpu()) GTEST_SKIP() << "GPU build: covered by the GPU test run";
  GpuStackInfo info = query_gpu_stack();
  EXPECT_EQ(info.backend, "cpu");
  EXPECT_FALSE(info.gpu_available);
  EXPECT_FALSE(info.cuda_version.has_value());
  EXPECT_FALSE(info.hip_version.has_value());
  EXPECT_TRUE(info.devices.empty());
  EXPECT_EQ(gpu_count(), 0);
  EXPECT_EQ(resolve_device("auto"), Device::cpu());
}

}  // namespace
}  // namespace hipformers
