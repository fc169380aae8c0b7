import kernel_agent_no_such_module  # noqa: F401

ModelNew = None
