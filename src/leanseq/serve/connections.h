// The HTTP server's connections, bounded: httplib's server with a fixed number of connections,
// each on its own thread, and a watchdog that ends the ones that stall. A connection that takes
// longer than `header_timeout` to send a request's headers (idle, or a slowloris dribbling a line
// at a time) or `body_timeout` to send its body is shut down. When every slot is taken, a new
// connection takes the slot of the one that has waited longest for its next request; when all
// are busy with requests, it is answered 503 at once. So idle and slow clients cannot starve
// others, and threads and sockets stay bounded.
#pragma once
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <list>
#include <mutex>
#include <thread>

namespace leanseq::serve {

struct ConnectionLimits {
  int max_connections = 64;
  double header_timeout_s = 10;  // from a connection's start or its last answer to a complete request head
  double body_timeout_s = 30;    // from the request head to the complete body
  double keep_alive_s = 5;       // how long an answered connection waits for the next request
};

struct ConnectionCounts {
  int64_t open = 0, refused = 0, evicted = 0, timed_out = 0;
};

class GuardedHttpServer : public httplib::Server {
 public:
  explicit GuardedHttpServer(ConnectionLimits limits);
  ~GuardedHttpServer() override;
  ConnectionCounts counts() const;
  // Ends the connections waiting for a request (after stop(): requests in flight finish).
  void end_waiting_connections();

  // Called by the handlers of the connection being served (on its thread): the request head is
  // read (its body comes next); a handler runs; the answer is about to be written.
  static void head_read();
  static void handling();
  static void answering();
  // No more requests on this connection after the answer (a body left unread).
  static void stop_reading();

 protected:
  bool process_and_close_socket(socket_t sock) override;

 private:
  enum class Phase { waiting, body, busy };
  struct Connection {
    int watch = -1;  // a duplicate of the socket's descriptor, for shutdown() from the watchdog
    Phase phase = Phase::waiting;
    std::chrono::steady_clock::time_point since;
  };
  Connection* admit(socket_t sock);
  void release(Connection* c);
  void watch();
  static void set_phase(Phase p, std::chrono::steady_clock::duration delay = {});

  ConnectionLimits limits_;
  mutable std::mutex mutex_;
  std::list<Connection> open_;
  ConnectionCounts counts_;
  std::condition_variable stop_;
  bool stopping_ = false;
  std::thread watchdog_;
};

}  // namespace leanseq::serve
