#include "io/file_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "common/error.h"

namespace tessera {

FileSet::FileSet(const std::vector<std::string>& paths) : paths_(paths) {
  for (const auto& p : paths) {
    auto give_up = [&](Code code, const std::string& why) {
      for (int f : fds_) ::close(f);
      fds_.clear();
      fail(code, "weights file '" + p + "' " + why);
    };
    // Non-blocking, so that a FIFO put in the file's place since TypeScript checked it cannot
    // hang the open; then only a regular file is read (a device would never end).
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) give_up(Code::ModelNotFound, std::string("cannot be opened: ") + std::strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      give_up(Code::ModelFormat, "is not a regular file (a FIFO, device, socket or directory)");
    }
    fds_.push_back(fd);
    sizes_.push_back(uint64_t(st.st_size));
  }
}

FileSet::~FileSet() {
  for (int fd : fds_) ::close(fd);
}

uint64_t FileSet::size(int file) const { return sizes_.at(size_t(file)); }

void FileSet::read(int file, uint64_t offset, uint64_t length, void* dst) const {
  int fd = fds_.at(size_t(file));
  auto* p = static_cast<char*>(dst);
  uint64_t done = 0;
  while (done < length) {
    size_t chunk = size_t(std::min<uint64_t>(length - done, 1u << 30));
    ssize_t n = pread_(fd, p + done, chunk, off_t(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = n < 0 ? std::strerror(errno) : "the file ended early (changed after open?)";
      fail(Code::WeightsCorrupt, "short read of '" + paths_[size_t(file)] + "' at bytes [" + std::to_string(offset) +
                                     ", " + std::to_string(offset + length) + "): " + why);
    }
    done += uint64_t(n);
  }
}

}  // namespace tessera
