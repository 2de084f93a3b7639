#[spargio::main(shards = 0)]
async fn main() {}
