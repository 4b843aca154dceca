// The output-path rule of src/core/files.hpp: regular files replaced atomically, links followed
// and kept, FIFOs written in place, directories, empty names and missing directories refused.
// Devices are reached only through links in a scratch directory, so that a writer that replaced
// what it writes would replace the link, never a node under /dev.
#include "samebits/errors.hpp"
#include "samebits/util/files.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using samebits::detail::check_writable;
using samebits::detail::OutputFile;
using samebits::detail::OutputTarget;
using samebits::detail::resolve_output;
using samebits::detail::write_whole_file;

namespace {

// A fresh scratch directory per test, removed afterwards.
class OutputFiles : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("samebits_output_files_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string at(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool partial_left(const fs::path& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".partial")
      return true;
  return false;
}

} // namespace

TEST_F(OutputFiles, NewAndRegularFilesAreReplacedWholeKeepingPermissions) {
  write_whole_file(at("a.json"), "one\n", "test");
  EXPECT_EQ(read_all(at("a.json")), "one\n");
  fs::permissions(at("a.json"),
                  fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  write_whole_file(at("a.json"), "two\n", "test");
  EXPECT_EQ(read_all(at("a.json")), "two\n");
  EXPECT_EQ(fs::status(at("a.json")).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_FALSE(partial_left(dir_));
}

TEST_F(OutputFiles, AnUncommittedFileLeavesThePathUntouched) {
  write_whole_file(at("a.json"), "before\n", "test");
  {
    OutputFile f(at("a.json"), "test");
    f.write("half");
  } // destroyed without commit: as a run that failed
  EXPECT_EQ(read_all(at("a.json")), "before\n");
  EXPECT_FALSE(partial_left(dir_));
}

TEST_F(OutputFiles, SymbolicLinksAreFollowedAndStayLinks) {
  fs::create_directories(dir_ / "sub");
  write_whole_file(at("sub/real.json"), "old\n", "test");
  fs::create_symlink("sub/real.json", dir_ / "link.json"); // relative to the link's directory
  fs::create_symlink("link.json", dir_ / "chain.json");    // a link to a link
  write_whole_file(at("chain.json"), "new\n", "test");
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.json"));
  EXPECT_TRUE(fs::is_symlink(dir_ / "chain.json"));
  EXPECT_EQ(read_all(at("sub/real.json")), "new\n");
  EXPECT_EQ(resolve_output(at("chain.json"), "test").path, at("sub/real.json"));
  // A dangling link: its target is created.
  fs::create_symlink("sub/new.json", dir_ / "dangling.json");
  write_whole_file(at("dangling.json"), "made\n", "test");
  EXPECT_TRUE(fs::is_symlink(dir_ / "dangling.json"));
  EXPECT_EQ(read_all(at("sub/new.json")), "made\n");
  EXPECT_FALSE(partial_left(dir_));
}

TEST_F(OutputFiles, AFifoIsWrittenInPlace) {
  ASSERT_EQ(::mkfifo(at("pipe").c_str(), 0600), 0);
  EXPECT_EQ(resolve_output(at("pipe"), "test").kind, OutputTarget::Kind::in_place);
  check_writable(at("pipe"), "test"); // must not open it (that would wait for a reader)
  std::string got;
  std::thread reader([&] { got = read_all(at("pipe")); });
  write_whole_file(at("pipe"), "through the pipe\n", "test");
  reader.join();
  EXPECT_EQ(got, "through the pipe\n");
  struct stat st {};
  ASSERT_EQ(::lstat(at("pipe").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  EXPECT_FALSE(partial_left(dir_));
}

TEST_F(OutputFiles, AFullDeviceGivesAnErrorAndStaysADevice) {
  if (::access("/dev/full", W_OK) != 0)
    GTEST_SKIP() << "no writable /dev/full here";
  fs::create_symlink("/dev/full", dir_ / "full");
  EXPECT_EQ(resolve_output(at("full"), "test").kind, OutputTarget::Kind::in_place);
  try {
    write_whole_file(at("full"), std::string(1 << 16, 'x'), "test");
    ADD_FAILURE() << "writing to /dev/full succeeded";
  } catch (const samebits::Error& e) {
    EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_symlink(dir_ / "full"));
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
}

TEST_F(OutputFiles, StandardOutputIsWrittenInPlace) {
  EXPECT_EQ(resolve_output("-", "test").kind, OutputTarget::Kind::standard_stream);
  EXPECT_EQ(resolve_output("-", "test").fd, 1);
  fs::create_symlink("/dev/stderr", dir_ / "err");
  const OutputTarget t = resolve_output(at("err"), "test");
  EXPECT_EQ(t.kind, OutputTarget::Kind::standard_stream);
  // Where stdout and stderr are one file (2>&1), the first stream that matches is taken.
  struct stat out {
  }, err{};
  const bool one_file = ::fstat(1, &out) == 0 && ::fstat(2, &err) == 0 &&
                        out.st_dev == err.st_dev && out.st_ino == err.st_ino;
  EXPECT_EQ(t.fd, one_file ? 1 : 2);
}

TEST_F(OutputFiles, DirectoriesEmptyNamesAndMissingDirectoriesAreRefused) {
  fs::create_directories(dir_ / "d");
  fs::create_symlink("d", dir_ / "to_d");
  for (const std::string& bad : {at("d"), at("to_d"), std::string(), at("no/such/file.json")}) {
    EXPECT_THROW(resolve_output(bad, "test"), samebits::InvalidArgument) << bad;
    if (!bad.empty()) { // empty: an option not given, which check_writable lets pass
      EXPECT_THROW(check_writable(bad, "test"), samebits::InvalidArgument) << bad;
    }
    EXPECT_THROW(write_whole_file(bad, "x", "test"), samebits::InvalidArgument) << bad;
  }
  EXPECT_FALSE(fs::exists(dir_ / "no")) << "a missing directory was created";
  try {
    check_writable(at("no/such/file.json"), "experiment --report");
  } catch (const samebits::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("experiment --report: '" + at("no/such/file.json") +
                                         "' cannot be written: the directory '" + at("no/such") +
                                         "' does not exist"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(OutputFiles, AReadOnlyFileIsNotReplaced) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root may write any file";
  write_whole_file(at("ro.json"), "keep\n", "test");
  fs::permissions(at("ro.json"), fs::perms::owner_read);
  EXPECT_THROW(check_writable(at("ro.json"), "test"), samebits::InvalidArgument);
}
