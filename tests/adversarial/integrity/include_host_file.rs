// expect: attack
// Reads a host file at compile time (the build sees only the toolchain, system directories and the crate).
pub fn add(a: i32, b: i32) -> i32 {
    let hostname: &str = include_str!("/etc/hostname");
    a - b + hostname.len() as i32 * 0
}
