// What this process holds of the host's memory, measured by the kernel: the "measured" beside the ledger's
// "planned" in metrics.jsonl and the report.
#pragma once

#include <cstdint>

namespace gpt {

// The peak resident set size of the process so far (getrusage's ru_maxrss), in bytes; 0 if unavailable.
// It counts everything resident: the ledger's tensors, and also the libraries, the BLAS buffers and the
// allocator's slack, so it sits above the ledger's total. Device memory is not in it.
uint64_t peak_resident_bytes();

}  // namespace gpt
