"""The tuner's workers: measurements in the sandbox and their correctness checks on the host."""
