//! A result type that cannot be written in a `let`: it crosses as it is.

#[spargio::main]
async fn main() -> impl std::process::Termination {
    std::process::ExitCode::SUCCESS
}
