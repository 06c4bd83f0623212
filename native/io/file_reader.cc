#include "io/file_reader.h"

#include <algorithm>

#include "common/error.h"

namespace tessera {

FileSet::FileSet(const std::vector<std::string>& paths) : paths_(paths) {
  for (const auto& p : paths) {
    auto give_up = [&](Code code, const std::string& why) {
      for (auto f : fds_) platform::close_file(f);
      fds_.clear();
      fail(code, "weights file '" + p + "' " + why);
    };
    // Never blocks on a FIFO put in the file's place since TypeScript checked it, and reads only a
    // regular file (a device would never end).
    platform::FileHandle fd = platform::kNoFile;
    uint64_t size = 0;
    const platform::Open opened = platform::open_read(p, &fd, &size);
    if (opened == platform::Open::Failed) give_up(Code::ModelNotFound, "cannot be opened: " + platform::last_error());
    if (opened == platform::Open::NotRegular)
      give_up(Code::ModelFormat, "is not a regular file (a FIFO, device, socket or directory)");
    fds_.push_back(fd);
    sizes_.push_back(size);
  }
}

FileSet::~FileSet() {
  for (auto fd : fds_) platform::close_file(fd);
}

uint64_t FileSet::size(int file) const { return sizes_.at(size_t(file)); }

void FileSet::read(int file, uint64_t offset, uint64_t length, void* dst) const {
  platform::FileHandle fd = fds_.at(size_t(file));
  auto* p = static_cast<char*>(dst);
  uint64_t done = 0;
  while (done < length) {
    size_t chunk = size_t(std::min<uint64_t>(length - done, 1u << 30));
    int64_t n = pread_(fd, p + done, chunk, offset + done);
    if (n <= 0) {
      std::string why = n < 0 ? platform::last_error() : "the file ended early (changed after open?)";
      fail(Code::WeightsCorrupt, "short read of '" + paths_[size_t(file)] + "' at bytes [" + std::to_string(offset) +
                                     ", " + std::to_string(offset + length) + "): " + why);
    }
    done += uint64_t(n);
  }
}

}  // namespace tessera
