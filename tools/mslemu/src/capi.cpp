// The C interface of libtessera_mslemu.so (native/metal/mslemu_api.h) over the emulator's C++ API.
#include <cstring>

#include "metal/mslemu_api.h"
#include "mslemu/run.h"

extern "C" {

__attribute__((visibility("default"))) uint32_t mslemu_abi(void) { return TESSERA_MSLEMU_ABI; }

__attribute__((visibility("default"))) int32_t mslemu_kernel(const char* name, MslemuKernel* out) {
  const mslemu::KernelEntry* k = mslemu::find_kernel(name);
  if (!k) return 0;
  if (out) *out = MslemuKernel{k->name, k->file, k->line, k->max_threads};
  return 1;
}

__attribute__((visibility("default"))) int32_t mslemu_run(const MslemuDispatch* d, const MslemuOptions* o, MslemuCounts* counts, char* err, size_t err_len) {
  mslemu::Dispatch x;
  x.kernel = d->kernel;
  for (uint32_t i = 0; i < d->nbuffers; i++) x.buffers.push_back({int(d->buffers[i].index), d->buffers[i].ptr, size_t(d->buffers[i].bytes)});
  for (uint32_t i = 0; i < d->ntgmem; i++) x.tgmem.push_back({int(d->tgmem[i].index), size_t(d->tgmem[i].bytes)});
  x.groups = {d->groups[0], d->groups[1], d->groups[2]};
  x.threads = {d->threads[0], d->threads[1], d->threads[2]};
  mslemu::RunOptions ro;
  ro.sched = o->schedule == 1 ? mslemu::Schedule::Reverse : o->schedule == 2 ? mslemu::Schedule::Shuffled : mslemu::Schedule::Forward;
  ro.seed = o->seed;
  ro.poison = o->poison;
  ro.workers = o->workers;
  ro.count_classes = o->count_classes != 0;
  const bool known = mslemu::find_kernel(d->kernel) != nullptr;
  mslemu::Counts c;
  std::string e = mslemu::run(x, ro, counts ? &c : nullptr);
  if (counts) *counts = MslemuCounts{c.dev_read, c.dev_write, c.tg_read, c.tg_write, c.mma, c.fma, c.alu, c.special, c.tg_barriers, c.simd_barriers};
  if (e.empty()) return 0;
  if (err && err_len) {
    std::strncpy(err, e.c_str(), err_len - 1);
    err[err_len - 1] = 0;
  }
  return known ? 1 : 2;
}
}
