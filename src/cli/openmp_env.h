// How OpenMP threads wait between parallel regions, chosen before the OpenMP runtime starts.
//
// libgomp's threads spin for GOMP_SPINCOUNT iterations (300000 by default, several milliseconds) before
// they sleep. On a dedicated machine that keeps them ready for the next region; on a shared one (CI, a
// laptop, a server where others compile) a spinning thread holds a core that the thread everybody waits for
// needs, and a demo step went from 65 ms to about 990 ms with one other busy process on 2 cores. A bounded
// spin of kSpinCount iterations (about 0.1-0.3 ms) still bridges the gaps between our back-to-back
// regions and OpenBLAS's, which run on the same libgomp pool, and then yields the core.
//
// libgomp reads its environment once, when it is loaded, before main(); so gpt-train sets the variable
// and re-executes itself once. OMP_WAIT_POLICY or GOMP_SPINCOUNT set by the user are left as they are.
#pragma once

#include <string>

namespace gpt {

inline constexpr const char* kSpinCount = "10000";
// Set (to "1") in the environment of a process whose GOMP_SPINCOUNT gpt-train chose.
inline constexpr const char* kSpinCountMarker = "GPT_TRAIN_SPINCOUNT_SET";

// Sets GOMP_SPINCOUNT and re-executes /proc/self/exe with argv when neither OMP_WAIT_POLICY nor
// GOMP_SPINCOUNT is set; returns (changing nothing) when they are, or when the re-execution fails.
void bound_openmp_spinning(char** argv);

// One line for the log: the wait policy in force and who chose it.
std::string openmp_wait_description();

}  // namespace gpt
