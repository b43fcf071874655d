#include "model/activations.h"

#include <utility>

namespace gpt {

ArenaLayout activation_layout(const ModelConfig& m, int batch_size, int seq_len, DType dtype) {
  const int64_t L = m.n_layer, C = m.n_embd, NH = m.n_head, Vp = m.padded_vocab_size();
  const int64_t B = batch_size, T = seq_len;
  ArenaLayout a("activations");
  a.add("tokens", {B, T}, DType::I32);
  a.add("targets", {B, T}, DType::I32);
  a.add("encoded", {B, T, C}, dtype);
  a.add("ln1", {L, B, T, C}, dtype);
  a.add("ln1_mean", {L, B, T}, dtype);
  a.add("ln1_rstd", {L, B, T}, dtype);
  a.add("qkv", {L, B, T, 3 * C}, dtype);
  a.add("atty", {L, B, T, C}, dtype);
  a.add("probs", {L, B, NH, T, T}, dtype);
  a.add("attproj", {L, B, T, C}, dtype);
  a.add("residual2", {L, B, T, C}, dtype);
  a.add("ln2", {L, B, T, C}, dtype);
  a.add("ln2_mean", {L, B, T}, dtype);
  a.add("ln2_rstd", {L, B, T}, dtype);
  a.add("fch", {L, B, T, 4 * C}, dtype);
  a.add("fch_gelu", {L, B, T, 4 * C}, dtype);
  a.add("fcproj", {L, B, T, C}, dtype);
  a.add("residual3", {L, B, T, C}, dtype);
  a.add("lnf", {B, T, C}, dtype);
  a.add("lnf_mean", {B, T}, dtype);
  a.add("lnf_rstd", {B, T}, dtype);
  a.add("logits", {B, T, Vp}, dtype);
  a.add("losses", {B, T}, dtype);
  a.add("sum_squares", {1}, dtype);
  a.add("dresidual", {B, T, C}, dtype);
  a.add("dbranch", {B, T, C}, dtype);
  a.add("datty", {B, T, C}, dtype);
  a.add("dqkv", {B, T, 3 * C}, dtype);
  a.add("dfch", {B, T, 4 * C}, dtype);
  a.add("dprobs", {B, NH, T, T}, dtype);
  return a;
}

ActivationTensors activation_views(Arena& arena) {
  using A = ActivationTensors;
  static constexpr std::pair<const char*, Tensor A::*> kBuffers[] = {
      {"tokens", &A::tokens},
      {"targets", &A::targets},
      {"encoded", &A::encoded},
      {"ln1", &A::ln1},
      {"ln1_mean", &A::ln1_mean},
      {"ln1_rstd", &A::ln1_rstd},
      {"qkv", &A::qkv},
      {"atty", &A::atty},
      {"probs", &A::probs},
      {"attproj", &A::attproj},
      {"residual2", &A::residual2},
      {"ln2", &A::ln2},
      {"ln2_mean", &A::ln2_mean},
      {"ln2_rstd", &A::ln2_rstd},
      {"fch", &A::fch},
      {"fch_gelu", &A::fch_gelu},
      {"fcproj", &A::fcproj},
      {"residual3", &A::residual3},
      {"lnf", &A::lnf},
      {"lnf_mean", &A::lnf_mean},
      {"lnf_rstd", &A::lnf_rstd},
      {"logits", &A::logits},
      {"losses", &A::losses},
      {"sum_squares", &A::sum_squares},
      {"dresidual", &A::dresidual},
      {"dbranch", &A::dbranch},
      {"datty", &A::datty},
      {"dqkv", &A::dqkv},
      {"dfch", &A::dfch},
      {"dprobs", &A::dprobs},
  };
  ActivationTensors t;
  for (const auto& [name, member] : kBuffers) t.*member = arena.tensor(name);
  return t;
}

}  // namespace gpt
