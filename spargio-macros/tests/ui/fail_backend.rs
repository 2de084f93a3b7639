#[spargio::main(backend = "epoll")]
async fn main() {}
