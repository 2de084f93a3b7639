#[spargio::main(tokio_compat = 1)]
async fn main() {}
