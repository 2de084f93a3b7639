//! Macro expansion: good signatures compile and run, bad ones are errors
//! that point at the offending tokens.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass_*.rs");
    t.compile_fail("tests/ui/fail_*.rs");
}
