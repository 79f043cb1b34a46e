"""Judging Rust with the toolchain: crates, the sandbox, the single and batch paths, the verifier."""
