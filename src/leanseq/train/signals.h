// SIGINT/SIGTERM turn into a stop request that the trainer honours at the next update boundary.
#pragma once

namespace leanseq::train {

void install_stop_handlers();
// The signal number received, or 0.
int stop_signal();
void clear_stop_signal();

}  // namespace leanseq::train
