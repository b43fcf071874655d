// model.init_from fills the model section, as transformers' from_pretrained takes the shape from the
// checkpoint: every shape key the config does not write comes from the checkpoint's headers, and every one
// it writes must agree. It runs at config load, before validation, so plan, train, sample and export all see
// the checkpoint's real shape.
#pragma once

#include "config/config.h"
#include "config/validate.h"

namespace gpt::config_detail {

// Fills model from model.init_from's headers (nothing when init_from is empty), records in origins where each
// filled key came from, and logs one line naming the keys taken. Throws, naming the key, where it was written
// and the checkpoint's value and file, for a written key that disagrees; for a key that is not written and that
// the checkpoint cannot give (n_head of a bare .safetensors file); and for an init_from that does not exist
// unless every shape key is written (a run's saved config.yaml, whose base may since have moved, still loads).
void fill_model_from_checkpoint(ModelConfig& model, KeyOrigins& origins);

}  // namespace gpt::config_detail
