#[spargio::main]
async fn main(a: spargio::RuntimeHandle, b: u32) {}
