// The contract of the fused residual/LayerNorm ops (op_args.h), checked alike by every backend: the
// residual half and the LayerNorm half meet in one tensor, and a backward's branch gradient does not
// overwrite the stream's gradient.
#pragma once

#include "backend/op_args.h"
#include "core/error.h"

namespace gpt {

inline bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.data == b.data && a.dtype == b.dtype && a.numel() == b.numel() && a.scaling == b.scaling;
}

inline void check_fused_args(const ResidualLayerNormForwardArgs& a) {
  GPT_CHECK(!a.residual.out.empty() && same_tensor(a.norm.in, a.residual.out),
            "residual_layernorm_forward: norm.in {} {} must be residual.out {} {} (the LayerNorm reads the sum it "
            "stores)",
            a.norm.in.shape_string(), dtype_name(a.norm.in.dtype), a.residual.out.shape_string(),
            dtype_name(a.residual.out.dtype));
}

inline void check_fused_args(const LayerNormResidualBackwardArgs& a) {
  GPT_CHECK(!a.norm.din.empty() && same_tensor(a.residual.dout, a.norm.din),
            "layernorm_residual_backward: residual.dout {} {} must be norm.din {} {} (the branch's gradient is taken "
            "from the stream's)",
            a.residual.dout.shape_string(), dtype_name(a.residual.dout.dtype), a.norm.din.shape_string(),
            dtype_name(a.norm.din.dtype));
  GPT_CHECK(a.residual.dx.data != a.norm.din.data,
            "layernorm_residual_backward: residual.dx must not alias norm.din: the stream's gradient would be "
            "overwritten by the branch's");
}

}  // namespace gpt
