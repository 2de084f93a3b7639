#[spargio::test(start_paused = true)]
async fn paused() {}

fn main() {}
