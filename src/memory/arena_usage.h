// Measuring what a step really used of an arena: fill it with a poison pattern, run the step, and see
// which buffers were written. A plan that allocates a buffer nothing writes shows up as measured <
// planned; the ledger is right only when the two are equal.
#pragma once

#include "backend/backend.h"
#include "core/arena.h"

#include <cstdint>

namespace gpt {

void poison_arena(Arena& arena, Backend& backend);
// Sum of the aligned sizes of the buffers that hold at least one word other than the poison.
uint64_t written_bytes(Arena& arena, Backend& backend);

}  // namespace gpt
