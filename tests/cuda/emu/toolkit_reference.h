// The CUDA toolkit's own host implementations of the number-format conversions and arithmetic
// (cuda_bf16.hpp, cuda_fp16.hpp, cuda_fp8.hpp), behind plain integer signatures, so a test can compare
// them with the emulation (emu/formats.h) without the two sets of CUDA names meeting in one translation
// unit. toolkit_reference.cpp is compiled against the toolkit's headers where they are installed
// (toolkit_reference.cmake); available() says whether they were.
#pragma once

#include <cstdint>

namespace gpt::test::toolkit {

bool available();

uint16_t float_to_bf16(float x);
uint16_t float_to_f16(float x);
uint16_t double_to_bf16(double x);
uint16_t double_to_f16(double x);
float bf16_to_float(uint16_t code);
float f16_to_float(uint16_t code);
uint16_t bf16_add(uint16_t a, uint16_t b);
uint16_t bf16_sub(uint16_t a, uint16_t b);
uint16_t bf16_mul(uint16_t a, uint16_t b);
uint16_t f16_add(uint16_t a, uint16_t b);
uint16_t f16_sub(uint16_t a, uint16_t b);
uint16_t f16_mul(uint16_t a, uint16_t b);

// FP8: e5m2 selects __NV_E5M2 over __NV_E4M3, satfinite __NV_SATFINITE over __NV_NOSAT.
uint8_t float_to_fp8(float x, bool satfinite, bool e5m2);
uint8_t double_to_fp8(double x, bool satfinite, bool e5m2);
uint8_t halfraw_to_fp8(uint16_t h, bool satfinite, bool e5m2);
uint8_t bfloat16raw_to_fp8(uint16_t b, bool satfinite, bool e5m2);
uint16_t fp8_to_halfraw(uint8_t code, bool e5m2);
// The __nv_fp8_e4m3 / __nv_fp8_e5m2 classes: construction from float, conversion to float.
uint8_t fp8_class_from_float(float x, bool e5m2);
float fp8_class_to_float(uint8_t code, bool e5m2);

}  // namespace gpt::test::toolkit
