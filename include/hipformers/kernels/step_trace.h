// Developer tool: a per-block timeline of the kernels of one GPU step
// (src/kernels/gpu/step_trace.h says what is recorded). Records only in CUDA
// builds configured with -DHIPFORMERS_STEP_TRACE=ON; elsewhere arming is an
// kUnsupported Error. The engine traces one decode-graph replay when
// HIPFORMERS_STEP_TRACE_FILE names a file.
#pragma once

#include <cstddef>
#include <string>

namespace hipformers::kernels {

// Points every kernel unit at a fresh, zeroed buffer on `device` (fixed
// slots: 1024 kernels x 512 blocks x 4 events), from the next kernel on.
void step_trace_arm(int device);
// Waits for the device, writes the records as CSV
// (gridid,globaltimer_ns,clock,event,sm,block,grid) to `path`, and disarms.
// Returns the number of records written.
std::size_t step_trace_write(int device, const std::string& path);

}  // namespace hipformers::kernels
