// SIGINT/SIGTERM for the train command: the first asks the trainer to stop after the current step and
// write a checkpoint (train/stop_request.h); a second one ends the process at once.
#pragma once

namespace gpt {

// data_parallel: the checkpoint takes every rank, and a launcher signals the survivors when a rank dies,
// so the message promises it only if the other ranks are still there.
void install_stop_signal_handlers(bool data_parallel = false);

}  // namespace gpt
