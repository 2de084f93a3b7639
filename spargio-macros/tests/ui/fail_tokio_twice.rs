#[spargio::main(shards = 2, worker_threads = 2)]
async fn main() {}
