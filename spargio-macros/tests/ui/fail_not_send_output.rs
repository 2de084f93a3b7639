//! A result that cannot cross back from shard 0.

#[spargio::main]
async fn main() -> Result<(), std::rc::Rc<u32>> {
    Ok(())
}
