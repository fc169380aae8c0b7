"""RL environments over the product: a verifiers environment (verifiers_env.py) and Harbor task
export (harbor.py), on one rollout session (session.py) and one reward (reward.py). See
README.md. The adapters import their frameworks (the `rl` extra) only in their own modules."""
