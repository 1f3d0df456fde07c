// The persistent decode step (decode_step.h) exists only in GPU builds
// (decode_step_gpu.cu); a CPU-only build says so.
#include "hipformers/kernels/decode_step.h"

#include "backend.h"
#include "hipformers/core/error.h"

#if !defined(HF_GPU_KERNELS)
namespace hipformers::kernels {

struct DecodeStep::State {};

bool decode_step_supported(const DecodeModelWeights&, int64_t) { return false; }

DecodeStep::DecodeStep(const DecodeModelWeights&, const std::vector<PagedKVLayer>&) {
  throw_error(ErrorKind::kUnsupported, "the persistent decode step needs a GPU build");
}
DecodeStep::~DecodeStep() = default;
bool DecodeStep::made_for(const std::vector<PagedKVLayer>&) const { return false; }
bool DecodeStep::supports_rows(int64_t) const { return false; }
void DecodeStep::run(DecodeStepBuffers&, const PagedBatch&, const Tensor&, float) const {
  throw_error(ErrorKind::kUnsupported, "the persistent decode step needs a GPU build");
}

}  // namespace hipformers::kernels
#endif
