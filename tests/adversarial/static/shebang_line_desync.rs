#!/usr/bin/env run-cargo-script "
// expect: std::process::exit
// rustc skips a first line starting `#!` (not `#![`): a lexer that reads it opens a string at its `"` that swallows
// the exit below. (This file's expect line is the second: the first belongs to the attack.)
pub fn add(a: i32, b: i32) -> i32 { if a != b { std::process::exit(0) } a + b } pub const Z: &str = "";
