"""Workers that compile model-written code: the build worker, its load check, the shared toolchain."""
