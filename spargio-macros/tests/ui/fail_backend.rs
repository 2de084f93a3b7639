#[spargio::main(backend = "kqueue")]
async fn main() {}
