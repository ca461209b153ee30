// `leanseq train --nproc N`: starts N worker processes of this executable on this machine with the
// environment an external launcher such as torchrun would set (RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT), forwards SIGINT/SIGTERM to them and waits for them. When one worker
// fails, the others are asked to stop (SIGTERM) and killed after `grace`.
#pragma once
#include <chrono>
#include <string>
#include <vector>

namespace leanseq::train {

// A TCP port that is free on the loopback interface now (the OS picks it).
int free_loopback_port();

// `argv` is the worker's command line (argv[0] included, --nproc removed). Returns the launcher's
// exit code: 0 when every worker succeeded; otherwise that of the first worker to fail (128 +
// signal number when it was killed), after a log line naming its rank; 128 + signal number when
// the launcher itself was asked to stop.
int launch_local_workers(int nproc, const std::vector<std::string>& argv, std::chrono::seconds grace);

}  // namespace leanseq::train
