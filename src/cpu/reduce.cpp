// sum_of_squares: out[0] = sum_i in[i]^2 over the whole tensor (the squared global gradient norm).
// Each thread sums one contiguous static slice in double (lane_sum's order, vec_math.h); the partials are
// added in thread order, so the result is bitwise reproducible for a given thread count. out is a
// one-element f32 or f64 tensor.
#include "cpu/cpu_backend.h"
#include "backend/op_checks.h"
#include "cpu/dispatch.h"
#include "cpu/wide_operands.h"
#include "cpu/vec_math.h"

#include <omp.h>

#include <vector>

namespace gpt::cpu {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

template <class T>
double sum_of_squares_kernel(const T* in, int64_t n) {
  // Reused between calls; the region's threads write through the pointer, not their own thread_local.
  thread_local std::vector<double> storage;
  storage.assign(static_cast<size_t>(omp_get_max_threads()), 0.0);
  double* partials = storage.data();
  int used = 1;
#pragma omp parallel if (n > kParallelMin)
  {
    const int threads = omp_get_num_threads();
    const int id = omp_get_thread_num();
    const int64_t begin = n * id / threads, end = n * (id + 1) / threads;
    partials[id] = lane_sum(end - begin, [&](int64_t i) {
      const double x = in[begin + i];
      return x * x;
    });
    if (id == 0) used = threads;
  }
  double total = 0.0;
  for (int i = 0; i < used; ++i) total += partials[i];
  return total;
}

}  // namespace

void CpuBackend::sum_of_squares(const SumOfSquaresArgs& args) {
  check_sum_of_squares(args);
  double total = 0.0;
  WideOperands w(staging_, {&args.in});
  const Tensor in = w.in(args.in);
  dispatch_float(in.dtype, [&]<class T>(T) { total = sum_of_squares_kernel(in.as<T>(), in.numel()); });
  dispatch_float(args.out.dtype, [&]<class T>(T) { args.out.as<T>()[0] = static_cast<T>(total); });
}

}  // namespace gpt::cpu
