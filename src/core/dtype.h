// Element types as runtime data: a tensor carries its DType, so lower-precision formats are added
// by handling a new enum value in the ops, not by recompiling the model for a global float type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gpt {

// F64 exists for the CPU backend's double-precision gradient checks of the very code that trains in F32.
enum class DType : uint8_t { F32, F64, BF16, F16, E4M3, E5M2, I32, U16, U8 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64: return 8;
    case DType::F32: case DType::I32: return 4;
    case DType::BF16: case DType::F16: case DType::U16: return 2;
    case DType::E4M3: case DType::E5M2: case DType::U8: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::E4M3: return "e4m3";
    case DType::E5M2: return "e5m2";
    case DType::I32: return "i32";
    case DType::U16: return "u16";
    case DType::U8: return "u8";
  }
  return "?";
}

enum class Device : uint8_t { CPU, CUDA };

constexpr std::string_view device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

}  // namespace gpt
