"""The GPU's shared state between evaluations: the gate, memory claims, the hand-off, timing."""
