//! What `#[ferroflow::function]` refuses at compile time: each `tests/ui/*.rs` must fail to
//! compile with the message in its `.stderr`, pointing at the offending construct in the user's
//! code (not at the attribute or into the expansion). `TRYBUILD=overwrite` rewrites the
//! `.stderr` files.

#[test]
fn refusals_point_at_the_user_code() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
