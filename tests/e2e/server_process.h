// `leanseq serve` started in the background on loopback for the end-to-end tests.
#pragma once
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>

#include "e2e/task.h"

extern char** environ;

namespace leanseq::test {

// A server started in the background; stopped with SIGTERM by stop() or the destructor.
class ServerProcess {
 public:
  // `models`: the flags naming what it serves (default: --checkpoint with the tiny checkpoint).
  ServerProcess(const std::string& flags, const std::string& dir, const std::string& models = "")
      : log_(dir + "/serve.log") {
    const std::string cmd = "exec " + leanseq::test::kCli + " serve " +
                            (models.empty() ? "--checkpoint " + leanseq::test::tiny_checkpoint() : models) +
                            " --host 127.0.0.1 --port 0 " + flags + " > " + log_ + " 2>&1";
    const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
    EXPECT_EQ(posix_spawn(&pid_, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
    const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)/");
    for (int i = 0; i < 300 && port_ == 0; ++i) {
      std::smatch m;
      const std::string text = leanseq::test::read_text(log_);
      if (std::regex_search(text, m, listening)) port_ = std::stoi(m[1]);
      if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_GT(port_, 0) << leanseq::test::read_text(log_);
  }
  ~ServerProcess() {
    if (pid_ > 0) stop();
  }
  int port() const { return port_; }
  // SIGTERM; the exit status (-1 if it did not end within 20 s).
  int stop() {
    kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 200; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return -1;
  }
  std::string log() const { return leanseq::test::read_text(log_); }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// A raw TCP connection to the server, for clients no HTTP library would be.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawConnection() { ::close(fd_); }
  RawConnection(const RawConnection&) = delete;
  bool connected() const { return connected_; }
  bool send(const std::string& s) { return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size()); }
  // What the server sends until it closes or 5 s pass without a byte.
  std::string receive() {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd_, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
    return out;
  }
  // Whether the server has closed the connection (a read returns end of file at once).
  bool closed_by_server() {
    char c;
    return ::recv(fd_, &c, 1, MSG_DONTWAIT) == 0;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// Seconds a GET /health takes on a new connection (-1: no answer).
inline double health_seconds(int port) {
  const auto start = std::chrono::steady_clock::now();
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5, 0);
  c.set_read_timeout(5, 0);
  auto r = c.Get("/health");
  if (!r || r->status != 200) return -1;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace leanseq::test
