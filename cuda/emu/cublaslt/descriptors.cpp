// cuBLASLt's handle, descriptor and preference calls: creation, destruction, and attributes read and
// written by value, each with its documented C type (cublasLt.h); a buffer of another size is
// CUBLAS_STATUS_INVALID_VALUE, as in cuBLASLt.
#include "emu/cublaslt/descriptors.h"

#include <cstring>
#include <fmt/format.h>

namespace gpt::emu::cublaslt {
namespace {

// Why this thread's last call failed, and the text cublasLtGetStatusString returned last. A backend kept
// in a static (as the tests keep one) is destroyed at exit after the thread's thread_local objects, and
// its cublasLt*Destroy calls still come here: `refusal_destroyed`, trivially destructible and so readable
// to the end, says the strings are gone, and the calls then record nothing.
thread_local bool refusal_destroyed = false;
struct ThreadRefusal {
  std::string why;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  std::string status_string;
  ~ThreadRefusal() { refusal_destroyed = true; }
};
thread_local ThreadRefusal refusal;

// One attribute: where its value lives and how many bytes it has.
struct Field {
  void* where;
  size_t size;
};

template <class T>
Field field(T& member) {
  return Field{&member, sizeof(T)};
}

cublasStatus_t set_field(const Field& f, const void* buf, size_t size, const char* what, int attr) {
  if (f.where == nullptr) return refuse(CUBLAS_STATUS_INVALID_VALUE, fmt::format("{} attribute {} is not emulated", what, attr));
  if (buf == nullptr || size != f.size)
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  fmt::format("{} attribute {} takes {} bytes, not {}", what, attr, f.size, size));
  std::memcpy(f.where, buf, size);
  clear_refusal();
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLASLt's convention: size 0 with a null buffer asks for the size (in *size_written).
cublasStatus_t get_field(const Field& f, void* buf, size_t size, size_t* size_written, const char* what, int attr) {
  if (f.where == nullptr) return refuse(CUBLAS_STATUS_INVALID_VALUE, fmt::format("{} attribute {} is not emulated", what, attr));
  if (size == 0 && buf == nullptr) {
    if (size_written == nullptr) return refuse(CUBLAS_STATUS_INVALID_VALUE, "size query without sizeWritten");
    *size_written = f.size;
    return CUBLAS_STATUS_SUCCESS;
  }
  if (buf == nullptr || size != f.size)
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  fmt::format("{} attribute {} has {} bytes, not {}", what, attr, f.size, size));
  std::memcpy(buf, f.where, size);
  if (size_written != nullptr) *size_written = size;
  clear_refusal();
  return CUBLAS_STATUS_SUCCESS;
}

Field desc_field(cublasLtMatmulDescOpaque_t& d, cublasLtMatmulDescAttributes_t attr) {
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return field(d.compute_type);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return field(d.scale_type);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return field(d.pointer_mode);
    case CUBLASLT_MATMUL_DESC_TRANSA: return field(d.transa);
    case CUBLASLT_MATMUL_DESC_TRANSB: return field(d.transb);
    case CUBLASLT_MATMUL_DESC_TRANSC: return field(d.transc);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return field(d.epilogue);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return field(d.bias);
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return field(d.bias_batch_stride);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return field(d.aux);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return field(d.aux_ld);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: return field(d.aux_batch_stride);
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: return field(d.a_scale);
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: return field(d.b_scale);
    case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER: return field(d.c_scale);
    case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER: return field(d.d_scale);
    case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER: return field(d.amax_d);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return field(d.aux_type);
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM: return field(d.fast_accum);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return field(d.bias_type);
  }
  return Field{nullptr, 0};
}

Field layout_field(cublasLtMatrixLayoutOpaque_t& l, cublasLtMatrixLayoutAttribute_t attr) {
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: return field(l.type);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return field(l.order);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return field(l.rows);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return field(l.cols);
    case CUBLASLT_MATRIX_LAYOUT_LD: return field(l.ld);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return field(l.batch_count);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return field(l.batch_stride);
  }
  return Field{nullptr, 0};
}

Field preference_field(cublasLtMatmulPreferenceOpaque_t& p, cublasLtMatmulPreferenceAttributes_t attr) {
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return field(p.search_mode);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return field(p.max_workspace_bytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return field(p.min_alignment_a);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return field(p.min_alignment_b);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return field(p.min_alignment_c);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return field(p.min_alignment_d);
  }
  return Field{nullptr, 0};
}

template <class T>
cublasStatus_t create(T** out) {
  if (out == nullptr) return refuse(CUBLAS_STATUS_INVALID_VALUE, "null output pointer");
  *out = new T{};
  clear_refusal();
  return CUBLAS_STATUS_SUCCESS;
}

template <class T>
cublasStatus_t destroy(T* p) {
  delete p;
  clear_refusal();
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t refuse(cublasStatus_t status, std::string why) {
  if (refusal_destroyed) return status;
  refusal.why = std::move(why);
  refusal.status = status;
  return status;
}

void clear_refusal() {
  if (refusal_destroyed) return;
  refusal.why.clear();
  refusal.status = CUBLAS_STATUS_SUCCESS;
}

}  // namespace gpt::emu::cublaslt

const char* gpt::emu::cublaslt_last_refusal() {
  return cublaslt::refusal_destroyed ? "" : cublaslt::refusal.why.c_str();
}

using gpt::emu::cublaslt::clear_refusal;
using gpt::emu::cublaslt::refuse;

const char* cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
#define GPT_EMU_STATUS_NAME(name, value) \
  case name: return #name;
    GPT_EMU_CUBLAS_STATUS(GPT_EMU_STATUS_NAME)
#undef GPT_EMU_STATUS_NAME
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasLtGetStatusString(cublasStatus_t status) {
  if (gpt::emu::cublaslt::refusal_destroyed) return cublasLtGetStatusName(status);
  auto& refusal = gpt::emu::cublaslt::refusal;
  refusal.status_string = cublasLtGetStatusName(status);
  if (status != CUBLAS_STATUS_SUCCESS && status == refusal.status)
    refusal.status_string += " (emulator: " + refusal.why + ")";
  return refusal.status_string.c_str();
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (handle == nullptr) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtCreate: null handle pointer");
  *handle = new cublasLtContext{gpt::emu::cublaslt::kHandleMagic};
  clear_refusal();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (handle == nullptr || handle->magic != gpt::emu::cublaslt::kHandleMagic)
    return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtDestroy: not a handle from cublasLtCreate");
  handle->magic = 0;
  delete handle;
  clear_refusal();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute_type,
                                        cudaDataType_t scale_type) {
  const cublasStatus_t s = gpt::emu::cublaslt::create(desc);
  if (s == CUBLAS_STATUS_SUCCESS) {
    (*desc)->compute_type = compute_type;
    (*desc)->scale_type = scale_type;
  }
  return s;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) { return gpt::emu::cublaslt::destroy(desc); }

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  if (desc == nullptr) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescSetAttribute: null descriptor");
  return gpt::emu::cublaslt::set_field(gpt::emu::cublaslt::desc_field(*desc, attr), buf, size, "matmul descriptor", attr);
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              void* buf, size_t size, size_t* size_written) {
  if (desc == nullptr) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescGetAttribute: null descriptor");
  return gpt::emu::cublaslt::get_field(gpt::emu::cublaslt::desc_field(*desc, attr), buf, size, size_written,
                                       "matmul descriptor", attr);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  const cublasStatus_t s = gpt::emu::cublaslt::create(layout);
  if (s == CUBLAS_STATUS_SUCCESS) {
    (*layout)->type = static_cast<uint32_t>(type);
    (*layout)->rows = rows;
    (*layout)->cols = cols;
    (*layout)->ld = ld;
  }
  return s;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) { return gpt::emu::cublaslt::destroy(layout); }

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size) {
  if (layout == nullptr) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutSetAttribute: null layout");
  return gpt::emu::cublaslt::set_field(gpt::emu::cublaslt::layout_field(*layout, attr), buf, size, "matrix layout", attr);
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                void* buf, size_t size, size_t* size_written) {
  if (layout == nullptr) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutGetAttribute: null layout");
  return gpt::emu::cublaslt::get_field(gpt::emu::cublaslt::layout_field(*layout, attr), buf, size, size_written,
                                       "matrix layout", attr);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  return gpt::emu::cublaslt::create(pref);
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  return gpt::emu::cublaslt::destroy(pref);
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t size) {
  if (pref == nullptr) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceSetAttribute: null preference");
  return gpt::emu::cublaslt::set_field(gpt::emu::cublaslt::preference_field(*pref, attr), buf, size, "preference", attr);
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, void* buf, size_t size,
                                                    size_t* size_written) {
  if (pref == nullptr) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceGetAttribute: null preference");
  return gpt::emu::cublaslt::get_field(gpt::emu::cublaslt::preference_field(*pref, attr), buf, size, size_written,
                                       "preference", attr);
}
