// The scripted chat-completions server (openai_server.py) as a child process
// on a loopback port, and a plain HTTP client for its /log and /reset.
#pragma once

#include <curl/curl.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

#include "kforge/core/document.h"

namespace kforge::rollout::testing {

class OpenAiTestServer {
 public:
  OpenAiTestServer() {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      const std::string script = std::string(KFORGE_SOURCE_DIR) + "/tests/rollout/policy/openai_server.py";
      execl(KFORGE_PYTHON, KFORGE_PYTHON, script.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    stdout_ = out[0];
    // "PORT <n>\n", within 30 s.
    std::string line;
    pollfd p{stdout_, POLLIN, 0};
    while (line.find('\n') == std::string::npos) {
      if (poll(&p, 1, 30000) <= 0) throw std::runtime_error("the test server did not start");
      char buf[64];
      const ssize_t n = read(stdout_, buf, sizeof(buf));
      if (n <= 0) throw std::runtime_error("the test server exited at start");
      line.append(buf, static_cast<size_t>(n));
    }
    port_ = std::stoi(line.substr(5));
  }
  ~OpenAiTestServer() {
    close(stdin_);  // the server exits when its stdin closes
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    close(stdout_);
  }
  OpenAiTestServer(const OpenAiTestServer&) = delete;
  OpenAiTestServer& operator=(const OpenAiTestServer&) = delete;

  int port() const { return port_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }

  // {"requests": [{"path", "headers", "body", "t", "key"}], "max_inflight"}
  json log() const { return json::parse(http("GET", "/log")); }
  void reset() const { http("POST", "/reset"); }

 private:
  static size_t collect(char* data, size_t size, size_t n, void* user) {
    static_cast<std::string*>(user)->append(data, size * n);
    return size * n;
  }
  std::string http(const std::string& method, const std::string& path) const {
    CURL* c = curl_easy_init();
    std::string body;
    const std::string url = "http://127.0.0.1:" + std::to_string(port_) + path;
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    if (method == "POST") curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{}");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &OpenAiTestServer::collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    const CURLcode rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) throw std::runtime_error(std::string("test server ") + path + ": " + curl_easy_strerror(rc));
    return body;
  }

  pid_t pid_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
  int port_ = 0;
};

}  // namespace kforge::rollout::testing
