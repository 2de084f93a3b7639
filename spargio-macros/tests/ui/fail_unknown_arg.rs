#[spargio::main(threads = 2)]
async fn main() {}
