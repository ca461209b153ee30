#include "leanseq/train/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

#include "leanseq/core/error.h"
#include "leanseq/core/logging.h"

namespace leanseq::train {

// A TCP port that is free on the loopback interface now (the OS picks it).
int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error("cannot open a socket to find a free port");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  if (port < 0) throw Error("cannot find a free port on 127.0.0.1 (set MASTER_PORT)");
  return port;
}

namespace {
std::atomic<int> g_launcher_signal{0};
void on_launcher_signal(int sig) { g_launcher_signal.store(sig); }

std::string describe(int status) {
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

int exit_code_of(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }
}  // namespace

int launch_local_workers(int nproc, const std::vector<std::string>& argv, std::chrono::seconds grace) {
  const char* port_env = std::getenv("MASTER_PORT");
  const std::string port = port_env && *port_env ? port_env : std::to_string(free_loopback_port());
  const char* addr_env = std::getenv("MASTER_ADDR");
  const std::string addr = addr_env && *addr_env ? addr_env : "127.0.0.1";
  // Each worker gets its share of the cores for OpenMP/OpenBLAS unless the user chose.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::string threads = std::to_string(std::max(1u, cores / static_cast<unsigned>(nproc)));

  struct sigaction sa {};
  sa.sa_handler = on_launcher_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::vector<pid_t> pids(static_cast<size_t>(nproc), -1);
  std::vector<bool> running(static_cast<size_t>(nproc), false);
  for (int r = 0; r < nproc; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) throw Error("--nproc: fork failed for rank " + std::to_string(r));
    if (pid == 0) {
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("MASTER_ADDR", addr.c_str(), 1);
      ::setenv("MASTER_PORT", port.c_str(), 1);
      ::setenv("OMP_NUM_THREADS", threads.c_str(), 0);
      ::setenv("OPENBLAS_NUM_THREADS", threads.c_str(), 0);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv("/proc/self/exe", args.data());
      _exit(127);
    }
    pids[static_cast<size_t>(r)] = pid;
    running[static_cast<size_t>(r)] = true;
  }
  log::info("started " + std::to_string(nproc) + " workers (rendezvous " + addr + ":" + port + "); pids " +
            [&] {
              std::string s;
              for (int r = 0; r < nproc; ++r) s += (r ? " " : "") + std::to_string(pids[static_cast<size_t>(r)]);
              return s;
            }());

  auto signal_running = [&](int sig) {
    for (int r = 0; r < nproc; ++r) {
      if (running[static_cast<size_t>(r)]) ::kill(pids[static_cast<size_t>(r)], sig);
    }
  };
  int failed_rank = -1, failed_status = 0, forwarded = 0;
  std::chrono::steady_clock::time_point kill_at{};
  bool killed = false;
  int alive = nproc;
  while (alive > 0) {
    if (int sig = g_launcher_signal.load(); sig && !forwarded) {
      forwarded = sig;
      log::warn("signal " + std::to_string(sig) + " received: passing it on to the workers");
      signal_running(sig);
      kill_at = std::chrono::steady_clock::now() + grace;
    }
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      auto it = std::find(pids.begin(), pids.end(), pid);
      if (it == pids.end()) continue;
      const int r = static_cast<int>(it - pids.begin());
      running[static_cast<size_t>(r)] = false;
      --alive;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && failed_rank < 0 && !forwarded) {
        failed_rank = r, failed_status = status;
        log::error("rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") " + describe(status) +
                   "; stopping the other workers");
        signal_running(SIGTERM);
        kill_at = std::chrono::steady_clock::now() + grace;
      }
      continue;
    }
    if ((failed_rank >= 0 || forwarded) && !killed && std::chrono::steady_clock::now() >= kill_at) {
      log::warn("workers still running " + std::to_string(grace.count()) + " s after the stop request: killing them");
      signal_running(SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (failed_rank >= 0) {
    log::error("distributed training failed: rank " + std::to_string(failed_rank) + " " + describe(failed_status));
    return exit_code_of(failed_status);
  }
  return forwarded ? 128 + forwarded : 0;
}

}  // namespace leanseq::train
