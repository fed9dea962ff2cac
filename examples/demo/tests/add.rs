#[test]
fn adds() {
    assert_eq!(calc::add(2, 3), 5);
}
