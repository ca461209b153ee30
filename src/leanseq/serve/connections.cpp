#include "leanseq/serve/connections.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace leanseq::serve {

namespace {
using Clock = std::chrono::steady_clock;

// The connection served on this thread, and its server.
struct Current {
  GuardedHttpServer* server = nullptr;
  void* connection = nullptr;
};
thread_local Current current;

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Whether `sock` becomes readable (or closed) within `timeout`.
bool wait_for(int sock, short events, Clock::duration timeout) {
  pollfd p{sock, events, 0};
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
  int r;
  do {
    r = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, ms)));
  } while (r < 0 && errno == EINTR);
  return r > 0;
}

void address_of(int sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if ((peer ? ::getpeername(sock, reinterpret_cast<sockaddr*>(&addr), &len)
            : ::getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len)) != 0) {
    return;
  }
  char text[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    port = ntohs(a->sin6_port);
  }
  ip = text;
}

// A connected socket as httplib's request parser reads and writes it: each read or write waits at
// most its timeout.
class SocketStream : public httplib::Stream {
 public:
  SocketStream(int sock, Clock::duration read_timeout, Clock::duration write_timeout)
      : sock_(sock), read_timeout_(read_timeout), write_timeout_(write_timeout) {}
  bool is_readable() const override { return wait_for(sock_, POLLIN, read_timeout_); }
  bool is_writable() const override { return wait_for(sock_, POLLOUT, write_timeout_); }
  ssize_t read(char* ptr, size_t size) override {
    if (!is_readable()) return -1;
    ssize_t n;
    do {
      n = ::recv(sock_, ptr, size, 0);
    } while (n < 0 && errno == EINTR);
    return n;
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do {
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(sock_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(sock_, false, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  int sock_;
  Clock::duration read_timeout_, write_timeout_;
};

// What a connection gets when no slot can be had: a complete answer, then the end.
constexpr char kBusy[] =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
    "Connection: close\r\nContent-Length: 62\r\n\r\n"
    "{\"error\":\"the server has too many connections; retry shortly\"}";
static_assert(sizeof("{\"error\":\"the server has too many connections; retry shortly\"}") - 1 == 62);
}  // namespace

GuardedHttpServer::GuardedHttpServer(ConnectionLimits limits) : limits_(limits) {
  // A thread for every slot, and a few for the connections being turned away or taking a slot
  // that is being freed.
  const size_t threads = static_cast<size_t>(limits_.max_connections) + 8;
  new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  watchdog_ = std::thread([this] { watch(); });
}

GuardedHttpServer::~GuardedHttpServer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  watchdog_.join();
}

ConnectionCounts GuardedHttpServer::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  ConnectionCounts c = counts_;
  c.open = static_cast<int64_t>(open_.size());
  return c;
}

void GuardedHttpServer::end_waiting_connections() {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = Clock::now();
  for (auto& c : open_) {
    // Not those writing an answer (their wait starts later): they end after it by themselves.
    if (c.phase == Phase::waiting && c.since <= now) ::shutdown(c.watch, SHUT_RDWR);
  }
}

GuardedHttpServer::Connection* GuardedHttpServer::admit(socket_t sock) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = Clock::now();
  if (static_cast<int>(open_.size()) >= limits_.max_connections) {
    // The slot of the connection that has waited longest for a request, if one is waiting.
    Connection* oldest = nullptr;
    for (auto& c : open_) {
      if (c.phase == Phase::waiting && c.since <= now && (!oldest || c.since < oldest->since)) oldest = &c;
    }
    if (!oldest) {
      ++counts_.refused;
      return nullptr;
    }
    ::shutdown(oldest->watch, SHUT_RDWR);
    oldest->phase = Phase::busy;  // on its way out: neither evicted nor timed out again
    ++counts_.evicted;
  }
  Connection c;
  c.watch = ::dup(sock);  // without it the watchdog could not end the connection: refused
  if (c.watch < 0) {
    ++counts_.refused;
    return nullptr;
  }
  c.since = now;
  open_.push_back(c);
  return &open_.back();
}

void GuardedHttpServer::release(Connection* c) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = open_.begin(); it != open_.end(); ++it) {
    if (&*it == c) {
      if (it->watch >= 0) ::close(it->watch);
      open_.erase(it);
      return;
    }
  }
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  Connection* c = admit(sock);
  if (!c) {
    (void)!::send(sock, kBusy, sizeof kBusy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return false;
  }
  current = {this, c};
  // Each read waits at most the shorter timeout; the watchdog bounds a whole head and body.
  SocketStream stream(sock, seconds(std::min(limits_.header_timeout_s, limits_.body_timeout_s)), seconds(10));
  bool ok = true;
  // Requests one after another while the client keeps the connection and sends the next in time.
  for (bool first = true; svr_sock_ != INVALID_SOCKET; first = false) {
    if (!wait_for(sock, POLLIN, seconds(first ? limits_.header_timeout_s : limits_.keep_alive_s))) break;
    bool closed = false;
    ok = process_request(stream, false, closed, nullptr);
    if (!ok || closed) break;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  current = {};
  release(c);
  return ok;
}

void GuardedHttpServer::set_phase(Phase p, Clock::duration delay) {
  if (!current.server) return;
  auto* server = current.server;
  std::lock_guard<std::mutex> lock(server->mutex_);
  auto* c = static_cast<Connection*>(current.connection);
  c->phase = p;
  c->since = Clock::now() + delay;
}

void GuardedHttpServer::head_read() { set_phase(Phase::body); }
void GuardedHttpServer::handling() { set_phase(Phase::busy); }
// The answer is written right after; the wait for the next request starts a moment later, so
// that a new connection does not take this slot while the answer goes out.
void GuardedHttpServer::answering() { set_phase(Phase::waiting, std::chrono::milliseconds(500)); }

void GuardedHttpServer::stop_reading() {
  if (!current.server) return;
  std::lock_guard<std::mutex> lock(current.server->mutex_);
  ::shutdown(static_cast<Connection*>(current.connection)->watch, SHUT_RD);
}

void GuardedHttpServer::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stopping_; })) {
    const auto now = Clock::now();
    for (auto& c : open_) {
      const bool late = (c.phase == Phase::waiting && now - c.since > seconds(limits_.header_timeout_s)) ||
                        (c.phase == Phase::body && now - c.since > seconds(limits_.body_timeout_s));
      if (late) {
        ::shutdown(c.watch, SHUT_RDWR);
        c.phase = Phase::busy;  // on its way out
        ++counts_.timed_out;
      }
    }
  }
}

}  // namespace leanseq::serve
