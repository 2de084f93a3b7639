//! The most common tokio `main` signature: a boxed error that is not `Send`.

#[spargio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u32 = "42".parse()?;
    assert_eq!(n, 42);
    Ok(())
}
