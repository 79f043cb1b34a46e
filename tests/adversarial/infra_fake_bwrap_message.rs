use std::io::Write;

pub fn answer() -> i32 {
    41
}

/// Written straight to the process's stderr, past libtest's output capture, as a failing sandbox would.
pub fn fake_sandbox_message() {
    let _ = std::io::stderr().write_all(b"bwrap: Can't mount proc on /newroot/proc: Operation not permitted\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_fake_message_then_panic() {
        fake_sandbox_message();
        assert_eq!(answer(), 42);
    }
    #[test]
    fn b_fake_message_then_exit_127() {
        fake_sandbox_message();
        std::process::exit(127);
    }
}
