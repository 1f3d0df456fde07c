// HostStaging: on the CPU transfers are immediate copies; on a GPU they are
// queued behind the stream's earlier work and wait() is what makes their
// results visible. Sizes are checked.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "hipformers/core/error.h"
#include "hipformers/runtime/allocator.h"
#include "hipformers/runtime/device.h"
#include "hipformers/runtime/staging.h"
#include "test_util.h"

namespace hipformers {
namespace {

TEST(HostStagingTest, UploadAndDownloadRoundTrip) {
  HostStaging staging(Device::cpu(), 16);
  EXPECT_EQ(staging.size(), 16u);
  const int values[4] = {7, -1, 42, 3};
  std::memcpy(staging.data(), values, sizeof values);
  std::vector<int> device(4, 0);
  staging.upload(device.data(), sizeof values);
  staging.wait();
  EXPECT_EQ(device, (std::vector<int>{7, -1, 42, 3}));
  device[2] = 5;
  staging.download(device.data(), sizeof values);
  staging.wait();
  const auto* back = static_cast<const int*>(staging.data());
  EXPECT_EQ(back[2], 5);
  EXPECT_EQ(back[0], 7);
}

TEST(HostStagingTest, TransfersBeyondTheBufferAreErrors) {
  HostStaging staging(Device::cpu(), 8);
  std::vector<char> device(16);
  EXPECT_EQ(testing::error_of([&] { staging.upload(device.data(), 9); }).first, ErrorKind::kInvalidInput);
  EXPECT_EQ(testing::error_of([&] { staging.download(device.data(), 16); }).first, ErrorKind::kInvalidInput);
  staging.upload(device.data(), 0);  // nothing to do
}

// Each round rewrites the upload buffer (after waiting for its last copy),
// uploads it and downloads the device buffer through the other staging
// buffer: the download, queued behind the upload, sees this round's values.
TEST(HostStagingTest, GpuTransfersAreStreamOrdered) {
  if (!built_with_gpu() || gpu_count() == 0) GTEST_SKIP() << "no GPU";
  const Device gpu = Device::gpu(0);
  constexpr int n = 4096;
  Tensor buf = empty_tensor(Shape{n}, DType::kI32, gpu);
  HostStaging up(gpu, n * sizeof(int32_t)), down(gpu, n * sizeof(int32_t));
  for (int round = 0; round < 3; ++round) {
    up.wait();
    auto* u = static_cast<int32_t*>(up.data());
    for (int i = 0; i < n; ++i) u[i] = round * 100000 + i;
    up.upload(buf.mutable_raw_data(), n * sizeof(int32_t));
    down.download(buf.raw_data(), n * sizeof(int32_t));
    down.wait();
    const auto* d = static_cast<const int32_t*>(down.data());
    EXPECT_EQ(d[0], round * 100000) << round;
    EXPECT_EQ(d[n - 1], round * 100000 + n - 1) << round;
  }
}

}  // namespace
}  // namespace hipformers
