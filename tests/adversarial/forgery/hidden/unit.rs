#[test]
fn h1() {
    assert_eq!(add(2, 3), 5);
}

#[test]
fn h2() {
    assert_eq!(add(1, 1), 2);
}

#[test]
fn h3() {
    assert!(add(-1, 4) == 3);
}
