#include "image/preprocess.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/patch_layout.h"
#include "common/thread_pool.h"
#include "image/resize.h"

namespace tessera {
namespace image {
namespace {

// Image work gets one pool for the process, created on first use, one image at a time
// (ThreadPool loops are not re-entrant; concurrent calls queue on the mutex).
std::mutex g_pool_mu;
std::unique_ptr<ThreadPool> g_pool;
#if defined(_WIN32)
// A DLL's static destructors run after ExitProcess has ended the process's other threads: joining the
// pool's workers then never returns (node.exe hangs at exit), so on Windows the pool is left to the
// process's end. Destroyed before g_pool (constructed after it), this lets go of it first.
struct KeepPoolAtExit {
  ~KeepPoolAtExit() { (void)g_pool.release(); }
} g_keep_pool_at_exit;
#endif

// Largest side we accept anywhere: keeps every index product inside size_t and int32 arithmetic
// (TypeScript refuses far smaller images first; this guards the native entry point itself).
constexpr int kMaxSide = 1 << 20;

std::string dims(int w, int h) { return std::to_string(w) + "x" + std::to_string(h); }

}  // namespace

OutputShape output_shape(const PreprocessRequest& r) {
  if (r.width <= 0 || r.height <= 0 || r.width > kMaxSide || r.height > kMaxSide)
    fail(Code::InvalidArgument, "preprocess: decoded size " + dims(r.width, r.height) + " out of range");
  if (r.target_width <= 0 || r.target_height <= 0 || r.target_width > kMaxSide || r.target_height > kMaxSide)
    fail(Code::InvalidArgument, "preprocess: target size " + dims(r.target_width, r.target_height) + " out of range");
  const size_t need = size_t(r.width) * size_t(r.height) * channels_of(r.format) * bytes_per_sample(r.format);
  if (!r.pixels || r.pixel_bytes != need)
    fail(Code::InvalidArgument, "preprocess: pixel buffer holds " + std::to_string(r.pixel_bytes) + " bytes, " +
                                    dims(r.width, r.height) + " needs " + std::to_string(need));
  OutputShape s;
  if (r.layout == Layout::Qwen) {
    const QwenLayout& l = r.qwen;
    if (l.patch <= 0 || l.merge <= 0 || l.temporal <= 0 || l.patch > 1024 || l.merge > 64 || l.temporal > 64)
      fail(Code::InvalidArgument, "preprocess (qwen): bad patch/merge/temporal sizes");
    const int f = l.patch * l.merge;
    if (r.target_width % f || r.target_height % f)
      fail(Code::InvalidArgument, "preprocess (qwen): target " + dims(r.target_width, r.target_height) +
                                      " is not a multiple of " + std::to_string(f));
    s.rows = size_t(r.target_height / l.patch) * size_t(r.target_width / l.patch);
    s.row_len = size_t(patch_row_width(kImageChannels, l.temporal, l.patch));
  } else {
    if (r.patch <= 0 || r.patch > 1024) fail(Code::InvalidArgument, "preprocess (gemma): bad patch size");
    if (r.target_width % r.patch || r.target_height % r.patch)
      fail(Code::InvalidArgument, "preprocess (gemma): target " + dims(r.target_width, r.target_height) +
                                      " is not a multiple of " + std::to_string(r.patch));
    s.rows = size_t(r.target_height / r.patch) * size_t(r.target_width / r.patch);
    s.row_len = size_t(patch_row_width(kImageChannels, 1, r.patch));
  }
  return s;
}

void run_preprocess(const PreprocessRequest& r, void* out, int32_t* positions, ThreadPool* pool) {
  output_shape(r);
  // 1. RGB8 (a view when the decoder already gave RGB8).
  // Scratch images are left uninitialised (every byte is written): zero-filling 36 MB for a
  // 12 MP photo costs as much as the resize itself.
  std::unique_ptr<uint8_t[]> rgb_store;
  const uint8_t* rgb = static_cast<const uint8_t*>(r.pixels);
  if (r.format != PixelFormat::RGB8) {
    rgb_store.reset(new uint8_t[size_t(r.width) * r.height * 3]);
    to_rgb8(r.pixels, r.format, r.width, r.height, rgb_store.get(), pool,
            r.has_transparent_rgb ? r.transparent_rgb : nullptr);
    rgb = rgb_store.get();
  }
  // 2. Resize (skipped, not copied, when the size is unchanged: Pillow's copy is the identity).
  std::unique_ptr<uint8_t[]> resized_store;
  const uint8_t* img = rgb;
  if (r.target_width != r.width || r.target_height != r.height) {
    resized_store.reset(new uint8_t[size_t(r.target_width) * r.target_height * 3]);
    resize_bicubic_rgb8(rgb, r.width, r.height, resized_store.get(), r.target_width, r.target_height, pool);
    img = resized_store.get();
    rgb_store.reset();
  }
  // 3. Values and layout.
  const int tw = r.target_width, th = r.target_height;
  if (r.layout == Layout::Qwen) {
    if (r.bytes_out) {
      patchify_qwen(img, tw, th, r.qwen, static_cast<uint8_t*>(out), pool);
    } else {
      auto lut = build_lut(r.normalize);
      patchify_qwen(img, tw, th, r.qwen, lut.data(), static_cast<float*>(out), pool);
    }
  } else {
    if (r.bytes_out) {
      patchify_gemma(img, tw, th, r.patch, static_cast<uint8_t*>(out), positions, pool);
    } else {
      auto lut = build_lut(r.normalize);
      patchify_gemma(img, tw, th, r.patch, lut.data(), static_cast<float*>(out), positions, pool);
    }
  }
}

void run_preprocess(const PreprocessRequest& r, void* out, int32_t* positions) {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (!g_pool) g_pool = std::make_unique<ThreadPool>(0);
  run_preprocess(r, out, positions, g_pool.get());
}

}  // namespace image
}  // namespace tessera
