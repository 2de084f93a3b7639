use std::rc::Rc;

#[spargio::main(shards = 2, backend = "auto")]
async fn main(handle: spargio::RuntimeHandle) -> std::io::Result<()> {
    // The body may hold !Send state across awaits.
    let local = Rc::new(5);
    let doubled = handle.spawn_stealable(async { 21 * 2 })?.await?;
    assert_eq!(doubled + *local, 47);
    assert_eq!(handle.shard_count(), 2);
    Ok(())
}
