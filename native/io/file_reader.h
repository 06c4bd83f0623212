// Positional reads of named byte ranges from the tower's weight files: the only way weights get
// from disk into memory in the resident and stream stores. Short reads, files that shrank after
// open and I/O errors become ERR_WEIGHTS_CORRUPT naming the file and the range.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/platform.h"

namespace tessera {

class FileSet {
 public:
  explicit FileSet(const std::vector<std::string>& paths);  // opens all; missing → ERR_MODEL_NOT_FOUND
  ~FileSet();
  FileSet(const FileSet&) = delete;
  FileSet& operator=(const FileSet&) = delete;

  // Reads exactly `length` bytes at `offset` of file `file` into dst (platform::read_at).
  void read(int file, uint64_t offset, uint64_t length, void* dst) const;
  uint64_t size(int file) const;  // the size at open
  platform::FileHandle handle(int file) const { return fds_.at(size_t(file)); }
  const std::string& path(int file) const { return paths_.at(size_t(file)); }
  size_t count() const { return fds_.size(); }

  // The positional read every read goes through: tests swap in one that returns short counts or errors.
  using PreadFn = int64_t (*)(platform::FileHandle file, void* buf, size_t count, uint64_t offset);
  void set_pread(PreadFn fn) { pread_ = fn; }

 private:
  std::vector<std::string> paths_;
  std::vector<platform::FileHandle> fds_;
  std::vector<uint64_t> sizes_;
  PreadFn pread_ = platform::read_at;
};

}  // namespace tessera
