#[spargio::main]
async fn main() {
    let ctx = spargio::ShardCtx::current().expect("runs on a shard");
    assert_eq!(ctx.shard_id(), 0);
}
