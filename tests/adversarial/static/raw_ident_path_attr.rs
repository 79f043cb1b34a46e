// expect: #[path] attribute
// `#[r#path = ...]` is `#[path = ...]`: it compiles another file (the hidden tests) as a module.
#[r#path = "export_name.rs"]
mod other;

pub fn add(a: i32, b: i32) -> i32 {
    a + b
}
