#[spargio::main]
fn main() {}
