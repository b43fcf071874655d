// Value checks run after a Config is read: ranges, the relations between keys, and the allowed
// values of choice and subset keys. Each error names the key, where its value came from, what is
// wrong and what would be right.
#include "config/validate.h"

#include "core/error.h"
#include "memory/recompute.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <numeric>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

namespace gpt::config_detail {

namespace {

constexpr int kMaxVocabSize = 1 << 24;
constexpr int kMaxVocabPadMultiple = 1 << 16;
constexpr int kMaxContextLength = 1 << 24;
constexpr int kMaxLayers = 1 << 12;
constexpr int kMaxEmbd = 1 << 16;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Optimal string alignment distance (Levenshtein plus adjacent transpositions: "modle" -> "model" is 1),
// capped at limit + 1. A cell d[i][j] is at least |i - j|, so only the band |i - j| <= limit can hold a
// distance within the limit (Ukkonen's cut-off), and the rows live in three buffers (a transposition
// looks two rows back) that the caller reuses across candidates. The full table, a row allocated per
// character for each of ~150 keys, made the hint for an unknown key most of the config fuzzer's time.
class CappedEditDistance {
 public:
  explicit CappedEditDistance(size_t limit) : limit_(limit) {}

  size_t operator()(std::string_view a, std::string_view b) {
    const size_t over = limit_ + 1;
    if (std::max(a.size(), b.size()) - std::min(a.size(), b.size()) > limit_) return over;
    for (auto* row : {&before_, &above_, &here_}) row->assign(b.size() + 1, over);
    for (size_t j = 0; j <= std::min(b.size(), limit_); ++j) above_[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      // Row i is read at lo - 1 ... hi + 1 (as row i - 1 of the next row, and back two): those cells are
      // written, so the buffers' older values never count.
      const size_t lo = i > limit_ ? i - limit_ : 1, hi = std::min(b.size(), i + limit_);
      here_[lo - 1] = lo == 1 && i <= limit_ ? i : over;
      for (size_t j = lo; j <= hi; ++j) {
        const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
        size_t d = std::min({above_[j] + 1, here_[j - 1] + 1, above_[j - 1] + cost});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d = std::min(d, before_[j - 2] + 1);
        here_[j] = std::min(d, over);
      }
      if (hi + 1 <= b.size()) here_[hi + 1] = over;
      std::swap(before_, above_);
      std::swap(above_, here_);
    }
    return above_[b.size()];
  }

 private:
  size_t limit_;
  std::vector<size_t> before_, above_, here_;  // rows i - 2, i - 1 and i
};

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Walks the choice and subset keys and checks their values against the allowed lists.
class ChoiceChecker {
 public:
  explicit ChoiceChecker(const KeyOrigins& origins) : origins_(origins) {}

  template <class S>
  void section(std::string_view name, S& s) {
    prefix_ = std::string(name);
    s.visit(*this);
  }
  template <class T>
  void field(std::string_view, T&, std::string_view) {}

  void choice(std::string_view key, const std::string& value, const std::vector<std::string>& allowed, std::string_view) {
    if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
    std::string name = full(key);
    GPT_FAIL("{}: {}: '{}' is not allowed{}; use one of: {}", where(name), name, value, did_you_mean(value, allowed),
             join(allowed));
  }

  void subset(std::string_view key, const std::vector<std::string>& values, const std::vector<std::string>& allowed,
              std::string_view) {
    std::string name = full(key);
    std::set<std::string> seen;
    for (const auto& v : values) {
      if (std::find(allowed.begin(), allowed.end(), v) == allowed.end())
        GPT_FAIL("{}: {}: '{}' is not allowed{}; each entry must be one of: {}", where(name), name, v,
                 did_you_mean(v, allowed), join(allowed));
      if (!seen.insert(v).second)
        GPT_FAIL("{}: {}: '{}' is listed twice; list each entry once", where(name), name, v);
    }
  }

 private:
  std::string full(std::string_view key) const { return prefix_ + "." + std::string(key); }
  std::string where(const std::string& name) const {
    auto it = origins_.find(name);
    return it == origins_.end() ? "default" : it->second;
  }

  const KeyOrigins& origins_;
  std::string prefix_;
};

// The range checks, each naming the key and where its value came from.
class Checker {
 public:
  explicit Checker(const KeyOrigins& origins) : origins_(origins) {}

  std::string where(const std::string& name) const {
    auto it = origins_.find(name);
    return it == origins_.end() ? "default" : it->second;
  }

  [[noreturn]] void fail(const std::string& name, const std::string& what, const std::string& fix) const {
    GPT_FAIL("{}: {}: {}; {}", where(name), name, what, fix);
  }

  template <class T>
  void at_most(const std::string& name, T value, T max, std::string_view why) const {
    if (!(value <= max))
      fail(name, fmt::format("{} is too large", value), fmt::format("it must be at most {} ({})", max, why));
  }
  template <class T>
  void at_least(const std::string& name, T value, T min, std::string_view note = "") const {
    if (!(value >= min)) fail(name, fmt::format("{} is too small", value), fmt::format("it must be at least {}{}", min, note));
  }
  void positive(const std::string& name, double value) const {
    if (!(value > 0)) fail(name, fmt::format("{} is not positive", value), "it must be greater than 0");
  }
  // lo <= value < hi, or lo <= value <= hi when closed.
  void in_range(const std::string& name, double value, double lo, double hi, bool closed) const {
    bool ok = value >= lo && (closed ? value <= hi : value < hi);
    if (!ok)
      fail(name, fmt::format("{} is outside [{}, {}{}", value, lo, hi, closed ? "]" : ")"),
           fmt::format("it must be at least {} and {} {}", lo, closed ? "at most" : "below", hi));
  }

 private:
  const KeyOrigins& origins_;
};

// The divisors of n nearest below and above k, as "4 or 8", for the n_head hint. Divisors come in pairs
// (d, n / d) with d ≤ √n, so √n steps find them all: a prime n_embd near 2^31 took 27 s when this tried
// every number up to n.
std::string nearby_divisors(int n, int k) {
  int below = 0, above = n;
  for (int d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    for (const int divisor : {d, n / d}) {
      if (divisor <= k) below = std::max(below, divisor);
      if (divisor >= k) above = std::min(above, divisor);
    }
  }
  if (below == 0 || below == above) return fmt::format("{}", above);
  return fmt::format("{} or {}", below, above);
}

}  // namespace

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string w = lower(word);
  const size_t limit = std::max<size_t>(1, std::min<size_t>(3, (w.size() + 1) / 3));
  CappedEditDistance edit_distance(limit);
  std::string c_lower;
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    // The distance is at least the difference in length: skipping those beyond the limit gives the same
    // answer, and keeps a long unknown key (a hostile or garbled config) from costing its length times every
    // key's (closest_match was 60% of the config fuzzer's time).
    if (std::max(w.size(), c.size()) - std::min(w.size(), c.size()) > limit) continue;
    c_lower.assign(c);
    for (char& ch : c_lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const size_t d = edit_distance(w, c_lower);
    if (d < best_d) best_d = d, best = c;
  }
  return best_d <= limit ? best : std::string();
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  std::string m = closest_match(word, candidates);
  return m.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", m);
}

void validate_config(const Config& config, const KeyOrigins& origins) {
  Checker c(origins);
  const ModelConfig& m = config.model;
  c.at_least("model.vocab_size", m.vocab_size, 1);
  c.at_least("model.vocab_pad_multiple", m.vocab_pad_multiple, 1);
  c.at_least("model.context_length", m.context_length, 1);
  c.at_least("model.n_layer", m.n_layer, 1);
  c.at_least("model.n_head", m.n_head, 1);
  c.at_least("model.n_embd", m.n_embd, 1);
  // Upper bounds far past any published model, refused before anything multiplies them: they keep every size
  // derived from the model (parameters, padded vocabulary, activations) well inside 64-bit arithmetic.
  c.at_most("model.vocab_size", m.vocab_size, kMaxVocabSize, "Gemma's 256000 is among the largest vocabularies");
  c.at_most("model.vocab_pad_multiple", m.vocab_pad_multiple, kMaxVocabPadMultiple, "64 or 128 align the LM head");
  c.at_most("model.context_length", m.context_length, kMaxContextLength, "million-token contexts are the longest in use");
  c.at_most("model.n_layer", m.n_layer, kMaxLayers, "the deepest published models have a few hundred blocks");
  c.at_most("model.n_embd", m.n_embd, kMaxEmbd, "the widest published models have 25600 channels");
  if (m.n_embd % m.n_head != 0)
    c.fail("model.n_head",
           fmt::format("{} heads do not divide model.n_embd = {} ({})", m.n_head, m.n_embd, c.where("model.n_embd")),
           fmt::format("n_head must divide n_embd, e.g. {}", nearby_divisors(m.n_embd, m.n_head)));
  c.in_range("model.dropout", m.dropout, 0.0, 1.0, false);
  c.positive("model.init_std", m.init_std);

  if (config.data.train.empty())
    c.fail("data.train", "is empty", "give a glob of training shards, e.g. data/demo/train_*.bin");
  if (config.data.tokenizer == "gpt2" && m.vocab_size < 50257)
    c.fail("model.vocab_size", fmt::format("{} is smaller than the 50257 tokens of data.tokenizer gpt2", m.vocab_size),
           "set model.vocab_size: 50257 (model.vocab_pad_multiple: 128 pads it to 50304 as llm.c does)");

  const TrainConfig& t = config.train;
  c.at_least("train.threads", t.threads, 0, " (0 uses all cores)");
  c.at_least("train.batch_size", t.batch_size, 1);
  c.at_least("train.seq_len", t.seq_len, 1);
  if (t.seq_len > m.context_length)
    c.fail("train.seq_len",
           fmt::format("{} exceeds model.context_length = {} ({})", t.seq_len, m.context_length,
                       c.where("model.context_length")),
           fmt::format("use train.seq_len <= {} or raise model.context_length", m.context_length));
  c.at_least("train.grad_accum_steps", t.grad_accum_steps, 1);
  c.at_least<int64_t>("train.global_batch_tokens", t.global_batch_tokens, 0, " (0 uses train.grad_accum_steps)");
  if (t.global_batch_tokens > 0) {
    const int64_t micro = static_cast<int64_t>(t.batch_size) * t.seq_len;
    if (t.global_batch_tokens % micro != 0)
      c.fail("train.global_batch_tokens",
             fmt::format("{} is not a multiple of train.batch_size x train.seq_len = {} x {} = {}", t.global_batch_tokens,
                         t.batch_size, t.seq_len, micro),
             fmt::format("use a multiple of {} times the number of ranks, e.g. {}", micro,
                         std::max<int64_t>(1, t.global_batch_tokens / micro) * micro));
  }
  c.at_least("train.steps", t.steps, 0, " (0 only evaluates or samples)");
  c.at_least("train.eval_every", t.eval_every, 0, " (0 disables)");
  c.at_least("train.eval_batches", t.eval_batches, 1);
  c.at_least("train.sample_every", t.sample_every, 0, " (0 disables)");
  c.at_least("train.sample_tokens", t.sample_tokens, 0);
  c.positive("train.sample_temperature", t.sample_temperature);
  c.at_least("train.sample_top_k", t.sample_top_k, 0, " (0 samples from all tokens)");

  const OptimConfig& o = config.optim;
  c.positive("optim.lr", o.lr);
  c.in_range("optim.min_lr_ratio", o.min_lr_ratio, 0.0, 1.0, true);
  c.at_least("optim.warmup_steps", o.warmup_steps, 0);
  c.in_range("optim.beta1", o.beta1, 0.0, 1.0, false);
  c.in_range("optim.beta2", o.beta2, 0.0, 1.0, false);
  c.positive("optim.eps", o.eps);
  c.at_least("optim.weight_decay", o.weight_decay, 0.0);
  c.at_least("optim.grad_clip", o.grad_clip, 0.0, " (0 disables clipping)");

  c.at_least("checkpoint.every", config.checkpoint.every, 0, " (0 writes only the final checkpoint)");
  c.at_least("checkpoint.keep_last", config.checkpoint.keep_last, 0, " (0 keeps all)");
  c.at_least("log.every", config.log.every, 1);
  if (config.dist.zero != 0 && config.dist.zero != 1)
    c.fail("dist.zero", fmt::format("stage {} is not implemented", config.dist.zero),
           "use 0 (every rank keeps the whole optimizer state) or 1 (shard it)");
  c.positive("dist.timeout_s", config.dist.timeout_s);
  if (config.dist.reduce_dtype == "bf16" && config.dist.zero == 1)
    c.fail("dist.reduce_dtype", "bf16 with dist.zero 1 is not supported: ZeRO-1 gathers the fp32 weights through the "
           "same buckets the gradients are summed in",
           "use dist.reduce_dtype fp32 with ZeRO-1, or dist.zero 0 with bf16");

  const RecomputeConfig& r = config.recompute;
  auto whole_number = [](const std::string& text, int lo, int hi) {
    if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return false;
    const int v = std::stoi(text);
    return v >= lo && v <= hi;
  };
  if (r.every != "auto" && !whole_number(r.every, 1, m.n_layer))
    c.fail("recompute.every", fmt::format("'{}' is not a segment length", r.every),
           fmt::format("use auto or a number from 1 to model.n_layer = {}", m.n_layer));
  if (r.layers != "all" && !whole_number(r.layers, 0, m.n_layer))
    c.fail("recompute.layers", fmt::format("'{}' is not a number of blocks", r.layers),
           fmt::format("use all or a number from 0 to model.n_layer = {}", m.n_layer));
  if (r.mode == "selective" && r.ops.empty())
    c.fail("recompute.ops", "is empty with recompute.mode selective", "list at least one of attention, gelu, layernorm");
  if (!config.memory.budget.empty() && config.memory.budget != "auto" && !parse_byte_size(config.memory.budget))
    c.fail("memory.budget", fmt::format("'{}' is not a size", config.memory.budget),
           "write e.g. 8GiB, 512MiB or 2GB, or auto (what the device can give the run when it starts)");

  const PrecisionConfig& pr = config.precision;
  if (!(pr.loss_scale_initial > 0 && pr.loss_scale_initial <= 3.4e38))
    c.fail("precision.loss_scale_initial", fmt::format("{} is not a usable scale", pr.loss_scale_initial),
           "use a finite value > 0, such as 65536");
  if (!(pr.loss_scale_growth_factor > 1))
    c.fail("precision.loss_scale_growth_factor", fmt::format("{} does not grow the scale", pr.loss_scale_growth_factor),
           "use a value greater than 1, such as 2");
  if (!(pr.loss_scale_backoff_factor > 0 && pr.loss_scale_backoff_factor < 1))
    c.fail("precision.loss_scale_backoff_factor", fmt::format("{} does not shrink the scale", pr.loss_scale_backoff_factor),
           "use a value in (0, 1), such as 0.5");
  c.at_least("precision.loss_scale_growth_interval", pr.loss_scale_growth_interval, 1);

  const FinetuneConfig& f = config.finetune;
  c.at_least("finetune.lora.rank", f.lora_rank, 0, " (0 trains every weight)");
  if (f.lora()) {
    const int narrowest = m.n_embd;
    if (f.lora_rank > narrowest)
      c.fail("finetune.lora.rank", fmt::format("{} exceeds model.n_embd = {}, the narrowest side of a targeted weight",
                                               f.lora_rank, narrowest),
             fmt::format("use a rank from 1 to {} (4 to 64 is usual)", narrowest));
    c.positive("finetune.lora.alpha", f.lora_alpha);
    c.in_range("finetune.lora.dropout", f.lora_dropout, 0.0, 1.0, false);
    if (f.lora_targets.empty())
      c.fail("finetune.lora.targets", "is empty with finetune.lora.rank > 0",
             "list at least one of qkv, attn_proj, fc, fc_proj (or set finetune.lora.rank: 0 for full fine-tuning)");
    if (pr.recipe == "fp8")
      c.fail("finetune.lora.rank", fmt::format("LoRA with precision.recipe fp8 ({}) is not supported: the frozen base "
                                               "would need its FP8 scales from FP32 masters it does not keep",
                                               c.where("precision.recipe")),
             "use precision.recipe bf16 (the base held in BF16) or fp32");
    if (config.dist.zero != 0)
      c.fail("dist.zero", fmt::format("ZeRO stage {} with finetune.lora.rank > 0 is not supported", config.dist.zero),
             "use dist.zero: 0; the adapters' AdamW state is a few MiB, nothing to shard");
    if (config.memory.offload != "none")
      c.fail("memory.offload", fmt::format("{} with finetune.lora.rank > 0 is not supported", config.memory.offload),
             "use memory.offload: none; the adapters' AdamW state is a few MiB, nothing to offload");
  }

  Config copy = config;
  ChoiceChecker choices(origins);
  copy.visit(choices);
}

}  // namespace gpt::config_detail
