// The node arena: graph nodes are carved from 64 KiB slabs in 64-byte size classes and recycled
// through per-slab free lists, so steady-state training makes no heap calls for its graph. Slabs
// whose nodes are all released are kept for reuse up to a bound and returned to the heap past it;
// the slabs held are the `arena_bytes` statistic.
#pragma once
#include <cstddef>
#include <cstdint>

namespace fg {

void* arena_allocate(size_t nbytes);
void arena_deallocate(void* block, size_t nbytes);

struct ArenaStats {
  int64_t live_nodes;
  int64_t arena_bytes;
};
ArenaStats arena_stats();

}  // namespace fg
