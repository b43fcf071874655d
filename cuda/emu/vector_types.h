// CUDA's built-in vector types (vector_types.h) with the toolkit's alignment, so a float4 or int4 load in
// a kernel has the same size and alignment requirement as on the GPU, and dim3 with its defaults of 1.
#pragma once

#define GPT_EMU_VECTOR2(T, name, align)                                                            \
  struct alignas(align) name##2 { T x, y; };                                                        \
  inline name##2 make_##name##2(T x, T y) { return {x, y}; }
#define GPT_EMU_VECTOR3(T, name)                                                                    \
  struct name##3 { T x, y, z; };                                                                    \
  inline name##3 make_##name##3(T x, T y, T z) { return {x, y, z}; }
#define GPT_EMU_VECTOR4(T, name, align)                                                            \
  struct alignas(align) name##4 { T x, y, z, w; };                                                  \
  inline name##4 make_##name##4(T x, T y, T z, T w) { return {x, y, z, w}; }

GPT_EMU_VECTOR2(signed char, char, 2)
GPT_EMU_VECTOR4(signed char, char, 4)
GPT_EMU_VECTOR2(unsigned char, uchar, 2)
GPT_EMU_VECTOR4(unsigned char, uchar, 4)
GPT_EMU_VECTOR2(short, short, 4)
GPT_EMU_VECTOR4(short, short, 8)
GPT_EMU_VECTOR2(unsigned short, ushort, 4)
GPT_EMU_VECTOR4(unsigned short, ushort, 8)
GPT_EMU_VECTOR2(int, int, 8)
GPT_EMU_VECTOR3(int, int)
GPT_EMU_VECTOR4(int, int, 16)
GPT_EMU_VECTOR2(unsigned int, uint, 8)
GPT_EMU_VECTOR3(unsigned int, uint)
GPT_EMU_VECTOR4(unsigned int, uint, 16)
GPT_EMU_VECTOR2(long long, longlong, 16)
GPT_EMU_VECTOR2(unsigned long long, ulonglong, 16)
GPT_EMU_VECTOR2(float, float, 8)
GPT_EMU_VECTOR3(float, float)
GPT_EMU_VECTOR4(float, float, 16)
GPT_EMU_VECTOR2(double, double, 16)

#undef GPT_EMU_VECTOR2
#undef GPT_EMU_VECTOR3
#undef GPT_EMU_VECTOR4

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return {x, y, z}; }
};
