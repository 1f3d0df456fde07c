#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "hipformers/core/error.h"
#include "hipformers/core/tensor.h"
#include "hipformers/runtime/allocator.h"

namespace hipformers {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Tensor, ShapeNumelAndLimits) {
  Tensor t = Tensor::zeros({2, 3, 4}, DType::kF32);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.raw_data()) % 64, 0u);
  EXPECT_THROW(Shape({1, 2, 3, 4, 5, 6}), Error);
  EXPECT_THROW(t.reshape({5, 5}), Error);
  EXPECT_THROW(t.data<int32_t>(), Error);
}

TEST(Tensor, SliceRowsSharesStorage) {
  Tensor t = Tensor::empty({4, 3}, DType::kF32);
  for (int i = 0; i < 12; ++i) t.mutable_data<float>()[i] = static_cast<float>(i + 1);
  Tensor rows = t.slice_rows(1, 3);
  EXPECT_EQ(rows.shape(), Shape({2, 3}));
  EXPECT_EQ(rows.data<float>()[0], 4.0f);
  rows.mutable_data<float>()[0] = -1;
  EXPECT_EQ(t.data<float>()[3], -1.0f);
  EXPECT_THROW(t.slice_rows(3, 5), Error);
}

TEST(Tensor, BorrowedStorageIsReadOnlyAndKeepsOwnerAlive) {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3});
  std::weak_ptr<std::vector<float>> watch = owner;
  Tensor t(Buffer::borrow(owner->data(), 12, Device::cpu(), owner), {3}, DType::kF32);
  owner.reset();
  EXPECT_FALSE(watch.expired());
  EXPECT_EQ(t.data<float>()[2], 3.0f);
  EXPECT_THROW(t.mutable_data<float>(), Error);
}

TEST(Tensor, AllocationFailureIsOutOfMemoryWithByteCount) {
  const std::size_t huge = std::numeric_limits<std::size_t>::max() / 4;
  try {
    host_allocator().allocate(huge);
    FAIL() << "allocation of " << huge << " bytes succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find(std::to_string(huge)), std::string::npos) << e.what();
  }
}

TEST(Tensor, DeviceAllocatorMissingIsAClearError) {
  EXPECT_THROW(allocator_for(Device::gpu(0)), Error);
  EXPECT_EQ(empty_tensor({2}, DType::kF32, Device::cpu()).numel(), 2);
}

TEST(Conversions, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(from_bits(0x3f808000u)), 0x3f80);  // halfway, even below
  EXPECT_EQ(float_to_bf16(from_bits(0x3f818000u)), 0x3f82);  // halfway, even above
  EXPECT_EQ(float_to_bf16(from_bits(0x3f808001u)), 0x3f81);  // just above halfway
  EXPECT_EQ(float_to_bf16(-2.5f), 0xc020);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  EXPECT_EQ(bf16_to_float(float_to_bf16(std::numeric_limits<float>::infinity())),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(bf16_to_float(0x4049), 3.140625f);
}

TEST(Conversions, F16RoundsToNearestEvenWithSubnormalsAndOverflow) {
  EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);  // rounds up to inf
  EXPECT_EQ(float_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // halfway, even below
  EXPECT_EQ(float_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // halfway, even above
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -24)), 0x0001);             // smallest subnormal
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000);             // tie to even: 0
  EXPECT_EQ(float_to_f16(3 * std::ldexp(1.0f, -25)), 0x0002);         // tie to even: 2
  EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
  for (uint32_t h = 0; h < 0x7c00; ++h)  // every finite positive half round-trips
    ASSERT_EQ(float_to_f16(f16_to_float(static_cast<uint16_t>(h))), h) << h;
}

TEST(Conversions, TensorToDtypeRoundTrips) {
  Tensor t = Tensor::empty({3}, DType::kF32);
  float* p = t.mutable_data<float>();
  p[0] = 1.00390625f;  // 1 + 2^-8: halfway in bf16
  p[1] = -3.3f;
  p[2] = 1e-3f;
  Tensor b = t.to(DType::kBF16).to(DType::kF32);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(b.data<float>()[i], round_to_dtype(p[i], DType::kBF16));
  EXPECT_EQ(b.data<float>()[0], 1.0f);
  EXPECT_THROW(t.to(DType::kI32), Error);
}

}  // namespace
}  // namespace hipformers
