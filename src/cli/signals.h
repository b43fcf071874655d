// SIGINT/SIGTERM for the train command: the first asks the trainer to stop after the current step and
// write a checkpoint (train/stop_request.h); a second one ends the process at once.
#pragma once

namespace gpt {

void install_stop_signal_handlers();

}  // namespace gpt
