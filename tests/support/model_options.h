// ModelLoadOptions from the three fields tests set (aggregate initialisation
// with fewer fields draws -Wmissing-field-initializers).
#pragma once

#include "hipformers/models/causal_lm.h"

namespace hipformers::testing {

inline ModelLoadOptions load_options(DType dtype, Device device = Device::cpu(),
                                     AttnImplementation attn = AttnImplementation::kSdpa) {
  ModelLoadOptions o;
  o.dtype = dtype;
  o.device = device;
  o.attn_implementation = attn;
  return o;
}

}  // namespace hipformers::testing
