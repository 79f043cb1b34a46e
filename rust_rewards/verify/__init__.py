"""Judging Rust with the toolchain: crates, the sandbox, one crate's passes (``passes``), the task's side of a
verdict (``reference``), the single and batch paths, the verifier."""
