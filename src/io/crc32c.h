// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of every file a checkpoint
// manifest lists. Chosen over CRC-32 because x86-64 computes it in hardware (SSE4.2 crc32), which
// keeps verifying a multi-gigabyte checkpoint well under the time it takes to read it; the portable
// slicing-by-8 table code gives the same values everywhere else.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpt {

// Extends a running CRC: crc32c(b, crc32c(a)) == crc32c(a followed by b). Start from 0.
uint32_t crc32c(const void* data, size_t bytes, uint32_t crc = 0);

// The table-driven implementation alone (crc32c() uses the CPU instruction when it has one).
uint32_t crc32c_portable(const void* data, size_t bytes, uint32_t crc = 0);

}  // namespace gpt
