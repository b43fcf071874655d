// Kernels with known numbers of tensor-core and asynchronous-copy instructions, compiled by
// scripts/check_flash_kernels.sh to confirm that cubin_opcodes.cpp's opcode table holds for this toolkit
// and architecture before it counts those instructions in the fused attention kernels. The counts differ
// (HMMA 2, LDSM 3, LDGSTS 4) so that swapped codes fail as well as wrong ones; sass_probe_none has none.
#include <cstdint>

__global__ void sass_probe_counted(const uint4* global, float* out) {
  __shared__ alignas(16) uint4 tile[4 * 32];
  const std::uint32_t lane = threadIdx.x % 32;
  const auto at = [&](int i) { return static_cast<std::uint32_t>(__cvta_generic_to_shared(&tile[i * 32 + lane])); };
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(at(0)), "l"(global + lane), "r"(12));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(at(1)), "l"(global + 32 + lane));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(at(2)), "l"(global + 64 + lane));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(at(3)), "l"(global + 96 + lane));
  asm volatile("cp.async.wait_all;\n" ::: "memory");
  __syncthreads();
  std::uint32_t a[4], b[4], c[2];
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(at(0)));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]) : "r"(at(1)));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(c[0]), "=r"(c[1]) : "r"(at(2)));
  float d[4] = {};
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(c[0]), "r"(c[1]));
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(c[0]), "r"(c[1]));
  out[threadIdx.x] = d[0] + d[1] + d[2] + d[3];
}

__global__ void sass_probe_none(const uint4* global, float* out) {
  __shared__ uint4 tile[32];
  tile[threadIdx.x % 32] = global[threadIdx.x];
  __syncthreads();
  const uint4 v = tile[(threadIdx.x + 1) % 32];
  out[threadIdx.x] = fmaf(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z));
}
