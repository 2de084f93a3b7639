#[spargio::main(flavor = "local")]
async fn main() {}
