// The step trace where it is not built (kernels/step_trace.h): arming it is
// an error naming the option that builds it. The recording build's host
// side is step_trace_gpu.cu.
#include "hipformers/kernels/step_trace.h"

#include "hipformers/core/error.h"

namespace hipformers::kernels {
#if !defined(HIPFORMERS_STEP_TRACE)
void step_trace_arm(int) {
  throw_error(ErrorKind::kUnsupported,
              "HIPFORMERS_STEP_TRACE_FILE: this build records no step trace (configure CUDA with "
              "-DHIPFORMERS_STEP_TRACE=ON)");
}
std::size_t step_trace_write(int, const std::string&) { return 0; }
#endif
}  // namespace hipformers::kernels
