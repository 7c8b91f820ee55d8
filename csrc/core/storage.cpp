#include "core/storage.h"

#include <cstdlib>
#include <new>

namespace fg {

namespace {
constexpr size_t kAlignment = 64;
void free_aligned(void* ctx) { std::free(ctx); }
}  // namespace

std::shared_ptr<Storage> Storage::allocate(size_t nbytes) {
  // aligned_alloc wants a size that is a multiple of the alignment; never ask for zero bytes.
  size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  void* data = std::aligned_alloc(kAlignment, rounded);
  if (!data) throw std::bad_alloc();
  return std::make_shared<Storage>(data, nbytes, free_aligned, data);
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, void (*release)(void*), void* ctx) {
  return std::make_shared<Storage>(data, nbytes, release, ctx);
}

Storage::~Storage() {
  if (release_) release_(ctx_);
}

}  // namespace fg
