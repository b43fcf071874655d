// The run configuration: typed structs whose defaults live here. Each struct lists its keys once in
// visit(); the YAML loader, the --set overrides, the resolved-config dump and the README's key
// reference are all generated from those lists, so a key cannot exist in one place and not another.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpt {

struct ModelConfig {
  int vocab_size = 256;
  int vocab_pad_multiple = 64;
  int context_length = 256;
  int n_layer = 4;
  int n_head = 4;
  int n_embd = 128;
  double dropout = 0.0;
  double init_std = 0.02;
  std::string init_from;

  // Vocabulary rounded up to vocab_pad_multiple, so the LM head's matrix product has aligned shapes.
  int padded_vocab_size() const {
    return (vocab_size + vocab_pad_multiple - 1) / vocab_pad_multiple * vocab_pad_multiple;
  }

  template <class V>
  void visit(V& v) {
    v.field("vocab_size", vocab_size, "Real vocabulary size: 256 for the byte tokenizer, 50257 for GPT-2.");
    v.field("vocab_pad_multiple", vocab_pad_multiple, "The embedding/LM-head rows are padded up to a multiple of this (64 or 128 keep matrix products aligned).");
    v.field("context_length", context_length, "Longest sequence the model supports (rows of the position embedding).");
    v.field("n_layer", n_layer, "Number of transformer blocks.");
    v.field("n_head", n_head, "Attention heads per block; must divide n_embd.");
    v.field("n_embd", n_embd, "Channels of the residual stream.");
    v.field("dropout", dropout, "Dropout probability on embeddings, attention probabilities and residual branches (0 disables).");
    v.field("init_std", init_std, "Standard deviation of the GPT-2 initialisation; residual projections use init_std / sqrt(2 n_layer).");
    v.field("init_from", init_from, "Optional llm.c model checkpoint (.bin, version 3 fp32) to initialise the weights from; its shape must match.");
  }
};

struct DataConfig {
  std::string train = "data/demo/train_*.bin";
  std::string val = "data/demo/val_*.bin";
  std::string tokenizer = "byte";

  template <class V>
  void visit(V& v) {
    v.field("train", train, "Glob of llm.c-format token shards to train on.");
    v.field("val", val, "Glob of held-out shards for the validation loss (empty disables validation).");
    v.choice("tokenizer", tokenizer, {"byte"}, "How text is encoded and samples decoded (byte: vocabulary 256; GPT-2 BPE comes later).");
  }
};

struct TrainConfig {
  std::string backend = "cpu";
  int threads = 0;
  uint64_t seed = 1337;
  int batch_size = 8;
  int seq_len = 128;
  int grad_accum_steps = 1;
  int steps = 1000;
  int eval_every = 100;
  int eval_batches = 20;
  int sample_every = 200;
  int sample_tokens = 200;
  std::string sample_prompt;
  double sample_temperature = 1.0;
  int sample_top_k = 0;
  bool resume = false;

  template <class V>
  void visit(V& v) {
    v.choice("backend", backend, {"cpu", "cuda", "auto"}, "Where the ops run; auto picks CUDA when built with it and a GPU is present.");
    v.field("threads", threads, "CPU threads for OpenMP and OpenBLAS; 0 uses all cores.");
    v.field("seed", seed, "Seed of the initialisation, the data order and dropout.");
    v.field("batch_size", batch_size, "Micro-batch size B (sequences per forward/backward).");
    v.field("seq_len", seq_len, "Sequence length T; at most model.context_length.");
    v.field("grad_accum_steps", grad_accum_steps, "Micro-batches K accumulated per optimizer step; the loss is averaged over all target tokens of the K.");
    v.field("steps", steps, "Optimizer steps to train.");
    v.field("eval_every", eval_every, "Validation loss every this many steps (0 disables; it also runs after the last step).");
    v.field("eval_batches", eval_batches, "Micro-batches of validation data per evaluation.");
    v.field("sample_every", sample_every, "Generate a text sample every this many steps (0 disables; it also runs after the last step).");
    v.field("sample_tokens", sample_tokens, "Tokens generated per sample.");
    v.field("sample_prompt", sample_prompt, "Text the samples continue; empty starts from the tokenizer's end-of-text token.");
    v.field("sample_temperature", sample_temperature, "Sampling temperature (> 0).");
    v.field("sample_top_k", sample_top_k, "Sample among the k most likely tokens only (0 = all).");
    v.field("resume", resume, "Continue from the latest checkpoint in the run directory, if there is one.");
  }
};

struct OptimConfig {
  double lr = 1e-3;
  double min_lr_ratio = 0.1;
  int warmup_steps = 100;
  std::string schedule = "cosine";
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  std::vector<std::string> no_decay = {"bias", "layernorm", "embedding"};
  double grad_clip = 1.0;

  template <class V>
  void visit(V& v) {
    v.field("lr", lr, "Peak learning rate.");
    v.field("min_lr_ratio", min_lr_ratio, "The decay ends at lr * min_lr_ratio.");
    v.field("warmup_steps", warmup_steps, "Linear warm-up from lr / warmup_steps to lr over this many steps.");
    v.choice("schedule", schedule, {"cosine", "linear", "constant"}, "Decay after warm-up, down to lr * min_lr_ratio.");
    v.field("beta1", beta1, "AdamW first-moment decay.");
    v.field("beta2", beta2, "AdamW second-moment decay.");
    v.field("eps", eps, "AdamW epsilon.");
    v.field("weight_decay", weight_decay, "Decoupled weight decay.");
    v.subset("no_decay", no_decay, {"bias", "layernorm", "embedding"}, "Parameter kinds exempt from weight decay.");
    v.field("grad_clip", grad_clip, "Clip the global gradient norm to this value (0 disables).");
  }
};

struct CheckpointConfig {
  int every = 0;
  int keep_last = 0;

  template <class V>
  void visit(V& v) {
    v.field("every", every, "Write a checkpoint every this many steps (0: only the final one).");
    v.field("keep_last", keep_last, "Keep only the newest N checkpoints (0 keeps all).");
  }
};

struct LogConfig {
  std::string run_dir = "runs/demo";
  int every = 1;
  std::string level = "info";

  template <class V>
  void visit(V& v) {
    v.field("run_dir", run_dir, "Run directory: metrics.jsonl, config.yaml and checkpoints/ go here.");
    v.field("every", every, "Print a console line every this many steps.");
    v.choice("level", level, {"debug", "info", "warn", "error"}, "Console log level.");
  }
};

struct Config {
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  OptimConfig optim;
  CheckpointConfig checkpoint;
  LogConfig log;

  template <class V>
  void visit(V& v) {
    v.section("model", model);
    v.section("data", data);
    v.section("train", train);
    v.section("optim", optim);
    v.section("checkpoint", checkpoint);
    v.section("log", log);
  }
};

}  // namespace gpt
