// DeviceGraph: on the CPU the callable is kept and replayed; on a GPU the
// recorded copies replay against whatever the buffers hold at replay time,
// and work that cannot be captured (a copy to the host) is a clear error
// that leaves the stream usable.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "hipformers/core/error.h"
#include "hipformers/runtime/allocator.h"
#include "hipformers/runtime/graph.h"
#include "hipformers/runtime/profiling.h"

namespace hipformers {
namespace {

TEST(DeviceGraph, CpuReplaysTheCallable) {
  DeviceGraph graph;
  EXPECT_FALSE(graph.captured());
  EXPECT_THROW(graph.replay(), Error);
  int runs = 0;
  graph.capture(Device::cpu(), [&] { ++runs; });
  EXPECT_TRUE(graph.captured());
  EXPECT_EQ(runs, 0);  // capture records, it does not run
  graph.replay();
  graph.replay();
  EXPECT_EQ(runs, 2);
}

TEST(DeviceGraph, GpuReplaysCopiesWithNewContents) {
  if (!built_with_gpu() || gpu_count() == 0) GTEST_SKIP() << "no GPU";
  const Device gpu = Device::gpu(0);
  const std::size_t n = 1024;
  Tensor a = empty_tensor(Shape{static_cast<int64_t>(n)}, DType::kF32, gpu);
  Tensor b = empty_tensor(Shape{static_cast<int64_t>(n)}, DType::kF32, gpu);
  std::vector<float> host(n);
  auto put = [&](float base) {
    for (std::size_t i = 0; i < n; ++i) host[i] = base + static_cast<float>(i);
    copy_bytes(a.mutable_raw_data(), gpu, host.data(), Device::cpu(), n * sizeof(float));
  };
  DeviceGraph graph;
  graph.capture(gpu, [&] { copy_bytes(b.mutable_raw_data(), gpu, a.raw_data(), gpu, n * sizeof(float)); });
  for (float base : {1.0f, 1000.0f}) {
    put(base);
    graph.replay();
    Tensor back = b.to(Device::cpu());
    EXPECT_EQ(std::memcmp(back.data<float>(), host.data(), n * sizeof(float)), 0) << base;
  }
  // A copy to the host synchronises: not capturable, reported, stream still fine.
  DeviceGraph bad;
  const Tensor src = a;
  EXPECT_THROW(bad.capture(gpu, [&] { (void)src.to(Device::cpu()); }), Error);
  EXPECT_FALSE(bad.captured());
  put(5.0f);
  graph.replay();
  synchronize(gpu);
  Tensor back = b.to(Device::cpu());
  EXPECT_EQ(back.data<float>()[3], 8.0f);
}

}  // namespace
}  // namespace hipformers
