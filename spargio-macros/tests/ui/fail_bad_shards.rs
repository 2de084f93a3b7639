#[spargio::main(shards = "two")]
async fn main() {}
