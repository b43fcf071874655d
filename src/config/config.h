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
    v.field("vocab_size", vocab_size, "Real vocabulary size: 256 for the byte tokenizer, 50257 for GPT-2. Unwritten, with init_from set: the checkpoint's.");
    v.field("vocab_pad_multiple", vocab_pad_multiple, "The embedding/LM-head rows are padded up to a multiple of this (64 or 128 keep matrix products aligned). Unwritten, with an llm.c init_from: the smallest that gives its padded rows (64 where it does).");
    v.field("context_length", context_length, "Longest sequence the model supports (rows of the position embedding). Unwritten, with init_from set: the checkpoint's.");
    v.field("n_layer", n_layer, "Number of transformer blocks. Unwritten, with init_from set: the checkpoint's.");
    v.field("n_head", n_head, "Attention heads per block; must divide n_embd. Unwritten, with init_from set: the checkpoint's (a .safetensors file without config.json beside it cannot give it: write it).");
    v.field("n_embd", n_embd, "Channels of the residual stream. Unwritten, with init_from set: the checkpoint's.");
    v.field("dropout", dropout, "Dropout probability on embeddings, attention probabilities and residual branches (0 disables).");
    v.field("init_std", init_std, "Standard deviation of the GPT-2 initialisation; residual projections use init_std / sqrt(2 n_layer).");
    v.field("init_from", init_from, "Optional checkpoint to initialise the weights from: an llm.c model file (.bin, version 3 fp32), or a Hugging Face GPT-2 checkpoint (a directory with model.safetensors and config.json, or a .safetensors file; F32, F16 or BF16). It gives the model its shape: each shape key not written is read from its headers, and a written one must agree.");
  }
};

struct DataConfig {
  std::string train = "data/demo/train_*.bin";
  std::string val = "data/demo/val_*.bin";
  std::string tokenizer = "byte";
  std::string tokenizer_path;

  template <class V>
  void visit(V& v) {
    v.field("train", train, "Glob of llm.c-format token shards to train on; a shard with a target mask beside it (SHARD.mask, from prepare --format jsonl) counts only the targets the mask keeps.");
    v.field("val", val, "Glob of held-out shards for the validation loss (empty disables validation).");
    v.choice("tokenizer", tokenizer, {"byte", "gpt2"}, "How text is encoded and samples decoded: byte (vocabulary 256) or gpt2 (GPT-2's byte-level BPE, vocabulary 50257, end-of-text 50256; needs model.vocab_size >= 50257).");
    v.field("tokenizer_path", tokenizer_path, "gpt2: directory with encoder.json + vocab.bpe or vocab.json + merges.txt (empty: $GPT_TRAIN_GPT2_DIR, else ~/.cache/gpt-train/gpt2, where scripts/fetch_gpt2_tokenizer.sh puts them).");
  }
};

struct TrainConfig {
  std::string backend = "cpu";
  std::string attention = "fused";
  int threads = 0;
  uint64_t seed = 1337;
  int batch_size = 8;
  int seq_len = 128;
  int grad_accum_steps = 1;
  int64_t global_batch_tokens = 0;
  int steps = 1000;
  int eval_every = 100;
  int eval_batches = 20;
  int sample_every = 200;
  int sample_tokens = 200;
  std::string sample_prompt;
  double sample_temperature = 1.0;
  int sample_top_k = 0;
  bool resume = false;
  bool overwrite = false;
  std::string on_nonfinite = "stop";

  template <class V>
  void visit(V& v) {
    v.choice("backend", backend, {"cpu", "cuda", "auto"}, "Where the ops run; auto picks CUDA when built with it and a GPU it runs on (compute capability 7.5 or later) is present, else the CPU.");
    v.choice("attention", attention, {"fused", "materialised"}, "CUDA: fused attention kernels keep each row's log-sum-exp, no [B,n_head,T,T] probabilities (activation memory O(T), selective recomputation of attention saves nothing); materialised keeps the probabilities as the CPU does (for checks and comparisons). The CPU always materialises.");
    v.field("threads", threads, "CPU threads for OpenMP and OpenBLAS; 0 uses all cores.");
    v.field("seed", seed, "Seed of the initialisation, the data order and dropout.");
    v.field("batch_size", batch_size, "Micro-batch size B (sequences per forward/backward).");
    v.field("seq_len", seq_len, "Sequence length T; at most model.context_length.");
    v.field("grad_accum_steps", grad_accum_steps, "Micro-batches K accumulated per optimizer step; the loss is averaged over all target tokens of the K.");
    v.field("global_batch_tokens", global_batch_tokens, "Tokens per optimizer step over all ranks; when set (> 0), it replaces grad_accum_steps by global_batch_tokens / (batch_size x seq_len x ranks), which must divide evenly (0: use grad_accum_steps).");
    v.field("steps", steps, "Optimizer steps to train.");
    v.field("eval_every", eval_every, "Validation loss every this many steps, and after the last step (0: never).");
    v.field("eval_batches", eval_batches, "Micro-batches of validation data per evaluation.");
    v.field("sample_every", sample_every, "Generate a text sample every this many steps, and after the last step (0: never).");
    v.field("sample_tokens", sample_tokens, "Tokens generated per sample.");
    v.field("sample_prompt", sample_prompt, "Text the samples continue; empty starts from the tokenizer's end-of-text token.");
    v.field("sample_temperature", sample_temperature, "Sampling temperature (> 0).");
    v.field("sample_top_k", sample_top_k, "Sample among the k most likely tokens only (0 = all).");
    v.field("resume", resume, "Continue from the latest checkpoint in the run directory, if there is one.");
    v.field("overwrite", overwrite, "A fresh run (resume false) into a log.run_dir that holds a run (checkpoints or metrics) is refused unless this is true; then the old run is first moved to <run_dir>.old-<time>.");
    v.choice("on_nonfinite", on_nonfinite, {"stop", "skip"}, "A step whose loss or gradient norm is NaN or Inf: stop writes a checkpoint of the last good state and ends the run naming the first non-finite gradient tensor; skip drops that step's update (no optimizer step), counts and logs it, and goes on.");
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
  std::string on_corrupt = "previous";

  template <class V>
  void visit(V& v) {
    v.field("every", every, "Write a checkpoint every this many steps (0: only the final one).");
    v.field("keep_last", keep_last, "Keep only the newest N checkpoints (0 keeps all); older ones are removed only after a new one is complete.");
    v.choice("on_corrupt", on_corrupt, {"previous", "fail"}, "On resume, a checkpoint whose manifest or checksums do not match is reported by file; previous falls back to the newest intact older one, fail stops the run.");
  }
};

struct LogConfig {
  std::string run_dir = "runs/demo";
  int every = 1;
  std::string level = "info";
  bool report = false;

  template <class V>
  void visit(V& v) {
    v.field("run_dir", run_dir, "Run directory: metrics.jsonl, config.yaml and checkpoints/ go here.");
    v.field("every", every, "Print a console line every this many steps.");
    v.choice("level", level, {"debug", "info", "warn", "error"}, "Console log level.");
    v.field("report", report, "Draw report.png and report.svg (what `gpt-train report` draws) into the run directory at each checkpoint and at the end; off by default, since each drawing rereads all of metrics.jsonl and pauses the run; a failure to draw is a warning, never the end of the run.");
  }
};

struct RecomputeConfig {
  std::string mode = "none";
  std::vector<std::string> ops = {"attention", "gelu", "layernorm"};
  std::string every = "1";
  std::string layers = "all";

  template <class V>
  void visit(V& v) {
    v.choice("mode", mode, {"none", "selective", "full"}, "Activation recomputation: none keeps every activation backward needs; selective recomputes the ops listed in recompute.ops; full keeps only block inputs and reruns blocks in backward.");
    v.subset("ops", ops, {"attention", "gelu", "layernorm"}, "With mode selective: which activations are recomputed instead of stored (attention scores/softmax, GELU output, LayerNorm outputs).");
    v.field("every", every, "With mode full: keep the input of every k-th block and rerun segments of k blocks; auto picks k = round(sqrt(n_layer)), the memory optimum.");
    v.field("layers", layers, "Recompute only the first N blocks and keep the rest (all, or a number from 0 to n_layer).");
  }
};

struct MemoryConfig {
  std::string budget;
  std::string offload = "none";

  template <class V>
  void visit(V& v) {
    v.field("budget", budget, "Memory budget such as 8GiB or 512MiB: choose the precision (bf16 for fp32, on backends that store it natively), micro-batch, accumulation steps and recompute mode that fit, keeping the global batch train.batch_size x train.grad_accum_steps (empty: use the config as given). auto: what the device can give the run when it starts (on CUDA what the device has free, on the CPU the host's available memory shared by the node's ranks, less 5% of it, at most 512 MiB).");
    v.choice("offload", offload, {"none", "optimizer"}, "optimizer: the FP32 master weights and the AdamW moments live in host memory and AdamW runs on the host's cores; the device keeps the weights the forward reads (under bf16, fp16 or fp8 only the compute copy, on every rank of a data-parallel run: in bf16/fp16 the host writes it into a twin in host memory and it crosses the bus in that format; under fp8 it is cast from the host masters through a staging buffer on the device; in fp32 the device keeps its FP32 weights), the gradients and the activations. On the CPU backend host and device memory are one, so it saves nothing there and runs the same code path.");
  }
};

struct DistConfig {
  int zero = 0;
  double timeout_s = 600.0;
  bool overlap = true;
  std::string reduce_dtype = "fp32";
  bool log_all_ranks = false;

  template <class V>
  void visit(V& v) {
    v.field("zero", zero, "ZeRO stage under mpirun: 0 keeps the whole AdamW state on every rank; 1 shards it (each rank updates 1/ranks of the weights, then all-gathers them).");
    v.field("timeout_s", timeout_s, "Seconds a collective may wait for the other ranks before the job aborts naming the waiting rank (and the ranks of its node that did not arrive); must exceed the longest rank-0-only pause (checkpoint, sample).");
    v.field("overlap", overlap, "Reduce each block's gradients during the last micro-batch's backward, while earlier blocks are still computed (false: one reduction pass after backward).");
    v.choice("reduce_dtype", reduce_dtype, {"fp32", "bf16"}, "Format the gradient buckets are summed over the ranks in: fp32, or bf16 to halve the bytes sent (NCCL, train.backend cuda, with dist.zero 0; the gradients are rounded to bf16 before the sum, as in PyTorch's bf16 compression hook).");
    v.field("log_all_ranks", log_all_ranks, "Every rank logs at log.level (prefixed [rank N]); by default ranks other than 0 log warnings and errors only.");
  }
};

// The recipes of src/precision/recipe.h; which format each tensor takes under them is
// src/precision/precision_layout.h.
struct PrecisionConfig {
  std::string recipe = "fp32";
  double loss_scale_initial = 65536.0;
  double loss_scale_growth_factor = 2.0;
  double loss_scale_backoff_factor = 0.5;
  int loss_scale_growth_interval = 2000;
  bool loss_scale_static = false;
  std::string grad_dtype = "fp32";
  std::string fp8_backward = "bf16";
  std::string fp8_scaling = "delayed";
  int fp8_amax_history = 1024;
  std::string fp8_amax_algorithm = "max";
  int fp8_margin = 0;
  int fp8_bf16_layers = 0;
  bool tf32 = false;
  std::string cpu_narrow_matmul = "native";

  template <class V>
  void visit(V& v) {
    v.choice("recipe", recipe, {"fp32", "bf16", "fp16", "fp8"}, "Compute format of activations and matrix products (FP32 accumulation); the master weights, AdamW state and checkpoints stay FP32. fp16 scales the loss (loss_scale_*). fp8 runs the four linear layers of each block on E4M3 operands with per-tensor scales (fp8.*), everything else in BF16; on CUDA it needs compute capability 8.9 and model.n_embd a multiple of 16. Every backend, the CPU included, stores each tensor in its format at its size.");
    v.choice("grad_dtype", grad_dtype, {"fp32", "bf16", "fp16"}, "Format parameter gradients are accumulated in across micro-batches: fp32, or the recipe's compute format (bf16 for bf16 and fp8, fp16 for fp16) to halve their memory.");
    v.field("loss_scale_initial", loss_scale_initial, "fp16: the loss scale of the first step.");
    v.field("loss_scale_growth_factor", loss_scale_growth_factor, "fp16, dynamic: the scale is multiplied by this after loss_scale_growth_interval steps without overflow.");
    v.field("loss_scale_backoff_factor", loss_scale_backoff_factor, "fp16: the scale is multiplied by this after a step whose gradients overflowed (that step is skipped).");
    v.field("loss_scale_growth_interval", loss_scale_growth_interval, "fp16, dynamic: consecutive good steps before the scale grows.");
    v.field("loss_scale_static", loss_scale_static, "fp16: keep the scale fixed at loss_scale_initial (overflowed steps are still skipped).");
    v.choice("fp8.backward", fp8_backward, {"bf16", "e5m2"}, "fp8: format of the output gradient in the linear layers' backward products: bf16, or e5m2 with its own per-tensor scale (Transformer Engine's HYBRID).");
    v.choice("fp8.scaling", fp8_scaling, {"delayed", "current"}, "fp8: delayed takes each tensor's scale from the amax history of earlier steps; current from the tensor's own amax just before it is cast.");
    v.field("fp8.amax_history", fp8_amax_history, "fp8, delayed: steps of amax history each scale is computed from.");
    v.choice("fp8.amax_algorithm", fp8_amax_algorithm, {"max", "most_recent"}, "fp8, delayed: the history's max, or its newest amax.");
    v.field("fp8.margin", fp8_margin, "fp8: scale = (format max / amax) / 2^margin.");
    v.field("fp8.bf16_layers", fp8_bf16_layers, "fp8: keep the first and the last N blocks in BF16.");
    v.choice("cpu_narrow_matmul", cpu_narrow_matmul, {"native", "exact"}, "CPU, narrow recipes: native multiplies BF16 and FP8 operands with oneDNN's BF16 matmul where the CPU does so natively (AVX512-BF16, AMX; elsewhere, and for F16, as exact): FP32 accumulation in oneDNN's order, so losses differ from exact in the last bits (about 1e-5 relative after a few steps); exact decodes them to FP32 for OpenBLAS, the exact emulation's arithmetic bit for bit.");
    v.field("tf32", tf32, "CUDA, fp32 recipe: run the FP32 matrix products on TF32 tensor cores (inputs rounded to 10 mantissa bits, FP32 accumulation): several times faster, no longer within 1e-5 of the CPU.");
  }
};

// Low-rank adaptation (Hu et al., LoRA): each targeted linear layer's frozen weight W [out, in] gains
// (alpha / rank) B A with A [rank, in] and B [out, rank] trained; rank 0 trains every weight instead.
struct FinetuneConfig {
  int lora_rank = 0;
  double lora_alpha = 16.0;
  double lora_dropout = 0.0;
  std::vector<std::string> lora_targets = {"qkv", "attn_proj", "fc", "fc_proj"};

  bool lora() const { return lora_rank > 0; }

  template <class V>
  void visit(V& v) {
    v.field("lora.rank", lora_rank, "LoRA rank r: > 0 freezes the base weights (held only in the compute format: no FP32 master, gradients or AdamW state for them) and trains FP32 adapters A [r, in] and B [out, r] (B starts at zero, so step 0 is the base model) on the layers of lora.targets; 0 trains every weight (full fine-tuning).");
    v.field("lora.alpha", lora_alpha, "LoRA scale numerator: the adapters add (alpha / rank) B A to each targeted weight.");
    v.field("lora.dropout", lora_dropout, "Dropout probability on each adapter's input (the base product sees the input undropped), as PEFT's lora_dropout.");
    v.subset("lora.targets", lora_targets, {"qkv", "attn_proj", "fc", "fc_proj"}, "The linear layers of every block that get adapters: qkv (attn.c_attn), attn_proj (attn.c_proj), fc (mlp.c_fc), fc_proj (mlp.c_proj).");
  }
};

struct Config {
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  OptimConfig optim;
  CheckpointConfig checkpoint;
  LogConfig log;
  DistConfig dist;
  RecomputeConfig recompute;
  MemoryConfig memory;
  PrecisionConfig precision;
  FinetuneConfig finetune;

  template <class V>
  void visit(V& v) {
    v.section("model", model);
    v.section("data", data);
    v.section("train", train);
    v.section("optim", optim);
    v.section("checkpoint", checkpoint);
    v.section("log", log);
    v.section("dist", dist);
    v.section("recompute", recompute);
    v.section("memory", memory);
    v.section("precision", precision);
    v.section("finetune", finetune);
  }
};

}  // namespace gpt
