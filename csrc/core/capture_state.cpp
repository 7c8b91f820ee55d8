#include "core/capture_state.h"

namespace fg {

std::atomic<uint32_t> active_capture{0};
void (*capture_untracked)(const char* what) = nullptr;

}  // namespace fg
