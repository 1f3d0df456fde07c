// The persistent decode step's host side (kernels/decode_step.h) where no
// GPU kernel exists: the switch that chooses it (short contexts unless told), and
// that a step it cannot take is refused with a reason, never run. Its GPU
// behaviour is tested in tests/models/gpu/decode_step_gpu_test.cc.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "hipformers/core/tensor.h"
#include "hipformers/kernels/decode_step.h"

namespace hipformers::kernels {
namespace {

PersistentDecode mode_with(const char* value) {
  if (value) ::setenv("HIPFORMERS_PERSISTENT_DECODE", value, 1);
  else ::unsetenv("HIPFORMERS_PERSISTENT_DECODE");
  const PersistentDecode m = persistent_decode_mode();
  ::unsetenv("HIPFORMERS_PERSISTENT_DECODE");
  return m;
}

TEST(DecodeStep, ShortContextsUnlessTold) {
  EXPECT_EQ(mode_with(nullptr), PersistentDecode::kShort);
  EXPECT_EQ(mode_with(""), PersistentDecode::kShort);
  EXPECT_EQ(mode_with("short"), PersistentDecode::kShort);
  EXPECT_EQ(mode_with("0"), PersistentDecode::kOff);
  EXPECT_EQ(mode_with("1"), PersistentDecode::kAuto);
  EXPECT_EQ(mode_with("require"), PersistentDecode::kRequire);
}

TEST(DecodeStep, NoWholeHeadContextWithoutAKernel) {
  EXPECT_EQ(decode_step_whole_head_keys(Device::cpu()), 0);
}

TEST(DecodeStep, CpuTensorsAreRefusedWithAReason) {
  Tensor hidden = Tensor::empty(Shape{1, 64}, DType::kBF16);
  DecodeStepArgs args;
  args.hidden = &hidden;
  std::string why;
  EXPECT_FALSE(decode_step_supported(args, DType::kBF16, &why));
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(decode_step_scratch_elems(2, 2, 4, 64, 128, Device::cpu()), 0);
  std::string launch_why;
  EXPECT_FALSE(decode_step(args, &launch_why));  // enqueues nothing
  EXPECT_EQ(launch_why, why);
}

}  // namespace
}  // namespace hipformers::kernels
