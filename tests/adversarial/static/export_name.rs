// expect: #[export_name] attribute
// An exported `main` symbol replaces the test harness's entry point.
#[export_name = "main"]
pub extern "C" fn fake_main() -> i32 {
    0
}

pub fn add(a: i32, b: i32) -> i32 {
    a - b
}
