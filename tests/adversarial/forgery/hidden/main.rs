fn main() {
    let candidate = add;
    assert_eq!(candidate(2, 3), 5);
    assert_eq!(candidate(1, 1), 2);
}
