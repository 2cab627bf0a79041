"""Independent soundness suite: exact 1-D references that share no code with the accountant."""
