"""Reading Rust text without a toolchain: the lexer, code extraction, item signatures, mutants."""
