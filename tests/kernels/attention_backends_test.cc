// Attention backend resolution per device key: names, aliases, the kernel
// each runs, and errors that list what the device has.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "hipformers/core/error.h"
#include "hipformers/kernels/attention_backends.h"
#include "hipformers/kernels/registry.h"

namespace hipformers::kernels {
namespace {

std::string message_of(std::string_view name, std::string_view device) {
  try {
    resolve_attention_backend(name, device);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    return e.what();
  }
  ADD_FAILURE() << name << " on " << device << " did not throw";
  return "";
}

TEST(AttentionBackends, CpuHasEagerAndSdpa) {
  EXPECT_EQ(attention_backends("cpu"), (std::vector<std::string>{"eager", "sdpa"}));
  AttentionBackend sdpa = resolve_attention_backend("sdpa", "cpu");
  EXPECT_EQ(sdpa.name, "sdpa");
  EXPECT_EQ(sdpa.kernel, "attention_sdpa");
  EXPECT_FALSE(sdpa.returns_weights);
  EXPECT_TRUE(sdpa.notice.empty());
  AttentionBackend eager = resolve_attention_backend("eager", "cpu");
  EXPECT_EQ(eager.kernel, "attention_eager");
  EXPECT_TRUE(eager.returns_weights);
}

TEST(AttentionBackends, FlashIsRefusedOnCpuWithTheList) {
  for (const char* name : {"flash_attention_2", "flash_attention_3", "kernels-community/flash-attn",
                           "kernels-community/flash-attn3", "kernels-community/aiter-flash-attn"}) {
    std::string m = message_of(name, "cpu");
    EXPECT_NE(m.find(std::string("'") + name + "' is not available on cpu"), std::string::npos) << m;
    EXPECT_NE(m.find("available on cpu: eager, sdpa"), std::string::npos) << m;
  }
}

TEST(AttentionBackends, GpusResolveFlashToTheFusedKernel) {
  for (const char* device : {"cuda", "rocm"}) {
    for (const char* name : {"sdpa", "flash_attention_2", "flash_attention_3"}) {
      AttentionBackend b = resolve_attention_backend(name, device);
      EXPECT_EQ(b.name, name);
      EXPECT_EQ(b.device, device);
      EXPECT_EQ(b.kernel, "attention_fused");
      EXPECT_TRUE(b.notice.empty());
    }
    EXPECT_EQ(resolve_attention_backend("eager", device).kernel, "attention_eager");
  }
}

TEST(AttentionBackends, KernelRepositoryAliases) {
  AttentionBackend fa = resolve_attention_backend("kernels-community/flash-attn", "cuda");
  EXPECT_EQ(fa.requested, "kernels-community/flash-attn");
  EXPECT_EQ(fa.name, "flash_attention_2");
  EXPECT_EQ(fa.kernel, "attention_fused");
  EXPECT_NE(fa.notice.find("flash_attn seems to be not installed"), std::string::npos);
  EXPECT_EQ(fa.notice.find('\n'), std::string::npos);
  EXPECT_EQ(resolve_attention_backend("kernels-community/flash-attn3", "cuda").name, "flash_attention_3");
  AttentionBackend aiter = resolve_attention_backend("kernels-community/aiter-flash-attn", "rocm");
  EXPECT_EQ(aiter.name, "flash_attention_2");
  EXPECT_EQ(aiter.kernel, "attention_fused");
  EXPECT_FALSE(aiter.notice.empty());
  // Vendor-specific repositories exist only on their vendor.
  EXPECT_NE(message_of("kernels-community/aiter-flash-attn", "cuda").find("not available on cuda"),
            std::string::npos);
  EXPECT_NE(message_of("kernels-community/flash-attn3", "rocm").find("not available on rocm"), std::string::npos);
}

TEST(AttentionBackends, UnknownNamesListTheDevicesBackends) {
  std::string m = message_of("flash", "cpu");
  EXPECT_NE(m.find("unknown attention implementation 'flash'"), std::string::npos) << m;
  EXPECT_NE(m.find("available on cpu: eager, sdpa"), std::string::npos) << m;
  m = message_of("FLASH_ATTENTION_2", "rocm");
  EXPECT_NE(m.find("eager, sdpa, flash_attention_2, flash_attention_3, kernels-community/flash-attn, "
                   "kernels-community/aiter-flash-attn"),
            std::string::npos)
      << m;
  EXPECT_THROW(resolve_attention_backend("sdpa", "tpu"), Error);
}

TEST(AttentionBackends, EveryBackendNamesARegisteredKernel) {
  for (std::string_view device : kDeviceKeys)
    for (const std::string& name : attention_backends(device)) {
      AttentionBackend b = resolve_attention_backend(name, device);
      EXPECT_NO_THROW(find_kernel(LayerKind::kAttention, device, b.kernel)) << name << " on " << device;
      EXPECT_EQ(find_kernel(LayerKind::kAttention, device, b.kernel).eager_attention, b.returns_weights);
    }
}

TEST(AttentionBackends, NoticeIsLoggedOnce) {
  AttentionBackend b = resolve_attention_backend("kernels-community/flash-attn", "cuda");
  ::testing::internal::CaptureStderr();
  log_attention_notice_once(b);
  log_attention_notice_once(b);
  log_attention_notice_once(resolve_attention_backend("sdpa", "cuda"));
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_EQ(err.rfind("hipformers: the package flash_attn seems to be not installed", 0), 0u) << err;
}

}  // namespace
}  // namespace hipformers::kernels
