// io::PrivateDirectory: a directory only this process can enter, under $TMPDIR, gone with its
// contents when the object goes; those that killed processes left behind are removed, others kept.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "leanseq/core/io.h"

namespace fs = std::filesystem;

TEST(PrivateDirectory, IsPrivateGoesWithItsContentsAndSweepsDeadProcessesOnes) {
  const std::string parent = fs::temp_directory_path().string() + "/leanseq-privdir-test-" + std::to_string(::getpid());
  fs::create_directories(parent);
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old ? old : "";
  ::setenv("TMPDIR", parent.c_str(), 1);
  // A process id that no process has: that of a child that has ended.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  int status = 0;
  ::waitpid(dead, &status, 0);
  const std::string stale = parent + "/leanseq-x-" + std::to_string(dead) + "-abcdef";
  const std::string alive = parent + "/leanseq-x-" + std::to_string(::getppid()) + "-abcdef";
  const std::string other = parent + "/leanseq-y-" + std::to_string(dead) + "-abcdef";
  for (const auto& d : {stale, alive, other}) fs::create_directories(d);
  std::string made;
  {
    leanseq::io::PrivateDirectory dir("leanseq-x");
    made = dir.path();
    EXPECT_EQ(made.rfind(parent + "/leanseq-x-" + std::to_string(::getpid()) + "-", 0), 0u) << made;
    struct stat st {};
    ASSERT_EQ(::stat(made.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    std::ofstream(made + "/file") << "x";
    EXPECT_FALSE(fs::exists(stale));  // its process has ended
    EXPECT_TRUE(fs::exists(alive));   // its process runs
    EXPECT_TRUE(fs::exists(other));   // another prefix
  }
  EXPECT_FALSE(fs::exists(made));
  if (old) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
  fs::remove_all(parent);
}
